"""The success bar and the terminal reward of an episode, both fixed at reset.

The bar is what counts as a lab success (in the objective's unit). It comes, in this order, from the task
(``success_bar=``), the task's ``success_quantile=`` of a reference distribution, the spec (``stop.threshold`` or
the target window), or the default quantile of the reference. It never moves with the episode's own results (the
campaign's reward used the running median of its results when a spec had no threshold, so a campaign that
improved raised its own bar).

The reference is what the environment knows of the space before the episode: the simulated lab's ground-truth
column, else the first table proxy rung's column. It serves the reward only and never appears in an observation;
a bar drawn from the ground truth is not shown either (``is_visible``).

The terminal reward is where the episode's best lab result ranks in the reference, ``2·F(best) − 1`` in [-1, 1]
(−1 without a result); without a reference it is +1 for a success and −1 otherwise.
"""

from __future__ import annotations

import bisect
import math
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ..domain import SetupError
from ..pool import Pool
from ..spec import CampaignSpec

__all__ = ["DEFAULT_SUCCESS_QUANTILE", "SuccessBar", "fix_success_bar"]

DEFAULT_SUCCESS_QUANTILE = 0.9


class SuccessBar(BaseModel):
    """The episode's bar (objective unit; ``None`` for a target window, whose bar is the window) and its reference."""

    model_config = ConfigDict(frozen=True)
    type: Literal["success_bar"] = "success_bar"
    schema_version: int = 1
    threshold: float | None
    source: Literal["task", "quantile", "spec", "target"]
    is_visible: bool = Field(description="whether an observation may show it (not when drawn from the ground truth)")
    reference: tuple[float, ...] = Field(default=(), repr=False, description="sorted reference utilities; never shown")

    def outcome_reward(self, best_utility: float | None, is_success: bool) -> float:
        """The terminal reward of an episode whose best lab utility is ``best_utility``."""
        if best_utility is None:
            return -1.0
        if not self.reference:
            return 1.0 if is_success else -1.0
        rank = bisect.bisect_right(self.reference, best_utility) / len(self.reference)
        return 2.0 * rank - 1.0


def _reference(spec: CampaignSpec, pool: Pool) -> tuple[np.ndarray | None, bool]:
    """(reference values in the objective's unit, whether they are the ground truth), or (None, False)."""
    column = spec.lab.oracle_column if spec.lab.driver == "simlab" else None
    if column and column in pool.columns:
        return np.asarray(pool.columns[column], dtype=float), True
    for rung in spec.ladder:
        if rung.simulator == "table" and rung.proxy and rung.column in pool.columns:
            return np.asarray(pool.columns[rung.column], dtype=float), False
    return None, False


def fix_success_bar(spec: CampaignSpec, pool: Pool, *, success_bar: float | None = None,
                    success_quantile: float | None = None) -> SuccessBar:
    """The bar of an episode over ``spec``, fixed before it starts (see the module docstring)."""
    objective = spec.objective
    values, is_truth = _reference(spec, pool)
    reference: tuple[float, ...] = ()
    if values is not None:
        finite = values[np.isfinite(values)]
        reference = tuple(sorted(objective.utility(float(v)) for v in finite))
    if success_bar is not None:
        if not math.isfinite(success_bar):
            raise SetupError(f"{success_bar=} must be a finite number in the objective's unit")
        return SuccessBar(threshold=float(success_bar), source="task", is_visible=True, reference=reference)
    if objective.direction == "target" and success_quantile is None:
        return SuccessBar(threshold=None, source="target", is_visible=True, reference=reference)
    if spec.stop.threshold is not None and success_quantile is None:
        return SuccessBar(threshold=float(spec.stop.threshold), source="spec", is_visible=True, reference=reference)
    q = DEFAULT_SUCCESS_QUANTILE if success_quantile is None else float(success_quantile)
    if not 0.0 < q < 1.0:
        raise SetupError(f"success_quantile={q} must lie strictly between 0 and 1 (e.g. 0.9: the top tenth succeeds)")
    if not reference:
        raise SetupError("this campaign has no known range to fix a success bar from (no ground-truth column, no "
                         "table proxy rung): set [stop] threshold in the spec or pass success_bar= to reset")
    u = float(np.quantile(np.asarray(reference), q))
    # back to the objective's unit (utility is the value for maximize, its negative for minimize)
    threshold = -u if objective.direction == "minimize" else u
    if objective.direction == "target":
        raise SetupError("a target objective's bar is its window; drop success_quantile or pass success_bar=")
    return SuccessBar(threshold=threshold, source="quantile", is_visible=not is_truth, reference=reference)
