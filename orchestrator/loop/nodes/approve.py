"""approve: the gate before the lab. A policy approves small batches; ``interrupt`` waits for a human.

A human answers through LangGraph's ``Command(resume=...)`` with ``True`` (all), ``False`` (none), or a list of the
job keys to approve, optionally with their name and why jobs were denied as ``{"answer": ..., "by": NAME,
"reasons": {job_key: WHY}, "reason": WHY}`` (``orchestrator.loop.human_answer``); the approval is recorded as by
``human:NAME``, or ``human`` without a name, and each denial's reason on its ``Rejected`` event. The question names
each job's candidate and the surrogate's prediction of it (``predictions``), in the objective's unit. Retries of
failed jobs are new lab runs, so they pass the gate too.

A campaign whose gate asks a person (``asks_a_person``) runs its lab in whole batches (``lab_wait``): with
``lab.wait = "any"`` every freed slot would be a one-job batch, and the person would be asked once per job.
"""

from __future__ import annotations

from datetime import UTC, datetime

from langgraph.types import interrupt

from orchestrator.loop.context import CampaignContext
from orchestrator.loop.human_answer import (
    asks_a_person,
    denial_reasons,
    lab_wait,
    read_answer,
)
from orchestrator.loop.jobs import job_key, parse_job_key
from orchestrator.loop.predictions import predictions
from orchestrator.loop.state import CampaignState
from orchestrator.space.pool import describe
from vocabulary.events import ApprovalRequested, Approved, FailureHandled, Rejected

__all__ = ["approve", "approval_question", "asks_a_person", "lab_wait"]


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
        approved, approved_by, reasons = keys, "policy:auto", {}
        items.append(request)  # written with the approval, in one transaction
    else:
        ctx.ledger.append_many(ctx.campaign_id, [request])  # on the record before the graph waits for a person
        value = interrupt(approval_question(ctx, iteration, keys))
        answer, approved_by = read_answer(value)
        if answer is True:
            approved = keys
        elif answer is False or answer is None:
            approved = []
        else:
            approved = [k for k in keys if k in set(answer)]
        reasons = denial_reasons(value, [k for k in keys if k not in approved])
    denied = [k for k in keys if k not in approved]
    items.append((Approved(iteration=iteration, job_keys=approved, approved_by=approved_by, policy=policy.policy,
                           denied_keys=denied), f"it{iteration}:approved"))
    items += _record_denials(ctx, iteration, denied, approved_by, reasons)
    ctx.ledger.append_many(ctx.campaign_id, items, actor=approved_by)
    return {"job_keys": approved}


def approval_question(ctx: CampaignContext, iteration: int, keys: list[str]) -> dict:
    """The interrupt's payload: the jobs, their candidates' labels and the surrogate's predictions of them."""
    candidate_ids = [parse_job_key(ctx.campaign_id, k)[0] for k in keys]
    labels = [describe(ctx.pool.get(cid)) for cid in candidate_ids]
    predicted = predictions(ctx.view, candidate_ids)
    return {
        "campaign_id": ctx.campaign_id,
        "iteration": iteration,
        "job_keys": keys,
        "candidates": labels,
        "predictions": [{"job_key": k, "candidate": label, "predicted": predicted[cid].mean, "sd": predicted[cid].sd}
                        for k, cid, label in zip(keys, candidate_ids, labels, strict=True)],
        "unit": ctx.spec.objective.unit,
        "question": "approve these lab jobs? resume with True, False, or a list of job keys (or {'answer': one of "
                    "those, 'by': your name, 'reasons': {job_key: why denied}, 'reason': why denied})",
    }


def _record_denials(ctx: CampaignContext, iteration: int, denied: list[str], approved_by: str,
                    reasons: dict[str, str]) -> list:
    """A denied candidate is rejected (and held from the planners for a while: ``ruled_out.held_after_denial``); a
    denied retry ends that candidate's retries. A person's reason is recorded with each."""
    if not denied:
        return []
    # every retry ever decided (not only pending ones), so a re-run after the denial was recorded sees the same
    retries = ctx.view.failures.retries
    items = []
    for key in denied:
        candidate_id, attempt = parse_job_key(ctx.campaign_id, key)
        why = f": {reasons[key]}" if key in reasons else ""
        if key in retries:
            r = retries[key]
            items.append((FailureHandled(iteration=iteration, job_key=key, candidate_id=candidate_id, arm=r.arm,
                                         action="skip", reason=f"retry denied at approval by {approved_by}{why}",
                                         decided_by=approved_by, attempt=attempt), f"denied:{key}"))
        else:
            items.append((Rejected(iteration=iteration, arm="human", stage="approve", raw=key, candidate_id=candidate_id,
                                   reason=f"denied at approval by {approved_by}{why}"), f"denied:{key}"))
    return items
