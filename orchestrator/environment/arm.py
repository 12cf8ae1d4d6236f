"""The environment's planner arm: the plan node asks it for proposals, and it hands the question to the policy.

``EnvironmentPlanner.propose`` keeps the live ``PlanningContext`` (for the observation) and calls LangGraph's
``interrupt()``: the campaign's graph pauses inside the plan node, the environment returns an observation, and the
policy's next proposal resumes the graph with ``Command(resume=answer)``. The plan node then re-runs, ``interrupt()``
returns the answer, and everything after it (validate, screen, approve, dispatch, observe, reward, learn, decide) is
the campaign's own code. See orchestrator/DECISIONS.md ("Campaigns as environments").

In an open space the answer also carries the policy's new structures (``new_candidates``, canonical candidate dicts
the environment has already parsed and checked): the resumed ``propose`` adds them to the pool, after the plan node
counted it, so the plan node records them as ``PoolExtended`` (source ``env``) as it does the llm arm's.
"""

from __future__ import annotations

from typing import Any

from langgraph.types import interrupt

from orchestrator.policy.planners import register_planner
from orchestrator.policy.planners.base import PlannerTraits, PlanningContext
from vocabulary.domain import Proposal, candidate_from_dict

__all__ = ["ARM", "EnvironmentPlanner"]

ARM = "env"
"""The arm name an environment's policy plays as, in the ledger and the rewards."""


class EnvironmentPlanner:
    """Proposes whatever the policy answers; the environment reads ``context`` and ``n`` while the graph waits."""

    name = ARM
    # the campaign's GP is fitted (the observation shows its mean and sd); no ladder: the policy runs rungs itself
    # (``RunRungAction``), and the screen does not climb for it
    traits = PlannerTraits(uses_surrogate=True)

    def __init__(self) -> None:
        self.context: PlanningContext | None = None
        self.n = 0
        self.is_waiting = False
        """True while the graph is paused on this arm's question: what the environment reads instead of the
        graph's checkpoint (``Campaign.pending_interrupt``), whose read costs more than a step's own work."""

    def propose(self, context: PlanningContext, n: int) -> list[Proposal]:
        self.context, self.n = context, n
        self.is_waiting = True  # interrupt() raises to pause the graph, and returns the answer when it resumes
        answer: dict[str, Any] = interrupt({"kind": "plan", "iteration": context.iteration, "n": n})
        self.is_waiting = False
        if answer.get("new_candidates"):
            context.pool.extend([candidate_from_dict(c) for c in answer["new_candidates"]])
        return [Proposal(candidate=context.pool.get(cid), arm=ARM, hypothesis=answer.get("hypothesis", ""),
                         rationale=answer.get("rationale", ""), expected=answer.get("expected"))
                for cid in answer["candidate_ids"]]


def _factory(spec) -> EnvironmentPlanner:
    return EnvironmentPlanner()


register_planner(ARM, _factory)
