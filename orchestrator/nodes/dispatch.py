"""dispatch: submit approved jobs to the lab driver. Submits are idempotent on the job key, so a resume is safe."""

from __future__ import annotations

from ..context import CampaignContext
from ..events import Dispatched, Proposed
from ..history import iteration_payloads
from ..state import CampaignState

__all__ = ["dispatch", "make_job"]


def make_job(ctx: CampaignContext, key: str):
    """The ``LabJob`` for a job key (``{campaign_id}/{candidate_id}``)."""
    from instruments import LabJob

    candidate_id = key.removeprefix(f"{ctx.campaign_id}/")
    return LabJob(job_key=key, candidate=ctx.pool.get(candidate_id))


def dispatch(state: CampaignState, ctx: CampaignContext) -> CampaignState:
    iteration = state["iteration"]
    arms = {p.candidate_id: p.arm for p in iteration_payloads(ctx, Proposed.type, iteration)}
    for key in state.get("job_keys", []):
        job = make_job(ctx, key)
        handle = ctx.loop.run(ctx.driver.submit(job))
        # The event follows the submit: after a crash in between, the resumed node resubmits (a no-op) and records it.
        ctx.ledger.append(
            ctx.campaign_id,
            Dispatched(iteration=iteration, job_key=handle.job_key, candidate_id=job.candidate.id,
                       arm=arms[job.candidate.id], driver=ctx.driver.name, sim_time_s=float(ctx.driver.now)),
            key=f"dispatched:{key}",
            actor="dispatcher",
        )
    return {}
