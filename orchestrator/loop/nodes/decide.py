"""decide: go round again, drain the lab, or stop (budget, target, abort, an unhealthy lab, an exhausted pool).

When no more jobs may be dispatched but some are still in the lab, the loop goes back to ``observe`` until they
finish: a result is never abandoned. Retries that can no longer run are recorded as skipped, with the reason.
"""

from __future__ import annotations

import logging
from collections import Counter

from orchestrator.loop.context import CampaignContext
from orchestrator.loop.jobs import parse_job_key
from orchestrator.loop.ruled_out import failed_for_good
from orchestrator.loop.state import CampaignState
from orchestrator.loop.view import LabHistory
from vocabulary.events import CampaignStopped, FailureHandled, Observed

__all__ = ["decide", "is_failure_stop", "stop_reason", "verdict"]

_UNHEALTHY, _ABORTED = "lab unhealthy", "aborted after job"
"""How the stop reasons of a campaign that ended on lab failures begin (``is_failure_stop``)."""

logger = logging.getLogger(__name__)


def is_failure_stop(reason: str | None) -> bool:
    """Whether a campaign stopped because its lab failed (an unhealthy lab, an abort), not because it was done.

    Example:
        >>> is_failure_stop("lab unhealthy: 4 of 6 finished jobs failed"), is_failure_stop("lab budget used: 8 of 8")
        (True, False)
    """
    return bool(reason) and reason.startswith((_UNHEALTHY, _ABORTED))


def _unhealthy(ctx: CampaignContext, history: LabHistory) -> str | None:
    lab = ctx.spec.lab
    n_finished, n_failed = history.n_finished, len(history.failures)
    if lab.failure_policy != "learn":  # results the lab called infeasible say where runs fail, not that it is unwell
        n_failed -= len(history.learned_failures)
    if n_finished < lab.min_jobs_for_failure_rate or n_failed / n_finished <= lab.tolerated_failure_rate:
        return None
    reasons = Counter(reason.split(":")[0] for _, _, _, reason in history.failures).most_common(3)
    shown = ", ".join(f"{reason!r} ×{n}" for reason, n in reasons)
    return (f"{_UNHEALTHY}: {n_failed} of {n_finished} finished jobs failed ({n_failed / n_finished:.0%} > tolerated "
            f"{lab.tolerated_failure_rate:.0%}); most common: {shown}. Check the instrument, then resume or raise "
            "lab.tolerated_failure_rate")


def stop_reason(ctx: CampaignContext, iteration: int, history: LabHistory) -> tuple[str | None, bool]:
    """(why to stop, whether to stop at once even with jobs still in the lab) — or (None, False) to continue."""
    spec = ctx.spec
    aborts = ctx.view.failures.aborts
    if aborts:
        return f"{_ABORTED} {aborts[0].job_key} failed: {aborts[0].reason}", True
    unhealthy = _unhealthy(ctx, history)
    if unhealthy:
        return unhealthy, False  # dispatch nothing more, but collect what is already in the lab
    if spec.stop.on_target:
        hits = [r for r in history.results if r[1] != "imported" and spec.objective.is_hit(r[2], spec.stop.threshold)]
        if hits:
            return f"target reached: {hits[0][0]} measured {hits[0][2]:.4g}", False
    if history.n_dispatched >= spec.budget.lab_experiments:
        return f"lab budget used: {history.n_dispatched} of {spec.budget.lab_experiments} experiments", False
    clock_s = history.lab_time_s
    if spec.budget.lab_hours is not None and clock_s >= spec.budget.lab_hours * 3600:
        return f"lab time used: {clock_s / 3600:.1f} of {spec.budget.lab_hours} h", False
    if spec.stop.max_iterations is not None and iteration + 1 >= spec.stop.max_iterations:
        return f"iteration limit reached: {spec.stop.max_iterations}", False
    if len(history.tested) >= len(ctx.pool) and not ctx.view.pending_retries():
        return "design space exhausted: every candidate has been tested", False
    stalled = _stalled(ctx, iteration, history)
    if stalled:
        return stalled, False
    return None, False


STALL_ITERATIONS = 10
"""Planning rounds in a row that may dispatch nothing, with nothing in the lab, before the campaign stops."""


