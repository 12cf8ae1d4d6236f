"""approve: the gate before the lab. A policy approves small batches; ``interrupt`` waits for a human.

A human answers through LangGraph's ``Command(resume=...)`` with ``True`` (all), ``False`` (none), or a list of the
job keys to approve.
"""

from __future__ import annotations

from langgraph.types import interrupt

from ..context import CampaignContext
from ..events import ApprovalRequested, Approved
from ..pool import describe
from ..state import CampaignState

__all__ = ["approve", "job_key"]


def job_key(campaign_id: str, candidate_id: str) -> str:
    """The lab job key: one lab run per candidate per campaign, so a key is never dispatched twice."""
    return f"{campaign_id}/{candidate_id}"


def approve(state: CampaignState, ctx: CampaignContext) -> CampaignState:
    iteration = state["iteration"]
    keys = [job_key(ctx.campaign_id, cid) for cid in state.get("promoted", [])]
    policy = ctx.spec.approval
    ctx.ledger.append(ctx.campaign_id, ApprovalRequested(iteration=iteration, job_keys=keys, policy=policy.policy),
                      key=f"it{iteration}:approval-requested", actor="approval")
    if policy.policy == "auto" and len(keys) <= policy.max_auto_jobs:
        approved, approved_by = keys, "policy:auto"
    else:
        answer = interrupt({
            "campaign_id": ctx.campaign_id,
            "iteration": iteration,
            "job_keys": keys,
            "candidates": [describe(ctx.pool.get(cid)) for cid in state.get("promoted", [])],
            "question": "approve these lab jobs? resume with True, False, or a list of job keys",
        })
        if answer is True:
            approved = keys
        elif answer is False or answer is None:
            approved = []
        else:
            approved = [k for k in keys if k in set(answer)]
        approved_by = "human"
    denied = [k for k in keys if k not in approved]
    ctx.ledger.append(ctx.campaign_id, Approved(iteration=iteration, job_keys=approved, approved_by=approved_by,
                                                policy=policy.policy, denied_keys=denied),
                      key=f"it{iteration}:approved", actor=approved_by)
    return {"job_keys": approved}
