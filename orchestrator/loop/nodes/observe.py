"""observe: wait on the lab and record every finished job.

With ``lab.wait = "any"`` the node returns as soon as one job finishes, so the next iteration refills the freed
capacity (pending-aware dispatch); with ``"all"`` it waits for every open job. A simulated lab's clock jumps to
the next completion; a real lab is polled. A failed job is recorded as failed with its reason; nothing is dropped.

A manual lab (a person at the bench) is not waited on: the results entered for open jobs (``ResultEntered``) become
their ``Observed`` events, recorded with the person as actor. While jobs stay open (``"all"``) or nothing new came in
(``"any"``) the node raises ``WaitingForResults`` and the run returns ``waiting_for_results``; the next run starts
at this node again.
"""

from __future__ import annotations

from datetime import UTC, datetime

from orchestrator.loop.context import CampaignContext
from orchestrator.loop.jobs import make_job
from orchestrator.loop.lab import TERMINAL_STATES, WaitingForResults
from orchestrator.loop.state import CampaignState
from vocabulary.events import Observed, ResultsAwaited

__all__ = ["observe"]


def _observe_entered(iteration: int, ctx: CampaignContext) -> CampaignState:
    """Record the results entered by hand for open jobs; raise ``WaitingForResults`` while the round must wait."""
    view = ctx.view
    open_jobs = view.lab.open_jobs()
    if not open_jobs:
        return {}
    items = []
    for job in open_jobs:
        entry = view.entered.by_job.get(job.job_key)
        if entry is None:
            continue
        p = entry.payload
        items.append((Observed(iteration=job.iteration, job_key=job.job_key, candidate_id=job.candidate_id,
                               arm=job.arm, value=p["value"], uncertainty=p.get("uncertainty"), status=p["status"],
                               reason=p.get("reason"), values=p.get("values", {}),
                               infeasible=p.get("infeasible", False),
                               sim_time_s=max(p["sim_time_s"], job.submitted_s),
                               provenance="lab", driver=ctx.lab.name, observe_iteration=iteration),
                      f"observed:{job.job_key}", entry.actor, datetime.now(UTC)))
    n_open = len(open_jobs) - len(items)
    has_round_results = bool(items) or (view.lab.n_observed > 0 and view.lab.last_observe_iteration == iteration)
    waiting: list[str] = []
    if n_open and (ctx.lab.wait_all or not has_round_results):
        recorded = {payload.job_key for payload, *_ in items}
        waiting = [j.job_key for j in open_jobs if j.job_key not in recorded]
        # keyed by what has been observed so far: asking again with nothing new entered writes nothing
        items.append((ResultsAwaited(iteration=iteration, job_keys=waiting),
                      f"results-awaited:{iteration}:{view.lab.n_observed + len(items)}", "observer",
                      datetime.now(UTC)))
    ctx.ledger.append_many(ctx.campaign_id, items)
    if waiting:
        raise WaitingForResults(waiting)
    return {}


def observe(state: CampaignState, ctx: CampaignContext) -> CampaignState:
    iteration = state["iteration"]
    lab, view = ctx.lab, ctx.view
    if lab.is_manual:
        return _observe_entered(iteration, ctx)
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
        measured: dict = {}
        if status == "cancelled":
            value, uncertainty, result_status, reason = None, None, "failed", "cancelled by the lab"
            at = lab.now(view.started_at)
        else:
            value, uncertainty, result_status, reason = result.value, result.uncertainty, result.status, result.reason
            at = float(result.completed_s)
            measured = {"values": dict(result.values), "infeasible": result.infeasible}
        items.append((Observed(iteration=job.iteration, job_key=job.job_key, candidate_id=job.candidate_id,
                               arm=job.arm, value=value, uncertainty=uncertainty, status=result_status, reason=reason,
                               sim_time_s=at, provenance="lab", driver=lab.name, observe_iteration=iteration,
                               **measured),
                      f"observed:{job.job_key}"))
    # One transaction for the round's results: a crash before it leaves them all with the lab, which a resumed
    # node reads again (``result`` is idempotent); a crash after it finds them recorded and does not wait again.
    ctx.ledger.append_many(ctx.campaign_id, items, actor=lab.name)
    # A recorded job is never asked again (a cancel resubmits, idempotently), so its kept handle can go.
    lab.forget(payload.job_key for payload, _ in items)
    return {}