def _stalled(ctx: CampaignContext, iteration: int, history: LabHistory) -> str | None:
    """Why the loop is going round without progress (every proposal rejected or screened out), or None."""
    if history.pending or iteration + 1 < STALL_ITERATIONS:
        return None
    # A job is dispatched in its iteration or an earlier one, so the latest dispatching iteration says it.
    if iteration - STALL_ITERATIONS + 1 <= history.last_dispatch_iteration <= iteration:
        return None
    return (f"stalled: the last {STALL_ITERATIONS} planning rounds dispatched nothing (every proposal was rejected or "
            "screened out); see `closedloop show` for the Rejected and Promoted events, then widen the design space, "
            "relax the screening or change the planner, and resume")


def _cancel_open_jobs(ctx: CampaignContext, iteration: int, reason: str) -> list:
    """Cancel what is still in the lab when the campaign must stop at once, and record each job as failed."""
    from orchestrator.loop.jobs import make_job

    items = []
    lab = ctx.lab
    for job in ctx.view.lab.open_jobs():
        handle = lab.submit(make_job(ctx, job.job_key))  # idempotent: the same handle
        lab.cancel(handle)
        why = f"cancelled: the campaign stopped ({reason})"
        _, attempt = parse_job_key(ctx.campaign_id, job.job_key)
        items.append((Observed(iteration=job.iteration, job_key=job.job_key, candidate_id=job.candidate_id, arm=job.arm,
                               value=None, status="failed", reason=why, sim_time_s=lab.now(ctx.view.started_at),
                               provenance="lab", driver=lab.name, observe_iteration=iteration), f"observed:{job.job_key}"))
        items.append((FailureHandled(iteration=iteration, job_key=job.job_key, candidate_id=job.candidate_id,
                                     arm=job.arm, action="skip", reason=why, decided_by="orchestrator",
                                     attempt=attempt), f"handled:{job.job_key}"))
    return items


def verdict(state: CampaignState, ctx: CampaignContext, history: LabHistory) -> tuple[str | None, str]:
    """Why the campaign stops (None: it goes on) and where the loop goes next: ``plan``, ``observe`` (drain the
    lab: collect every result before stopping) or ``end``. Reads the ledger, writes nothing."""
    reason, is_immediate = stop_reason(ctx, state["iteration"], history)
    nothing_new = not state.get("proposed") and not state.get("retries")
    if reason is None and nothing_new and not history.pending and not ctx.view.pending_retries():
        reason = "no proposals left: the planners found nothing untested to propose"
        if n_ruled_out := len(failed_for_good(ctx) - set(history.tested)):
            reason += (f" ({n_ruled_out} untested candidate(s) are left out because a rung failed on them or has no "
                       "value for them; `closedloop show` lists the rung results)")
    if reason is None:
        return None, "plan"
    return reason, "observe" if history.pending and not is_immediate else "end"


def decide(state: CampaignState, ctx: CampaignContext) -> CampaignState:
    iteration = state["iteration"]
    history = ctx.view.history()
    reason, following = verdict(state, ctx, history)
    next_state = {"iteration": iteration + 1, "proposed": [], "valid": [], "promoted": [], "job_keys": [],
                  "slots": {}, "retries": []}
    if following != "end":
        logger.info("decide: iteration %d, %d of %d lab experiments dispatched, %d pending; next: %s%s", iteration,
                    history.n_dispatched, ctx.spec.budget.lab_experiments, len(history.pending), following,
                    f" (draining the lab: {reason})" if reason else "")
        return {**next_state, "next_node": following}
    items = _cancel_open_jobs(ctx, iteration, reason) if history.pending else []
    for retry in ctx.view.pending_retries():
        candidate_id, attempt = parse_job_key(ctx.campaign_id, retry.retry_key)
        items.append((FailureHandled(iteration=iteration, job_key=retry.retry_key, candidate_id=candidate_id,
                                     arm=retry.arm, action="skip", reason=f"not retried: the campaign stopped ({reason})",
                                     decided_by="orchestrator", attempt=attempt), f"handled:{retry.retry_key}"))
    best = history.best
    n_lab = ctx.view.lab.n_observed
    items.append((CampaignStopped(reason=reason, n_lab=n_lab, best_candidate_id=best[0] if best else None,
                                  best_value=best[2] if best else None), "stopped"))
    ctx.ledger.append_many(ctx.campaign_id, items, actor="orchestrator")
    logger.info("decide: iteration %d, campaign stopped after %d lab result(s): %s", iteration, n_lab, reason)
    return {"is_done": True, "stop_reason": reason, "next_node": "end"}
