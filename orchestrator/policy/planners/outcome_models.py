"""One GP per measured column beyond the campaign's own surrogate: each objective of several, each outcome
constraint, the success labels. Every one is the campaign's GP (``fit_surrogate_state``: MAP under BoTorch's
priors, L-BFGS) on the same features and kernel choice as the single-objective arm, fitted on that column's
observed numbers, seeded by the campaign seed, the iteration and the column's name, so a plan is reproducible.

A fit on 40 results takes about 20 ms here; fits are cached on their exact inputs, so the planners, the screen and a
re-plan of one step share them.
"""

from __future__ import annotations

import functools
import json
import zlib
from typing import Any

import numpy as np
from scipy import special

from orchestrator.policy.planners.base import PlanningContext
from orchestrator.policy.planners.kernel_choice import (
    choose_kernel,
    continuous_columns,
    fit_surrogate_state,
)

__all__ = ["constraint_log_probability", "fit_outcome_gp", "has_campaign_fit", "objective_specs", "outcome_constraints",
           "planning_kernel", "scalar_tradeoff_state", "tradeoff_method"]


def objective_specs(spec) -> list:
    """Every objective of ``spec`` in order (``spec.objective_list``; the one objective for a spec without it)."""
    return list(getattr(spec, "objective_list", None) or [spec.objective])


def outcome_constraints(spec) -> list:
    """The spec's outcome constraints (``[[constraint]]``), possibly none."""
    return list(getattr(spec, "constraints", None) or [])


def tradeoff_method(spec) -> str:
    """``spec.tradeoff_method``: "single" (always, for one objective), "pareto", "desirability" or "weighted_sum"."""
    return getattr(spec, "tradeoff_method", "single") if len(objective_specs(spec)) > 1 else "single"


def has_campaign_fit(context: PlanningContext) -> bool:
    """``bo.has_fitted_surrogate``'s rule, for the arms bo hands over to: the campaign's GP has been fitted on at
    least ``min(n_initial, 2)`` lab results."""
    return context.surrogate_state is not None and len(context.observed) >= min(context.spec.planner.n_initial, 2)


def planning_kernel(context: PlanningContext) -> tuple[str, list[int] | None]:
    """(kernel, Matérn columns of ``tanimoto_matern52`` or None) for the outcome GPs: the campaign's kernel choice on
    the pool's features; ``evidence`` takes the kernel the campaign's last refit chose (Matérn-5/2 before one)."""
    spec, pool = context.spec, context.pool
    features = getattr(pool, "features", None)
    kinds = getattr(pool, "feature_kinds", None)
    kernel = choose_kernel(spec.campaign.kind, spec.planner.kernel, features, kinds)
    if kernel == "evidence":
        kernel = (context.surrogate_state or {}).get("kernel", "matern52")
    if kernel == "tanimoto_matern52":
        return kernel, continuous_columns(kinds, np.shape(features)[1])
    return kernel, None


@functools.lru_cache(maxsize=64)
def _fit_cached(X_bytes: bytes, shape: tuple[int, int], y_bytes: bytes, kernel: str, continuous: str,
                seed: int) -> str:
    X = np.frombuffer(X_bytes, dtype=float).reshape(shape).copy()  # writable, as torch.as_tensor wants
    y = np.frombuffer(y_bytes, dtype=float).copy()
    state = fit_surrogate_state(X, y, kernel=kernel, seed=seed, fitted_on="value",
                                continuous=json.loads(continuous))
    return json.dumps(state)


def _seed(context: PlanningContext, name: str) -> int:
    return zlib.crc32(f"{context.seed}:{context.iteration}:{name}".encode()) & 0x7FFFFFFF


def fit_outcome_gp(context: PlanningContext, rows: np.ndarray, y: np.ndarray, name: str):
    """The campaign's GP on pool ``rows`` with targets ``y`` (one per row; NaN rows are left out), or None with fewer
    than two finite targets. ``name`` seeds the fit (with the campaign seed and iteration)."""
    from orchestrator.policy.planners.surrogate import GPSurrogate

    rows, y = np.asarray(rows, dtype=int), np.asarray(y, dtype=float)
    finite = np.isfinite(y)
    if finite.sum() < 2:
        return None
    X = np.ascontiguousarray(np.asarray(context.pool.features[rows[finite]], dtype=float))
    y = np.ascontiguousarray(y[finite])
    kernel, continuous = planning_kernel(context)
    state = json.loads(_fit_cached(X.tobytes(), X.shape, y.tobytes(), kernel, json.dumps(continuous),
                                   _seed(context, name)))
    return GPSurrogate.from_hyperparameters(X, y, state)


def constraint_log_probability(context: PlanningContext, rows: np.ndarray) -> np.ndarray | None:
    """log P(every outcome constraint met) at pool ``rows``, shape (len(rows),): the sum over constraints of
    log P(lower <= v <= upper) under each constraint's GP (independent); None without constraints.

    A constraint with fewer than two measured values has no model yet and weighs nothing (log 1).
    """
    constraints = outcome_constraints(context.spec)
    values = getattr(context, "constraint_values", None)
    if not constraints or values is None:
        return None
    rows = np.asarray(rows, dtype=int)
    total = np.zeros(len(rows))
    values = np.asarray(values, dtype=float).reshape(len(context.observed), len(constraints))
    for j, constraint in enumerate(constraints):
        model = fit_outcome_gp(context, context.observed, values[:, j], f"constraint:{constraint.property}")
        if model is None:
            continue
        mean, sd = model.predict(np.asarray(context.pool.features[rows], dtype=float))
        total += log_probability_within(mean, sd, constraint.lower, constraint.upper)
    return total


def log_probability_within(mean: np.ndarray, sd: np.ndarray, lower: float | None, upper: float | None) -> np.ndarray:
    """log P(lower <= v <= upper) for v ~ Normal(mean, sd²), elementwise (a missing bound is open), floored at
    log(1e-300) so that an all but certain breach still orders by how far it is.

    Example:
        >>> np.round(log_probability_within(np.array([0.0, 0.0]), np.array([1.0, 1.0]), 0.0, None), 4).tolist()
        [-0.6931, -0.6931]
    """
    mean, sd = np.asarray(mean, dtype=float), np.maximum(np.asarray(sd, dtype=float), 1e-12)
    if lower is not None and upper is not None:
        mass = special.ndtr((upper - mean) / sd) - special.ndtr((lower - mean) / sd)
        tail = np.maximum(special.log_ndtr((mean - lower) / sd), special.log_ndtr((upper - mean) / sd))
        return np.where(mass > 1e-300, np.log(np.maximum(mass, 1e-300)), np.minimum(tail, np.log(1e-300)))
    if lower is not None:
        return special.log_ndtr((mean - lower) / sd)
    return special.log_ndtr((upper - mean) / sd)


def scalar_tradeoff_state(context: PlanningContext) -> dict[str, Any] | None:
    """For a desirability or weighted sum of several objectives: the campaign's GP state refitted on the scalar the
    context plans on (``context.utilities``), since the learn node's state is fitted on the first objective (its
    standardisation would not fit the scalar). None when the state already fits (one objective, pareto)."""
    spec = context.spec
    if len(objective_specs(spec)) < 2 or tradeoff_method(spec) not in ("desirability", "weighted_sum"):
        return None
    model = fit_outcome_gp(context, context.observed, context.utilities, "tradeoff")
    if model is None:
        return None
    return {**model.hyperparameters, "fitted_on": "utility"}
