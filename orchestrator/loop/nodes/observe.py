"""observe: wait on the lab and record every finished job.

With ``lab.wait = "any"`` the node returns as soon as one job finishes, so the next iteration refills the freed
capacity (pending-aware dispatch); with ``"all"`` it waits for every open job. A simulated lab's clock jumps to
the next completion; a real lab is polled. A failed job is recorded as failed with its reason; nothing is dropped.
"""

from __future__ import annotations

from orchestrator.ledger import LabJobRow
from orchestrator.loop.context import CampaignContext
from orchestrator.loop.history import is_open_job
from orchestrator.loop.jobs import make_job
from orchestrator.loop.lab_clock import (
    TERMINAL_STATES,
    known_handle,
    lab_now,
    remember_handle,
    wait_for_jobs,
)
from orchestrator.loop.state import CampaignState
from vocabulary.events import Observed

__all__ = ["observe"]

async def _submit_all(driver, jobs) -> list:
    return [await driver.submit(job) for job in jobs]


async def _finished(driver, handles) -> list[tuple[str, object]]:
    """(status, result) of each job, in order: the result of a finished job, None for one still running or
    cancelled. One trip to the driver's event loop for the whole round."""
    out = []
    for handle in handles:
        status = await driver.status(handle)
        is_answered = status in TERMINAL_STATES and status != "cancelled"
        out.append((status, await driver.result(handle) if is_answered else None))
    return out


def _open_handles(ctx: CampaignContext, open_jobs) -> list:
    """The handles of the open jobs: kept ones for a lab in this process, else resubmitted (after a restart the
    driver may not know the jobs; resubmitting is idempotent on the key)."""
    handles = [known_handle(ctx, j.job_key) for j in open_jobs]
    missing = [i for i, handle in enumerate(handles) if handle is None]
    if missing:
        submitted = ctx.loop.run(_submit_all(ctx.driver, [make_job(ctx, open_jobs[i].job_key) for i in missing]))
        for i, handle in zip(missing, submitted, strict=True):
            handles[i] = handle
            remember_handle(ctx, handle)
    return handles


def observe(state: CampaignState, ctx: CampaignContext) -> CampaignState:
    iteration = state["iteration"]
    open_jobs = sorted(ctx.ledger.rows(LabJobRow, ctx.campaign_id, keep=is_open_job), key=lambda j: j.dispatched_seq)
    handles = _open_handles(ctx, open_jobs)
    last = ctx.ledger.last_event(ctx.campaign_id, Observed.type)  # results are appended in iteration order
    already = last is not None and last.payload.get("observe_iteration") == iteration
    if not already:  # a resumed round has waited already (the lab replay did it); waiting again would skip ahead
        wait_for_jobs(ctx, handles)
    items = []
    finished = ctx.loop.run(_finished(ctx.driver, handles)) if handles else []
    for job, (status, result) in zip(open_jobs, finished, strict=True):
        if status not in TERMINAL_STATES:
            continue
        if status == "cancelled":
            value, uncertainty, result_status, reason, at = None, None, "failed", "cancelled by the lab", lab_now(ctx)
        else:
            value, uncertainty, result_status, reason = result.value, result.uncertainty, result.status, result.reason
            at = float(result.completed_s)
        items.append((Observed(iteration=job.iteration, job_key=job.job_key, candidate_id=job.candidate_id,
                               arm=job.arm, value=value, uncertainty=uncertainty, status=result_status, reason=reason,
                               sim_time_s=at, provenance="lab", driver=ctx.driver.name, observe_iteration=iteration),
                      f"observed:{job.job_key}"))
    # One transaction for the round's results: a crash before it leaves them all with the lab, which a resumed
    # node reads again (``result`` is idempotent); a crash after it finds them recorded and does not wait again.
    ctx.ledger.append_many(ctx.campaign_id, items, actor=ctx.driver.name)
    # A recorded job is never asked again (a cancel resubmits, idempotently), so its kept handle can go: the
    # handles held are the open jobs', not every job's of a long campaign.
    kept = ctx.resources.get("lab_handles")
    if kept:
        for payload, _ in items:
            kept.pop(payload.job_key, None)
    return {}
