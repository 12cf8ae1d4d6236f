"""The success bar: what counts as a lab success, fixed before a campaign or an episode starts.

The process reward calls a lab result a success when its utility reaches the bar; the environment also ranks an
episode's best result against the bar's reference. The bar comes, in this order, from:

1. an explicit value (``success_bar=``, an environment task option);
2. an explicit quantile (``success_quantile=``) of the reference;
3. the spec: the target window (``direction = "target"``) or ``[stop] threshold``;
4. ``DEFAULT_SUCCESS_QUANTILE`` of the reference, the values known before any lab result of the campaign: the
   simulated lab's ground truth (its ``oracle_column`` or inline ``oracle``), else imported lab history, else the
   first table proxy rung's column;
5. with no reference at all (a real lab, no history, no table proxy) a campaign fixes its bar at the median of its
   first ``n_first_results`` lab results (the random initial design, before the surrogate steers) and never moves
   it again (``source = "first_results"``); an environment refuses such a spec instead.

Until issue 19 a campaign without a spec threshold used the running median of its own results, so a campaign that
improved raised its own bar. ``Campaign.start`` records the bar in ``CampaignStarted`` (``record()``, without the
reference), and the trajectory fold reads it from there, so replay and ``rewards recompute`` use exactly the bar
the campaign ran with; a ledger without a recorded bar keeps the old rule (``legacy_threshold``).

A bar drawn from the ground truth is never shown to a policy (``is_visible``).

Example:
    >>> from orchestrator.space.pool import load_pool
    >>> from orchestrator.spec import CampaignSpec
    >>> spec = CampaignSpec.model_validate({
    ...     "campaign": {"name": "demo", "kind": "molecule"}, "objective": {"direction": "maximize"},
    ...     "space": {"inline": ["C", "CC", "CCC", "CCCC"]},
    ...     "lab": {"oracle": {"C": 1, "CC": 2, "CCC": 3, "CCCC": 4}}, "budget": {"lab_experiments": 2}})
    >>> bar = fix_success_bar(spec, load_pool(spec))
    >>> round(bar.threshold, 2), bar.source, bar.reference_from, bar.is_visible
    (3.7, 'quantile', 'lab truth (inline oracle)', False)
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from orchestrator.spec import CampaignSpec
from orchestrator.spec_objectives import ObjectiveSpec
from vocabulary.domain import SetupError

if TYPE_CHECKING:
    from orchestrator.space.pool import Pool

__all__ = ["DEFAULT_SUCCESS_QUANTILE", "SuccessBar", "first_results_threshold", "fix_success_bar", "legacy_threshold"]

DEFAULT_SUCCESS_QUANTILE = 0.9
"""The share of the reference below the bar: 0.9 counts the top tenth a success."""


class SuccessBar(BaseModel):
    """A fixed success bar (objective unit; ``None`` for a target window, whose bar is the window) and its reference."""

    model_config = ConfigDict(frozen=True)
    type: Literal["success_bar"] = "success_bar"
    schema_version: int = 1
    threshold: float | None
    source: Literal["task", "quantile", "spec", "target", "first_results"]
    is_visible: bool = Field(description="whether an observation may show it (not when drawn from the ground truth)")
    quantile: float | None = Field(default=None, description="the reference quantile it was drawn at (quantile)")
    reference_from: str | None = Field(default=None, description="what the reference values are")
    n_reference: int = Field(default=0, ge=0, description="how many reference values there are")
    n_first_results: int | None = Field(
        default=None, description="first_results: the lab results whose median becomes the bar")
    reference: tuple[float, ...] = Field(default=(), repr=False, description="sorted reference utilities; never shown")

    def utility_threshold(self, objective: ObjectiveSpec) -> float | None:
        """The bar as a utility (higher is better); None for ``first_results`` (``TrajectoryFold`` sets it)."""
        if self.source == "target" or (objective.direction == "target" and self.threshold is None):
            return -float(objective.tolerance)
        if self.threshold is None:
            return None
        return objective.utility(self.threshold)

    def record(self) -> dict[str, Any]:
        """The bar as ``CampaignStarted`` records it: everything but the reference values."""
        return self.model_dump(mode="json", exclude={"reference"})

    def outcome_reward(self, best_utility: float | None, is_success: bool) -> float:
        """The terminal reward of an episode whose best lab utility is ``best_utility``: its rank in the reference,
        ``2·F(best) − 1`` in [-1, 1] (−1 without a result); without a reference +1 for a success, −1 otherwise."""
        if best_utility is None:
            return -1.0
        if not self.reference:
            return 1.0 if is_success else -1.0
        rank = bisect.bisect_right(self.reference, best_utility) / len(self.reference)
        return 2.0 * rank - 1.0


def _reference(spec: CampaignSpec, pool: Pool, history: Sequence[float]) -> tuple[np.ndarray | None, str | None, bool]:
    """(reference values in the objective's unit, what they are, whether they are the ground truth)."""
    if spec.lab.driver == "simlab":
        column = spec.lab.oracle_column
        if column and column in pool.columns:
            return np.asarray(pool.columns[column], dtype=float), f"lab truth (pool column {column!r})", True
        if spec.lab.oracle:
            return np.asarray(list(spec.lab.oracle.values()), dtype=float), "lab truth (inline oracle)", True
    if len(history):
        return np.asarray(history, dtype=float), "imported lab history", False
    for rung in spec.ladder:
        if rung.simulator == "table" and rung.proxy and rung.column in pool.columns:
            return np.asarray(pool.columns[rung.column], dtype=float), f"table rung {rung.name!r}", False
    return None, None, False


def fix_success_bar(spec: CampaignSpec, pool: Pool, *, history: Sequence[float] = (),
                    success_bar: float | None = None, success_quantile: float | None = None,
                    on_unknown: Literal["raise", "first_results"] = "raise") -> SuccessBar:
    """The bar of a campaign or an episode over ``spec``, fixed before it starts (see the module docstring).

    Args:
        pool: the campaign's pool (its columns hold the ground truth and the table rungs' values).
        history: imported lab values (objective unit), known before the campaign's first experiment.
        on_unknown: what to do without a spec bar and without a reference: ``raise`` ``SetupError`` (environments)
            or fix the bar at the median of the first lab results (campaigns).
    """
    objective = spec.objective
    values, reference_from, is_truth = _reference(spec, pool, history)
    reference: tuple[float, ...] = ()
    if values is not None:
        finite = values[np.isfinite(values)]
        reference = tuple(sorted(objective.utility(float(v)) for v in finite))
    known = dict(reference=reference, reference_from=reference_from if reference else None, n_reference=len(reference))
    if success_bar is not None:
        if not math.isfinite(success_bar):
            raise SetupError(f"{success_bar=} must be a finite number in the objective's unit")
        return SuccessBar(threshold=float(success_bar), source="task", is_visible=True, **known)
    if objective.direction == "target" and success_quantile is None:
        return SuccessBar(threshold=None, source="target", is_visible=True, **known)
    if spec.stop.threshold is not None and success_quantile is None:
        return SuccessBar(threshold=float(spec.stop.threshold), source="spec", is_visible=True, **known)
    q = DEFAULT_SUCCESS_QUANTILE if success_quantile is None else float(success_quantile)
    if not 0.0 < q < 1.0:
        raise SetupError(f"success_quantile={q} must lie strictly between 0 and 1 (e.g. 0.9: the top tenth succeeds)")
    if objective.direction == "target":
        raise SetupError("a target objective's bar is its window; drop success_quantile or pass success_bar=")
    if not reference:
        if on_unknown == "first_results":
            return SuccessBar(threshold=None, source="first_results", is_visible=True,
                              n_first_results=spec.planner.n_initial)
        raise SetupError("this campaign has no known range to fix a success bar from (no ground-truth column, no "
                         "imported history, no table proxy rung): set [stop] threshold in the spec or pass "
                         "success_bar= to reset (closedloop env serve --success-bar)")
    u = float(np.quantile(np.asarray(reference), q))
    # back to the objective's unit (utility is the value for maximize, its negative for minimize)
    threshold = -u if objective.direction == "minimize" else u
    return SuccessBar(threshold=threshold, source="quantile", is_visible=not is_truth, quantile=q, **known)


def first_results_threshold(bar: SuccessBar, utilities: Sequence[float]) -> float | None:
    """A ``first_results`` bar as a utility: the median of the first ``n_first_results`` lab utilities, None before."""
    n = max(int(bar.n_first_results or 1), 1)
    return statistics.median(utilities[:n]) if len(utilities) >= n else None


def legacy_threshold(spec: CampaignSpec, utilities: Sequence[float]) -> float | None:
    """The bar of a ledger from before the bar was recorded (no ``success_bar`` in ``CampaignStarted``): the target
    window, the stop threshold, else the running median of the results so far. Kept so that such ledgers replay and
    recompute exactly as they were scored."""
    objective = spec.objective
    if objective.direction == "target":
        return -float(objective.tolerance)
    if spec.stop.threshold is not None:
        return objective.utility(spec.stop.threshold)
    return statistics.median(utilities) if utilities else None
