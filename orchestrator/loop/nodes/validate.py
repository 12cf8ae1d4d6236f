"""validate: re-parse every proposal with the domain, and reject what is invalid, out of space or a duplicate.

Only rejections are recorded (``Rejected``); a proposal without one is valid, and the screen's ``Promoted`` events
take it on. (Ledgers before this also hold a ``Promoted`` from ``proposal`` per valid proposal, which said the same.)"""

from __future__ import annotations

import json

from orchestrator.loop.context import CampaignContext
from orchestrator.loop.state import CampaignState
from orchestrator.policy.proposal_checks import (
    raw_input,
    validation_error,
    validation_problem,
)
from vocabulary.events import Rejected

__all__ = ["validate", "validation_error", "validation_problem"]


def validate(state: CampaignState, ctx: CampaignContext) -> CampaignState:
    iteration = state["iteration"]
    tested = ctx.view.history().tested
    seen: set[str] = set()
    valid: list[str] = []
    items = []
    for proposal in ctx.view.proposals.of_iteration(iteration):
        problem = validation_problem(ctx, proposal, seen, tested)
        seen.add(proposal.candidate_id)
        if problem:
            raw = json.dumps(raw_input(proposal.candidate), sort_keys=True)
            items.append((Rejected(iteration=iteration, arm=proposal.arm, stage="validate", raw=raw, reason=problem[1],
                                   kind=problem[0], candidate_id=proposal.candidate_id),
                          f"it{iteration}:rejected:{proposal.candidate_id}"))
            continue
        valid.append(proposal.candidate_id)
    ctx.ledger.append_many(ctx.campaign_id, items, actor="validator")
    return {"valid": valid}
