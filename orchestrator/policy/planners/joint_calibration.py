"""The ladder prior's line re-estimated jointly with the GP: generalised least squares under its covariance.

``ladder_prior.choose_prior`` fits ``lab ≈ intercept + slope · rung`` on the lab pairs as if their residuals were
independent. They are not: the GP models them as correlated over the features, and the design picks candidates by
the GP's predictions. Among the picks, a rung value that reads high is then paired with a residual the GP predicted
low (they compete to land a candidate in the window: Berkson's bias), so least squares on the picks flattens the
line (on the band gap, 0.95 over the pool, 0.45–0.65 on the pairs of seed 0 from 10 pairs on). The likelihood of
the whole model, line plus GP, is not biased by a selection that depends only on what was observed (Rubin's
ignorability of an adaptive design); its estimate of the line for given GP hyperparameters is generalised least
squares under the GP's covariance (universal kriging). The same unit-information prior as ``shrunk_calibration``
(the identity, with the weight of one pair: one pair's marginal variance under the GP) keeps a handful of pairs
from swinging the line.

One GP fit on the residuals from the shrunk line gives the covariance; the line is then solved in closed form, and
the campaign's surrogate is fitted on the residuals from it (``campaign_surrogate_state``), as before.

Example:
    >>> import numpy as np
    >>> b, m = gls_calibration(np.arange(6.0), 2 * np.arange(6.0) + 1, np.eye(6), spread=1.0, centre=2.5)
    >>> round(b, 2), round(m, 2)  # independent residuals: shrunk_calibration's line
    (0.64, 1.95)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from orchestrator.policy.planners.bo import choose_kernel, fit_surrogate_state, surrogate_fits_values
from orchestrator.policy.planners.ladder_prior import prior_rows

__all__ = ["gls_calibration", "joint_prior", "log_evidence"]


def gls_calibration(proxy: np.ndarray, lab: np.ndarray, covariance: np.ndarray, *, spread: float,
                    centre: float) -> tuple[float, float]:
    """(intercept, slope) of ``lab ≈ intercept + slope · proxy`` by GLS under ``covariance``, shrunk to the identity.

    Args:
        proxy, lab: the rung's values and the lab values at the lab's rows (objective unit).
        covariance: the residuals' covariance at those rows, in the lab unit squared (GP plus noise).
        spread, centre: the rung's sd and mean over the candidates it has seen (its unit).

    The prior is ``shrunk_calibration``'s: in centred coordinates mean (centre, 1) and precision diag(1, spread²)
    divided by one pair's variance, here the mean of the covariance's diagonal. With ``covariance`` the identity
    this is ``shrunk_calibration`` exactly.
    """
    spread = spread if spread > 0 and math.isfinite(spread) else 1.0
    x = np.asarray(proxy, dtype=float) - centre
    X = np.column_stack([np.ones(len(x)), x])
    covariance = np.asarray(covariance, dtype=float)
    unit = float(np.mean(np.diag(covariance))) if len(x) else 1.0
    prior_precision = np.diag([1.0, spread**2]) / max(unit, 1e-12)
    chol = np.linalg.cholesky(covariance + 1e-10 * unit * np.eye(len(x)))
    Xw = np.linalg.solve(chol, X)
    yw = np.linalg.solve(chol, np.asarray(lab, dtype=float))
    rhs = prior_precision @ np.array([centre, 1.0]) + Xw.T @ yw
    a, m = np.linalg.solve(prior_precision + Xw.T @ Xw, rhs)
    return float(a - m * centre), float(m)


def joint_prior(prior: dict[str, Any] | None, rung_values: Mapping[str, np.ndarray] | None, X_train: np.ndarray,
                rows: np.ndarray, values: np.ndarray, spec, *, seed: int,
                is_evidence_checked: bool = True) -> dict[str, Any] | None:
    """``prior`` (from ``choose_prior``) with its line re-estimated jointly with the GP (``gls_calibration``).

    The GP is fitted as the campaign's would be on the residuals from ``prior``'s line (its kernel, MAP
    hyperparameters), and its covariance at the lab's rows, plus its noise, weighs the pairs. None stays None; a
    prior with fewer than 3 lab results, or whose rung is not surveyed here, is returned as it is.

    Args:
        X_train: features of the lab results; rows: their pool rows; values: the lab values (objective unit).
        seed: the GP fit's seed.
    """
    rows = np.asarray(rows, dtype=int)
    if prior is None or not rung_values or prior["rung"] not in rung_values or len(rows) < 3:
        return prior
    values = np.asarray(values, dtype=float)
    fits_values = surrogate_fits_values(spec)
    fitted_on = "value" if fits_values else "utility"
    y = values if fits_values else np.asarray([spec.objective.utility(v) for v in values], dtype=float)
    y = y - prior_rows(prior, rung_values, spec, fitted_on=fitted_on)[rows]
    kernel = choose_kernel(spec.campaign.kind, spec.planner.kernel)
    state = fit_surrogate_state(X_train, y, kernel=kernel, seed=seed, fitted_on=fitted_on)
    if not state.get("is_fitted", False):
        return prior
    covariance = _covariance(X_train, y, state)
    raw = np.asarray(rung_values[prior["rung"]], dtype=float)
    finite = raw[np.isfinite(raw)]
    proxy = np.where(np.isfinite(raw), raw, prior["fill"])[rows]
    intercept, slope = gls_calibration(proxy, values, covariance,
                                       spread=float(np.std(finite)) if len(finite) > 1 else 1.0,
                                       centre=float(np.mean(finite)) if len(finite) else 0.0)
    joint = {**prior, "intercept": intercept, "slope": slope, "line": "gls"}
    if not is_evidence_checked:
        return joint
    y_lab = y + prior_rows(prior, rung_values, spec, fitted_on=fitted_on)[rows]
    plain = fit_surrogate_state(X_train, y_lab, kernel=kernel, seed=seed, fitted_on=fitted_on)
    if not plain.get("is_fitted", False):
        return joint
    with_rung = log_evidence(y_lab, prior_rows(joint, rung_values, spec, fitted_on=fitted_on)[rows], covariance,
                             n_mean_parameters=2)
    without = log_evidence(y_lab, np.full(len(rows), plain["y_mean"]), _covariance(X_train, y_lab, plain),
                           n_mean_parameters=1)
    return joint if with_rung >= without else None


def _covariance(X_train: np.ndarray, y: np.ndarray, state: dict[str, Any]) -> np.ndarray:
    """The GP's covariance of the lab numbers at the training rows (kernel plus noise), in their unit squared."""
    from orchestrator.policy.planners.surrogate import GPSurrogate

    surrogate = GPSurrogate.from_hyperparameters(X_train, y, state)
    return (surrogate.kernel_matrix(X_train) + state["noise"] * np.eye(len(y))) * state["y_sd"] ** 2


