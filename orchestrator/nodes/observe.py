"""observe: wait on the lab (simulated time jumps to the next completion) and record every result.

A failed job is recorded as failed with its reason; nothing is dropped.
"""

from __future__ import annotations

import asyncio

from ..context import CampaignContext
from ..events import Observed
from ..state import CampaignState
from .dispatch import make_job

__all__ = ["observe", "wait_for_jobs"]

_TERMINAL = {"done", "failed", "cancelled"}


async def _poll(driver, handles, interval_s: float) -> None:
    while True:
        states = [await driver.status(h) for h in handles]
        if all(s in _TERMINAL for s in states):
            return
        await asyncio.sleep(interval_s)


def wait_for_jobs(ctx: CampaignContext, handles) -> None:
    """Advance a simulated lab's clock, or poll a real driver until every job is finished."""
    if hasattr(ctx.driver, "run_until_complete"):
        ctx.driver.run_until_complete(handles)
    else:
        ctx.loop.run(_poll(ctx.driver, handles, interval_s=1.0))


def observe(state: CampaignState, ctx: CampaignContext) -> CampaignState:
    iteration = state["iteration"]
    jobs = [j for j in ctx.ledger.lab_jobs(ctx.campaign_id) if j.iteration == iteration or j.status == "dispatched"]
    jobs.sort(key=lambda j: j.dispatched_seq)
    # After a restart the driver may not know the batch; resubmitting the whole batch (idempotent on the key)
    # reproduces its queueing, and results already in the ledger are re-recorded as no-ops.
    handles = [ctx.loop.run(ctx.driver.submit(make_job(ctx, j.job_key))) for j in jobs]
    wait_for_jobs(ctx, handles)
    for job, handle in zip(jobs, handles, strict=True):
        result = ctx.loop.run(ctx.driver.result(handle))
        ctx.ledger.append(
            ctx.campaign_id,
            Observed(iteration=job.iteration, job_key=job.job_key, candidate_id=job.candidate_id, arm=job.arm,
                     value=result.value, uncertainty=result.uncertainty, status=result.status, reason=result.reason,
                     sim_time_s=float(result.completed_s), provenance="lab", driver=ctx.driver.name),
            key=f"observed:{job.job_key}",
            actor=ctx.driver.name,
        )
    return {}
