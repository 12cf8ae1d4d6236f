"""The campaign's rules for a proposal: it parses, it is the canonical candidate, it is in the design space (and
within an open space's constraints), and it was neither tested nor proposed twice in one batch.

The validate node applies them to every proposal; the llm planner applies them to its model's answer before the
node does, so that the model can repair it. They read only the campaign's spec and pool.

Example:
    >>> raw_input({"type": "molecule", "smiles": "CCO"})
    'CCO'
"""

from __future__ import annotations

from typing import Any, Protocol

from vocabulary.domain import InvalidCandidate, candidate_from_dict, parse_candidate
from vocabulary.events import Proposed

__all__ = ["CampaignLike", "raw_input", "validation_error", "validation_problem"]


class CampaignLike(Protocol):
    """What the rules read of a campaign: its spec and its pool (a ``CampaignContext`` has both)."""

    spec: Any
    pool: Any


def raw_input(candidate: dict) -> object:
    """What the proposer wrote for a candidate: a SMILES, a formula, or a conditions mapping."""
    kind = candidate.get("type")
    return {"molecule": candidate.get("smiles"), "material": candidate.get("formula")}.get(kind, candidate.get("values"))


def validation_problem(ctx: CampaignLike, proposal: Proposed, seen: set[str],
                       tested: frozenset[str]) -> tuple[str, str] | None:
    """(kind, message) of why a proposal cannot go forward, or None. The kind is ``invalid``, ``out_of_space`` or
    ``duplicate``; the message names the value and the fix."""
    raw = raw_input(proposal.candidate)
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
        from orchestrator.policy.generation import constraint_error

        error = constraint_error(ctx.spec.space, canonical)
        if error:
            return "out_of_space", error
    if canonical.id in tested:
        return "duplicate", f"duplicate: {canonical.id} was already sent to the lab; propose an untested candidate"
    if canonical.id in seen:
        return "duplicate", f"duplicate: {canonical.id} appears twice in this batch"
    return None


def validation_error(ctx: CampaignLike, proposal: Proposed, seen: set[str], tested: frozenset[str]) -> str | None:
    """Why a proposal cannot go forward (``validation_problem``'s message), or None."""
    problem = validation_problem(ctx, proposal, seen, tested)
    return problem[1] if problem else None
