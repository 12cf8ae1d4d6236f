"""The terminal reward of an episode with several objectives: the share of the pool's true hypervolume it measured.

With one objective an episode ends on where its best result ranks in the reference (``success.SuccessBar``). With
several there is no single best: the episode ends on ``2·HV(measured front) / HV(true front) − 1`` in [-1, 1] (−1
without a result that meets the constraints), both hypervolumes over one reference point fixed at reset: the spec's
``[tradeoff] reference_point``, else BoTorch's rule over the pool's true front. The true front is the simulated
lab's ground truth (each objective's ``column``, the first objective's may be ``lab.oracle_column``; constraints'
columns decide which rows count). It serves the reward only and never appears in an observation. Without the truth
(a real lab, a missing column) ``fix_pareto_outcome`` returns None and the episode keeps the one-objective rule.

Example:
    >>> from orchestrator.spec import CampaignSpec
    >>> from orchestrator.space.pool import load_pool
    >>> spec = CampaignSpec.model_validate({
    ...     "campaign": {"name": "d", "kind": "conditions"},
    ...     "objective": [{"property": "a", "direction": "max", "column": "a"},
    ...                   {"property": "b", "direction": "min", "column": "b"}],
    ...     "tradeoff": {"reference_point": [0.0, 4.0]},
    ...     "space": {"inline": [{"x": 1.0, "a": 1.0, "b": 2.0}, {"x": 2.0, "a": 2.0, "b": 3.0}], "columns": ["x"]},
    ...     "lab": {"driver": "simlab"}, "budget": {"lab_experiments": 2}})
    >>> outcome = fix_pareto_outcome(spec, load_pool(spec))
    >>> outcome.true_hypervolume, round(outcome.reward(spec, [{"a": 1.0, "b": 2.0}]), 3), outcome.reward(spec, [])
    (3.0, 0.333, -1.0)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from vocabulary.pareto import (
    hypervolume,
    infer_reference_point,
    reference_in_utility,
    utility_matrix,
)

__all__ = ["ParetoOutcome", "fix_pareto_outcome"]


@dataclass(frozen=True)
class ParetoOutcome:
    """The reference point (utility form) and the pool's true hypervolume above it (objectives' units' product)."""

    reference_utility: tuple[float, ...]
    true_hypervolume: float

    def reward(self, spec, measured: Sequence[dict[str, float]]) -> float:
        """``2·min(HV(measured) / HV(true), 1) − 1``; −1 without a usable result (``measured``: every property of
        each lab result, by name)."""
        names = [o.property for o in spec.objective_list]
        rows = [[m.get(n, np.nan) for n in names] for m in measured
                if all(c.is_met(m.get(c.property)) for c in spec.constraints)]
        if not rows or self.true_hypervolume <= 0:
            return -1.0
        Y = utility_matrix(spec.objective_list, np.asarray(rows, dtype=float))
        share = hypervolume(Y, np.asarray(self.reference_utility)) / self.true_hypervolume
        return 2.0 * min(max(share, 0.0), 1.0) - 1.0


def _truth_column(spec, prop: str, column: str | None) -> str | None:
    if column:
        return column
    for k, objective in enumerate(spec.objective_list):
        if objective.property == prop:
            return objective.column or (spec.lab.oracle_column if k == 0 else None)
    return None


def fix_pareto_outcome(spec, pool) -> ParetoOutcome | None:
    """The outcome scale of an episode over ``spec`` (several objectives, simulated lab with every truth column);
    None otherwise."""
    if not spec.is_multi_objective or spec.lab.driver != "simlab":
        return None
    columns = [_truth_column(spec, o.property, o.column) for o in spec.objective_list]
    limits = [(c, _truth_column(spec, c.property, c.column)) for c in spec.constraints]
    if any(c is None or c not in pool.columns for c in columns) or any(
            c is None or c not in pool.columns for _, c in limits):
        return None
    values = np.column_stack([np.asarray(pool.columns[c], dtype=float) for c in columns])
    feasible = np.ones(len(values), dtype=bool)
    for constraint, column in limits:
        feasible &= np.asarray([constraint.is_met(float(v)) for v in pool.columns[column]], dtype=bool)
    Y = utility_matrix(spec.objective_list, values)[feasible]
    Y = Y[np.isfinite(Y).all(axis=1)]
    if not len(Y):
        return None
    given = spec.tradeoff.reference_point
    reference = reference_in_utility(spec.objective_list, given) if given is not None else infer_reference_point(Y)
    return ParetoOutcome(reference_utility=tuple(float(v) for v in reference),
                         true_hypervolume=float(hypervolume(Y, reference)))
