"""validate: re-parse every proposal with the domain, and reject what is invalid, out of space or a duplicate.

Only rejections are recorded (``Rejected``); a proposal without one is valid, and the screen's ``Promoted`` events
take it on. (Ledgers before this also hold a ``Promoted`` from ``proposal`` per valid proposal, which said the same.)"""

from __future__ import annotations

import json

from ..domain import InvalidCandidate, candidate_from_dict, parse_candidate
from ..context import CampaignContext
from ..events import Proposed, Rejected
from ..history import iteration_payloads, lab_history
from ..state import CampaignState

__all__ = ["validate", "validation_error", "validation_problem"]


def _raw_input(candidate: dict) -> object:
    kind = candidate.get("type")
    return {"molecule": candidate.get("smiles"), "material": candidate.get("formula")}.get(kind, candidate.get("values"))


def validation_problem(ctx: CampaignContext, proposal: Proposed, seen: set[str],
                       tested: frozenset[str]) -> tuple[str, str] | None:
    """(kind, message) of why a proposal cannot go forward, or None. The kind is ``invalid``, ``out_of_space`` or
    ``duplicate``; the message names the value and the fix."""
    raw = _raw_input(proposal.candidate)
    try:
        canonical = parse_candidate(ctx.spec.campaign.kind, raw, ctx.pool.space)
    except InvalidCandidate as exc:
        return "invalid", str(exc)
    if canonical.id != proposal.candidate_id or candidate_from_dict(proposal.candidate) != canonical:
        return "invalid", (f"proposal id {proposal.candidate_id!r} does not match its canonical form "
                           f"{canonical.id!r}; propose the canonical candidate")
    if canonical.id not in ctx.pool.index:
        return "out_of_space", f"{raw!r} is not in the campaign's design space; propose a member of the pool"
    if ctx.spec.space.generate:
        from ..generation import constraint_error

        error = constraint_error(ctx.spec.space, canonical)
        if error:
            return "out_of_space", error
    if canonical.id in tested:
        return "duplicate", f"duplicate: {canonical.id} was already sent to the lab; propose an untested candidate"
    if canonical.id in seen:
        return "duplicate", f"duplicate: {canonical.id} appears twice in this batch"
    return None


def validation_error(ctx: CampaignContext, proposal: Proposed, seen: set[str], tested: frozenset[str]) -> str | None:
    """Why a proposal cannot go forward (``validation_problem``'s message), or None."""
    problem = validation_problem(ctx, proposal, seen, tested)
    return problem[1] if problem else None


def validate(state: CampaignState, ctx: CampaignContext) -> CampaignState:
    iteration = state["iteration"]
    tested = lab_history(ctx).tested
    seen: set[str] = set()
    valid: list[str] = []
    items = []
    for proposal in iteration_payloads(ctx, Proposed.type, iteration):
        problem = validation_problem(ctx, proposal, seen, tested)
        seen.add(proposal.candidate_id)
        if problem:
            raw = json.dumps(_raw_input(proposal.candidate), sort_keys=True)
            items.append((Rejected(iteration=iteration, arm=proposal.arm, stage="validate", raw=raw, reason=problem[1],
                                   kind=problem[0], candidate_id=proposal.candidate_id),
                          f"it{iteration}:rejected:{proposal.candidate_id}"))
            continue
        valid.append(proposal.candidate_id)
    ctx.ledger.append_many(ctx.campaign_id, items, actor="validator")
    return {"valid": valid}
