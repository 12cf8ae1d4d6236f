"""observe: wait on the lab and record every finished job.

With ``lab.wait = "any"`` the node returns as soon as one job finishes, so the next iteration refills the freed
capacity (pending-aware dispatch); with ``"all"`` it waits for every open job. A simulated lab's clock jumps to
the next completion; a real lab is polled. A failed job is recorded as failed with its reason; nothing is dropped.
"""

from __future__ import annotations

from orchestrator.loop.context import CampaignContext
from orchestrator.loop.jobs import make_job
from orchestrator.loop.lab import TERMINAL_STATES
from orchestrator.loop.state import CampaignState
from vocabulary.events import Observed

__all__ = ["observe"]


def observe(state: CampaignState, ctx: CampaignContext) -> CampaignState:
    iteration = state["iteration"]
    lab, view = ctx.lab, ctx.view
    open_jobs = view.lab.open_jobs()
    # kept handles for a lab in this process, else resubmitted (after a restart the driver may not know the jobs;
    # resubmitting is idempotent on the key)
    handles = lab.open_handles([j.job_key for j in open_jobs], lambda key: make_job(ctx, key))
    already = view.lab.n_observed > 0 and view.lab.last_observe_iteration == iteration  # results come in order
    if not already:  # a resumed round has waited already (the lab replay did it); waiting again would skip ahead
        lab.wait(handles)
    items = []
    for job, (status, result) in zip(open_jobs, lab.finished(handles), strict=True):
        if status not in TERMINAL_STATES:
            continue
        if status == "cancelled":
            value, uncertainty, result_status, reason = None, None, "failed", "cancelled by the lab"
            at = lab.now(view.started_at)
        else:
            value, uncertainty, result_status, reason = result.value, result.uncertainty, result.status, result.reason
            at = float(result.completed_s)
        items.append((Observed(iteration=job.iteration, job_key=job.job_key, candidate_id=job.candidate_id,
                               arm=job.arm, value=value, uncertainty=uncertainty, status=result_status, reason=reason,
                               sim_time_s=at, provenance="lab", driver=lab.name, observe_iteration=iteration),
                      f"observed:{job.job_key}"))
    # One transaction for the round's results: a crash before it leaves them all with the lab, which a resumed
    # node reads again (``result`` is idempotent); a crash after it finds them recorded and does not wait again.
    ctx.ledger.append_many(ctx.campaign_id, items, actor=lab.name)
    # A recorded job is never asked again (a cancel resubmits, idempotently), so its kept handle can go.
    lab.forget(payload.job_key for payload, _ in items)
    return {}