def log_evidence(y: np.ndarray, mean: np.ndarray, covariance: np.ndarray, *, n_mean_parameters: int) -> float:
    """Schwarz's approximation of a model's log evidence: the Gaussian log likelihood of ``y`` at the fitted mean
    and covariance, less ½ log n per parameter of the mean (the GP's own hyperparameters are common to the models
    compared, so they cancel). With the unit-information prior on the line this is the Bayes factor's own
    approximation (Kass & Wasserman, 1995).

    Example:
        >>> y = np.array([0.0, 1.0, 2.0, 3.0])
        >>> fit = log_evidence(y, y, np.eye(4), n_mean_parameters=2)
        >>> flat = log_evidence(y, np.full(4, 1.5), np.eye(4), n_mean_parameters=1)
        >>> bool(fit > flat)
        True
    """
    y = np.asarray(y, dtype=float)
    n = len(y)
    chol = np.linalg.cholesky(np.asarray(covariance, dtype=float) + 1e-10 * np.mean(np.diag(covariance)) * np.eye(n))
    z = np.linalg.solve(chol, y - np.asarray(mean, dtype=float))
    log_likelihood = -0.5 * float(z @ z) - float(np.log(np.diag(chol)).sum()) - 0.5 * n * math.log(2 * math.pi)
    return log_likelihood - 0.5 * n_mean_parameters * math.log(n)
