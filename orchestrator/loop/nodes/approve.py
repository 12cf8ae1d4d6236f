"""approve: the gate before the lab. A policy approves small batches; ``interrupt`` waits for a human.

A human answers through LangGraph's ``Command(resume=...)`` with ``True`` (all), ``False`` (none), or a list of the
job keys to approve, optionally with their name as ``{"answer": ..., "by": NAME}`` (``orchestrator.loop.human_answer``);
the approval is recorded as by ``human:NAME``, or ``human`` without a name. Retries of failed jobs are new lab runs,
so they pass the gate too.
"""

from __future__ import annotations

from datetime import UTC, datetime

from langgraph.types import interrupt

from orchestrator.loop.context import CampaignContext
from orchestrator.loop.human_answer import read_answer
from orchestrator.loop.jobs import job_key, parse_job_key
from orchestrator.loop.state import CampaignState
from orchestrator.space.pool import describe
from vocabulary.events import ApprovalRequested, Approved, FailureHandled, Rejected

__all__ = ["approve"]


def approve(state: CampaignState, ctx: CampaignContext) -> CampaignState:
    iteration = state["iteration"]
    keys = list(state.get("retries", [])) + [job_key(ctx.campaign_id, cid) for cid in state.get("promoted", [])]
    if not keys:
        return {"job_keys": []}
    policy = ctx.spec.approval
    request = (ApprovalRequested(iteration=iteration, job_keys=keys, policy=policy.policy),
               f"it{iteration}:approval-requested", "approval", datetime.now(UTC))
    items: list[tuple] = []
    if policy.policy == "auto" and len(keys) <= policy.max_auto_jobs:
        approved, approved_by = keys, "policy:auto"
        items.append(request)  # written with the approval, in one transaction
    else:
        ctx.ledger.append_many(ctx.campaign_id, [request])  # on the record before the graph waits for a person
        answer, approved_by = read_answer(interrupt({
            "campaign_id": ctx.campaign_id,
            "iteration": iteration,
            "job_keys": keys,
            "candidates": [describe(ctx.pool.get(parse_job_key(ctx.campaign_id, k)[0])) for k in keys],
            "question": "approve these lab jobs? resume with True, False, or a list of job keys "
                        "(or {'answer': one of those, 'by': your name})",
        }))
        if answer is True:
            approved = keys
        elif answer is False or answer is None:
            approved = []
        else:
            approved = [k for k in keys if k in set(answer)]
    denied = [k for k in keys if k not in approved]
    items.append((Approved(iteration=iteration, job_keys=approved, approved_by=approved_by, policy=policy.policy,
                           denied_keys=denied), f"it{iteration}:approved"))
    items += _record_denials(ctx, iteration, denied, approved_by)
    ctx.ledger.append_many(ctx.campaign_id, items, actor=approved_by)
    return {"job_keys": approved}


def _record_denials(ctx: CampaignContext, iteration: int, denied: list[str], approved_by: str) -> list:
    """A denied candidate is rejected for good; a denied retry ends that candidate's retries."""
    if not denied:
        return []
    # every retry ever decided (not only pending ones), so a re-run after the denial was recorded sees the same
    retries = ctx.view.failures.retries
    items = []
    for key in denied:
        candidate_id, attempt = parse_job_key(ctx.campaign_id, key)
        if key in retries:
            r = retries[key]
            items.append((FailureHandled(iteration=iteration, job_key=key, candidate_id=candidate_id, arm=r.arm,
                                         action="skip", reason=f"retry denied at approval by {approved_by}",
                                         decided_by=approved_by, attempt=attempt), f"denied:{key}"))
        else:
            items.append((Rejected(iteration=iteration, arm="human", stage="approve", raw=key, candidate_id=candidate_id,
                                   reason=f"denied at approval by {approved_by}"), f"denied:{key}"))
    return items
