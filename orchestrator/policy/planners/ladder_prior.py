"""The ladder as the surrogate's prior mean: a surveyed rung calibrated against the lab results so far.

This is the campaign's multi-fidelity model in its mean-function form (co-kriging à la Kennedy & O'Hagan, with the
linear calibration as the scale factor): the GP models the lab's residual from ``intercept + slope · rung value``.

Which rung, decided when the surrogate is fitted (``choose_prior``) and recorded in its state, so every reader of
that state (the planners, the screen's beliefs, the llm arm's tools) conditions on the same prior:

- with fewer than ``screening.min_pairs`` lab results, the dearest surveyed rung (the ladder's premise: a dearer
  rung is the higher fidelity): escalation's optimistic prior, calibrated on every pair as it arrives (with no pair,
  the rung as it stands);
- afterwards, among the rungs that are informative (``RungCalibration.is_informative``: ρ ≥
  ``screening.min_informativeness`` and significant), the one with the largest ρ; with none proved yet, the
  dearest rung that the pairs have not ruled out (``is_calibrated`` False);
- every rung ruled out: no prior, and the planner is plain BO on the lab data.

Calibrations are value on value (a target window's fold stays out of the fit), shrunk towards the lab regressed on
the rung standardised over the pool (``escalation.shrunk_calibration``), so a handful of extreme pairs cannot swing
the line, and the prior in the lab's unit, the choice of rung and its ``evidence`` are the same whatever affine unit
the rung reports in.

The chosen rung enters the GP in one of two **forms** (``prior_form``), by the kernel:

- ``mean`` (Tanimoto on fingerprints): the calibrated rung is the prior mean and the GP models the residual, which
  learns a simulator's systematic errors by structure (GAFF on FreeSolv).
- ``feature`` (Matérn-5/2 with one lengthscale per input): the rung, min-max scaled over the pool, is one more input
  beside the descriptors, and the fit decides how much it says (its own ARD lengthscale): the nonlinear
  autoregressive form of multi-fidelity GPs (Perdikaris et al., 2017, ``f_lab(x) = g(x, f_rung(x))``). A prior mean
  fixes the rung's weight at the calibration's slope whatever the descriptors know; when the rung's scatter is
  wider than what is sought (PBE's ≈ 0.5 eV against a ±0.1 eV window), the residual is noise to the GP and the
  descriptors go unused. A fingerprint kernel has no lengthscale to weigh a continuous input, hence the mean there.

Example:
    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> objective = SimpleNamespace(direction="maximize", target=None)
    >>> screening = SimpleNamespace(min_pairs=5, min_informativeness=0.3)
    >>> spec = SimpleNamespace(objective=objective, screening=screening)
    >>> rung = {"cheap": np.arange(10.0)}
    >>> prior = choose_prior(rung, np.arange(6), 2 * np.arange(6.0) + 1, spec)
    >>> prior["rung"], round(prior["slope"], 2), round(prior["intercept"], 2)  # 2 · rung + 1, exact on 6 pairs
    ('cheap', 2.0, 1.0)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

from orchestrator.policy.escalation import calibrate_rung, probability_informative

__all__ = ["choose_prior", "prior_form", "prior_rows", "surrogate_features"]


PriorForm = Literal["mean", "feature"]


def prior_form(kernel: str, features) -> PriorForm:
    """How the chosen rung enters a GP with ``kernel`` (``bo.choose_kernel``'s choice): as a ``feature`` for a
    Matérn kernel on an in-memory pool, else as the prior ``mean`` (a fingerprint kernel, or a pool streamed chunk
    by chunk, whose features are not one matrix)."""
    return "feature" if kernel == "matern52" and isinstance(features, np.ndarray) else "mean"


def choose_prior(rung_values: Mapping[str, np.ndarray] | None, observed: np.ndarray, lab_values: np.ndarray,
                 spec, *, form: PriorForm = "mean") -> dict[str, Any] | None:
    """The prior to fit the surrogate with, as a JSON-safe dict, or None.

    Args:
        rung_values: surveyed rungs, name -> value per pool row (NaN where unknown), cheapest first.
        observed: pool rows of the lab results.
        lab_values: the lab results in the objective's unit, in the same order.
        spec: the campaign spec (its ``screening`` thresholds).
        form: ``mean`` or ``feature`` (``prior_form``); a feature prior records the rung's range over the pool,
            which scales it to [0, 1].
    """
    prior = _chosen_prior(rung_values, observed, lab_values, spec)
    if prior is None or form == "mean":
        return prior
    finite = np.asarray(rung_values[prior["rung"]], dtype=float)
    finite = finite[np.isfinite(finite)]
    low, high = (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 1.0)
    return {**prior, "form": "feature", "feature_range": [low, high]}


def _chosen_prior(rung_values: Mapping[str, np.ndarray] | None, observed: np.ndarray, lab_values: np.ndarray,
                  spec) -> dict[str, Any] | None:
    if not rung_values:
        return None
    observed = np.asarray(observed, dtype=int)
    lab_values = np.asarray(lab_values, dtype=float)
    screening = spec.screening
    calibrations = {}
    for name, values in rung_values.items():
        values = np.asarray(values, dtype=float)
        known = np.isfinite(values[observed])
        finite = values[np.isfinite(values)]
        calibrations[name] = calibrate_rung(name, list(zip(values[observed][known], lab_values[known], strict=True)),
                                            spread=float(np.std(finite)) if len(finite) > 1 else None,
                                            centre=float(np.mean(finite)) if len(finite) else 0.0)
    numbers = {name: c.as_numbers() for name, c in calibrations.items()}
    if len(observed) < screening.min_pairs:  # too few pairs to judge: the highest-fidelity rung, as it stands
        name = next(reversed(rung_values))
        first = calibrations[name]
        return {"rung": name, "intercept": first.intercept, "slope": first.slope, "fill": _fill(rung_values[name]),
                "is_calibrated": False, "evidence": _evidence(rung_values[name], observed, lab_values),
                "calibrations": numbers}
    verdicts = {name: c.is_informative(min_pairs=screening.min_pairs,
                                       min_informativeness=screening.min_informativeness)
                for name, c in calibrations.items()}
    informative = [name for name, verdict in verdicts.items() if verdict]
    if informative:
        name = max(informative, key=lambda n: calibrations[n].spearman)
        is_calibrated = True
    else:
        undecided = [name for name, verdict in verdicts.items() if verdict is None]
        if not undecided:
            return None
        name, is_calibrated = undecided[-1], False  # the dearest rung not yet ruled out keeps its optimistic prior
    chosen = calibrations[name]
    return {"rung": name, "intercept": chosen.intercept, "slope": chosen.slope, "fill": _fill(rung_values[name]),
            "is_calibrated": is_calibrated, "evidence": _evidence(rung_values[name], observed, lab_values),
            "calibrations": numbers}


def _evidence(values: np.ndarray, observed: np.ndarray, lab_values: np.ndarray) -> float:
    """P(the lab rises with this rung | its pairs so far) (``escalation.probability_informative``, on the scale of
    the rung over the pool, as its calibration): how much of a batch ``bo.rung_slots`` gives the rung's order."""
    values = np.asarray(values, dtype=float)
    finite = values[np.isfinite(values)]
    known = np.isfinite(values[observed])
    return probability_informative(values[observed][known], np.asarray(lab_values, dtype=float)[known],
                                   spread=float(np.std(finite)) if len(finite) > 1 else None)


def _fill(values: np.ndarray) -> float:
    """What a failed rung evaluation is taken to say: the rung's median (a middling guess)."""
    finite = np.asarray(values, dtype=float)
    finite = finite[np.isfinite(finite)]
    return float(np.median(finite)) if len(finite) else 0.0


def prior_rows(prior: dict[str, Any] | None, rung_values: Mapping[str, np.ndarray] | None, spec,
               *, fitted_on: str) -> np.ndarray | None:
    """The prior per pool row in the surrogate's unit: the calibrated value (``fitted_on="value"``) or its utility.

    None when there is no prior, when the rung is a feature rather than the mean (``surrogate_features``), or when
    its rung is not surveyed here (then the state cannot be used with a prior).
    """
    if prior is None or prior.get("form") == "feature" or not rung_values or prior["rung"] not in rung_values:
        return None
    raw = np.asarray(rung_values[prior["rung"]], dtype=float)
    value = prior["intercept"] + prior["slope"] * np.where(np.isfinite(raw), raw, prior["fill"])
    if fitted_on == "value":
        return value
    direction, target = spec.objective.direction, spec.objective.target
    if direction == "maximize":
        return value
    if direction == "minimize":
        return -value
    return -np.abs(value - float(target))


def surrogate_features(features, prior: dict[str, Any] | None, rung_values: Mapping[str, np.ndarray] | None):
    """The GP's inputs per pool row: ``features``, plus the prior's rung min-max scaled over the pool as the last
    column when the prior is a ``feature`` (a failed evaluation reads as the rung's median). The descriptors are
    min-max scaled too, so the rung meets the same lengthscale prior as any of them and the fit alone weighs it.

    Example:
        >>> prior = {"rung": "cheap", "form": "feature", "feature_range": [0.0, 4.0], "fill": 2.0}
        >>> surrogate_features(np.zeros((2, 1)), prior, {"cheap": np.array([1.0, np.nan])}).tolist()
        [[0.0, 0.25], [0.0, 0.5]]
    """
    if not prior or prior.get("form") != "feature" or not rung_values or prior["rung"] not in rung_values:
        return features
    raw = np.asarray(rung_values[prior["rung"]], dtype=float)
    low, high = prior["feature_range"]
    column = (np.where(np.isfinite(raw), raw, prior["fill"]) - low) / ((high - low) or 1.0)
    return np.hstack([np.asarray(features, dtype=float), column[:, None]])
