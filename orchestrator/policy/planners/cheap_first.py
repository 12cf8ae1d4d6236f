"""The ``cheap-first`` arm: measure in the order the cheapest surveyed rung ranks, as a chemist with a cheap
calculation would. It is the yardstick a multi-fidelity policy must not lose to when the rung is good."""

from __future__ import annotations

import numpy as np

from orchestrator.policy.planners.base import PlannerTraits, PlanningContext
from orchestrator.seeding import derive_rng
from vocabulary.domain import Proposal, SetupError

__all__ = ["CheapFirstPlanner"]


class CheapFirstPlanner:
    """Untested candidates by the cheapest surveyed rung's utility, read as it stands (uncalibrated); failed rung
    evaluations last; ties broken by a seeded draw."""

    name = "cheap-first"
    traits = PlannerTraits(uses_ladder=True)

    def propose(self, context: PlanningContext, n: int) -> list[Proposal]:
        from orchestrator.policy.planners.ladder_prior import prior_rows

        ladder = context.ladder
        if ladder is None or ladder.cheapest is None:
            raise SetupError("the cheap-first arm ranks by a proxy rung surveyed over the pool, and this campaign has "
                             "none; add a [[ladder]] rung with a proxy, or raise budget.compute_seconds (or "
                             "screening.survey_share) so a rung's pool-wide cost fits")
        rung = ladder.cheapest
        as_is = {"rung": rung, "intercept": 0.0, "slope": 1.0, "fill": float("nan")}
        utility = prior_rows(as_is, ladder.values, context.spec, fitted_on="utility")
        available = np.asarray(context.available, dtype=int)
        tie_break = derive_rng(context.seed, "cheap-first").random(len(context.pool))[available]
        ranked = np.where(np.isfinite(utility[available]), utility[available], -np.inf)
        order = available[np.lexsort((tie_break, -ranked))][: min(n, len(available))]
        return [Proposal(candidate=context.pool.candidates[int(i)], arm=self.name,
                         hypothesis=f"{rung} ranks it {k + 1} of {len(available)} untested",
                         rationale=f"measure in the order of the cheapest rung ({rung}), uncalibrated",
                         acquisition=float(utility[int(i)]) if np.isfinite(utility[int(i)]) else None)
                for k, i in enumerate(order)]
