"""decide: stop on budget, target, iteration limit or an exhausted pool; otherwise go round again."""

from __future__ import annotations

from ..context import CampaignContext, lab_clock_s
from ..events import CampaignStopped, Observed, Simulated
from ..history import lab_history
from ..state import CampaignState

__all__ = ["decide", "stop_reason"]


def _compute_spent_s(ctx: CampaignContext) -> float:
    return sum(e.payload["observation"].get("cost_s", 0.0) for e in ctx.ledger.events(ctx.campaign_id, types=[Simulated.type]))


def stop_reason(ctx: CampaignContext, iteration: int) -> str | None:
    """Why the campaign should stop now, or None to continue."""
    spec = ctx.spec
    history = lab_history(ctx)
    if history.n_dispatched >= spec.budget.lab_experiments:
        return f"lab budget used: {history.n_dispatched} of {spec.budget.lab_experiments} experiments"
    if spec.budget.lab_hours is not None and lab_clock_s(ctx.ledger, ctx.campaign_id) >= spec.budget.lab_hours * 3600:
        return f"lab time used: {lab_clock_s(ctx.ledger, ctx.campaign_id) / 3600:.1f} of {spec.budget.lab_hours} h"
    if spec.budget.compute_seconds is not None and _compute_spent_s(ctx) >= spec.budget.compute_seconds:
        return f"compute budget used: {_compute_spent_s(ctx):.0f} of {spec.budget.compute_seconds:.0f} s"
    if spec.stop.on_target:
        hits = [r for r in history.results if spec.objective.is_hit(r[2], spec.stop.threshold)]
        if hits:
            return f"target reached: {hits[0][0]} measured {hits[0][2]:.4g}"
    if spec.stop.max_iterations is not None and iteration + 1 >= spec.stop.max_iterations:
        return f"iteration limit reached: {spec.stop.max_iterations}"
    if len(history.tested) >= len(ctx.pool):
        return "design space exhausted: every candidate has been tested"
    return None


def decide(state: CampaignState, ctx: CampaignContext) -> CampaignState:
    iteration = state["iteration"]
    reason = stop_reason(ctx, iteration)
    if reason is None and not state.get("proposed"):
        reason = "no proposals left: the planners found nothing untested to propose"
    if reason is None:
        return {"iteration": iteration + 1, "proposed": [], "valid": [], "promoted": [], "job_keys": [], "slots": {}}
    history = lab_history(ctx)
    best = history.best
    n_lab = len(ctx.ledger.events(ctx.campaign_id, types=[Observed.type]))
    ctx.ledger.append(
        ctx.campaign_id,
        CampaignStopped(reason=reason, n_lab=n_lab, best_candidate_id=best[0] if best else None,
                        best_value=best[2] if best else None),
        key="stopped",
        actor="orchestrator",
    )
    return {"is_done": True, "stop_reason": reason}
