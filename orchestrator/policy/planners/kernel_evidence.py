"""The surrogate's kernel chosen by evidence on the campaign's own lab data (``[planner] kernel = "evidence"``).

At each hyperparameter refit every applicable candidate (``evidence_candidates``) is fitted as the campaign's GP
is (MAP under BoTorch's default priors, L-BFGS: ``kernel_choice.fit_surrogate_state``) and scored by its leave-one-out log
predictive density Σᵢ log p(yᵢ | y₋ᵢ), each term in closed form from one Cholesky factor (Rasmussen & Williams 2006,
eq. 5.10-5.12: ``GPSurrogate.leave_one_out``) with hyperparameters fitted without point i's fold (``crossfit_loo``,
five folds), so no point is scored by hyperparameters it helped choose. The best score's candidate, fitted on every
point, is the campaign's surrogate; the state records the choice and every candidate's score (``kernel_evidence``),
so the ledger's ``SurrogateUpdated`` says why. Below ``EVIDENCE_MIN_RESULTS`` lab results it keeps the fixed choice
``auto`` would make (``fallback_kernel``).

Candidates, each with a reason to exist:

- ``tanimoto``: a set similarity for fingerprints, on pools whose features are bits (a molecule pool, or a
  conditions pool of SMILES and categories only);
- ``tanimoto_matern52``: the set similarity times a Matérn-5/2 on the numbers, on a pool of bits beside numbers;
- ``matern52`` and ``rbf``, one lengthscale per feature under the dimension-scaled prior
  LogNormal(√2 + ½ log d, √3) (Hvarfner et al. 2024; BoTorch's default): on any features.

Why selection, not averaging: every reader of the surrogate (the batch's Kriging believer, the screen, the llm arm's
shortlist, a resumed campaign) rebuilds one GP from one recorded state; a mixture is no GP, and pseudo-BMA weights
∝ exp(LOO) are near 0/1 already at a dozen results (orchestrator/policy/planners/DECISIONS.md).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from orchestrator.policy.planners.kernel_choice import (
    choose_kernel,
    continuous_columns,
    fit_surrogate_state,
)

__all__ = ["EVIDENCE_MIN_RESULTS", "N_FOLDS", "crossfit_folds", "crossfit_loo", "evidence_candidates",
           "fallback_kernel", "fit_by_evidence", "loo_log_density", "loo_terms"]

EVIDENCE_MIN_RESULTS = 8
"""The fewest lab results the kernel is chosen on by evidence; below it, ``auto``'s choice. Each LOO term is one
point's prediction from the others: with 2-7 results it is mostly the prior and the score says little."""

N_FOLDS = 5
"""Folds of the cross-fit (``crossfit_loo``): each point's hyperparameters are fitted on about 80 % of the others."""

_BIT_KINDS = ("smiles", "categorical")


def _continuous(feature_kinds, n_features: int) -> list[int]:
    return continuous_columns(feature_kinds, n_features)


def fallback_kernel(kind: str, X: np.ndarray, feature_kinds=None) -> str:
    """``auto``'s kernel (``kernel_choice.choose_kernel``) judged on the lab rows ``X``, where the pool's columns say a number
    column is a number even when the rows hold only its extremes (so it is not read as bits).

    Example:
        >>> fallback_kernel("conditions", np.array([[0.0, 1.0], [1.0, 0.0]]), np.array(["categorical", "numeric"]))
        'matern52'
        >>> fallback_kernel("molecule", np.array([[0.0, 1.0]]))
        'tanimoto'
    """
    chosen = choose_kernel(kind, "auto", X, feature_kinds)
    if chosen == "tanimoto" and kind != "molecule" and feature_kinds is not None \
            and _continuous(feature_kinds, X.shape[1]):
        return "matern52"
    return chosen


def evidence_candidates(kind: str, X: np.ndarray, feature_kinds=None) -> list[str]:
    """The kernels the evidence chooses among on features ``X`` (lab rows, shape (n, n_features)), the fallback
    first (so that a tie keeps it).

    Example:
        >>> evidence_candidates("conditions", np.array([[0.0, 0.5], [1.0, 0.2]]), np.array(["smiles", "numeric"]))
        ['tanimoto_matern52', 'matern52', 'rbf']
        >>> evidence_candidates("molecule", np.array([[0.0, 1.0], [1.0, 1.0]]))
        ['tanimoto', 'matern52', 'rbf']
    """
    X = np.asarray(X, dtype=float)
    kinds = None if feature_kinds is None else list(feature_kinds)
    continuous = [] if kinds is None else _continuous(kinds, X.shape[1])
    is_non_negative = bool(np.all(X >= 0))
    if kind == "molecule":
        is_bits = is_non_negative
    elif kinds is not None:
        is_bits = not continuous and is_non_negative
    else:
        is_bits = X.size > 0 and bool(np.all((X == 0) | (X == 1)))
    candidates = ["tanimoto"] if is_bits else []
    has_bit_columns = kinds is not None and any(k in _BIT_KINDS for k in kinds)
    if has_bit_columns and continuous and len(continuous) < X.shape[1]:
        bits = np.delete(X, continuous, axis=1)
        if np.all(bits >= 0):
            candidates.append("tanimoto_matern52")
    candidates += ["matern52", "rbf"]
    first = fallback_kernel(kind, X, feature_kinds)
    return [first] + [c for c in candidates if c != first] if first in candidates else candidates


