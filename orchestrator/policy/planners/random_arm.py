"""The random arm: the control every campaign measures itself against."""

from __future__ import annotations

from orchestrator.policy.planners.base import PlannerTraits, PlanningContext
from orchestrator.seeding import derive_rng
from vocabulary.domain import Proposal

__all__ = ["RandomPlanner"]


class RandomPlanner:
    """Uniform sampling without replacement from the untested pool."""

    name = "random"
    traits = PlannerTraits()

    def __init__(self, label: str = "random"):
        self.label = label

    def propose(self, context: PlanningContext, n: int) -> list[Proposal]:
        rng = derive_rng(context.seed, context.iteration, "plan", self.label)
        n = min(n, len(context.available))
        picks = rng.choice(context.available, size=n, replace=False) if n else []
        return [
            Proposal(
                candidate=context.pool.candidates[int(i)],
                arm="random",
                hypothesis="uniform random draw from the untested pool",
                rationale="control arm: measures what the main arm adds over chance",
            )
            for i in picks
        ]