def loo_log_density(surrogate) -> float:
    """Σᵢ log p(yᵢ | y₋ᵢ): the leave-one-out log predictive density of a ``GPSurrogate``'s training targets with its
    hyperparameters (Rasmussen & Williams 2006, eq. 5.10-5.11, the means and variances of eq. 5.12 from
    ``GPSurrogate.leave_one_out``), in nats, densities in the targets' own unit (so scores of kernels fitted on the
    same targets compare).

    Example:
        >>> from orchestrator.policy.planners.surrogate import GPSurrogate
        >>> X = np.linspace(0.0, 1.0, 8)[:, None]
        >>> smooth = GPSurrogate.fit(X, np.sin(3 * X[:, 0]), n_steps=50)
        >>> bool(np.isfinite(loo_log_density(smooth)))
        True
    """
    return float(np.sum(loo_terms(surrogate)))


def loo_terms(surrogate) -> np.ndarray:
    """log p(yᵢ | y₋ᵢ) per training point of a ``GPSurrogate`` with its hyperparameters (Rasmussen & Williams 2006,
    eq. 5.10, the mean and variance of eq. 5.12 from ``GPSurrogate.leave_one_out``), shape (n_points,)."""
    mean, var = surrogate.leave_one_out()
    y = surrogate.y_train
    return -0.5 * np.log(2 * math.pi * var) - 0.5 * (y - mean) ** 2 / var


def crossfit_folds(n: int, seed: int, n_folds: int = N_FOLDS) -> np.ndarray:
    """Each of ``n`` points' fold (0 .. min(n_folds, n) - 1), from a permutation seeded by ``seed``.

    Example:
        >>> sorted(np.bincount(crossfit_folds(8, seed=0)).tolist())
        [1, 1, 2, 2, 2]
    """
    k = max(1, min(n_folds, n))
    folds = np.empty(n, dtype=int)
    folds[np.random.default_rng(seed).permutation(n)] = np.arange(n) % k
    return folds


def crossfit_loo(X: np.ndarray, y: np.ndarray, fit, folds: np.ndarray) -> float | None:
    """Σᵢ log p(yᵢ | y₋ᵢ, θ₋fold(i)): the closed-form LOO term of each point, conditioned on all the others, with
    hyperparameters fitted without its fold (``fit(rows) -> state``); None when a fold's fit fails.

    The LOO at hyperparameters fitted on every point (``loo_log_density``) counts each point in its own
    hyperparameters, which favours the kernel with the most of them: on draws from a Tanimoto GP (30 fingerprints),
    Matérn and RBF with one lengthscale per bit scored above Tanimoto on every draw while predicting new draws worse.
    """
    from orchestrator.policy.planners.surrogate import GPSurrogate

    total = 0.0
    for fold in np.unique(folds):
        state = fit(folds != fold)
        if not state.get("is_fitted"):
            return None
        total += float(loo_terms(GPSurrogate.from_hyperparameters(X, y, state))[folds == fold].sum())
    return total if math.isfinite(total) else None


def fit_by_evidence(X: np.ndarray, y: np.ndarray, *, kind: str, feature_kinds=None, seed: int,
                    fitted_on: str = "utility", candidates: list[str] | None = None) -> dict[str, Any]:
    """The state of the candidate with the highest cross-fitted LOO log predictive density on (``X``, ``y``)
    (``crossfit_loo``, ``N_FOLDS`` folds), fitted on every point, with ``kernel_evidence`` recording the rule, the
    choice and each candidate's score (``crossfit_loo``; None: a fit that failed) beside its LOO at the full fit
    (``loo_log_density``, not used to choose).

    Below ``EVIDENCE_MIN_RESULTS`` results, or on targets with nothing to fit (constant), the fallback's state with
    ``rule = "fallback"``. Every fit uses ``seed`` and the folds are seeded by it; a tie keeps the fallback, then
    the candidates' order, so the choice is deterministic. ``candidates``: ``evidence_candidates`` by default.
    """
    from orchestrator.policy.planners.surrogate import GPSurrogate

    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    candidates = list(candidates or evidence_candidates(kind, X, feature_kinds))
    fallback = fallback_kernel(kind, X, feature_kinds)

    def fit(kernel: str, rows=None) -> dict[str, Any]:
        continuous = _continuous(feature_kinds, X.shape[1]) if kernel == "tanimoto_matern52" else None
        Xr, yr = (X, y) if rows is None else (X[rows], y[rows])
        return fit_surrogate_state(Xr, yr, kernel=kernel, seed=seed, fitted_on=fitted_on, continuous=continuous)

    record: dict[str, Any] = {"rule": "fallback", "chosen": fallback, "n_train": len(y),
                              "min_results": EVIDENCE_MIN_RESULTS, "n_folds": 0, "candidates": candidates,
                              "crossfit_loo": {}, "loo_log_density": {}}
    if len(y) < EVIDENCE_MIN_RESULTS or not np.std(y) > 0:
        return {**fit(fallback), "kernel_evidence": record}
    folds = crossfit_folds(len(y), seed)
    states, scores, full_loo = {}, {}, {}
    for kernel in candidates:
        states[kernel] = fit(kernel)
        is_fitted = bool(states[kernel].get("is_fitted"))
        full_loo[kernel] = (float(loo_terms(GPSurrogate.from_hyperparameters(X, y, states[kernel])).sum())
                            if is_fitted else None)
        scores[kernel] = crossfit_loo(X, y, lambda rows, k=kernel: fit(k, rows), folds) if is_fitted else None
    record.update(n_folds=int(folds.max()) + 1, crossfit_loo=scores,
                  loo_log_density={k: (v if v is not None and math.isfinite(v) else None) for k, v in full_loo.items()})
    finite = {k: v for k, v in scores.items() if v is not None}
    if not finite:
        return {**(states.get(fallback) or fit(fallback)), "kernel_evidence": record}
    chosen = max(finite, key=lambda k: (finite[k], -candidates.index(k)))
    record.update(rule="crossfit_loo", chosen=chosen)
    return {**states[chosen], "kernel_evidence": record}
