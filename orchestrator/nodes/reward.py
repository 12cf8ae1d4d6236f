"""reward: score this iteration's steps (proposals, screening, dispatches, lab outcomes) with the rubric.

Each criterion's score is a ``Scored`` event. Proposal, screen and dispatch scores are provisional; outcome scores
come from the lab and are final.
"""

from __future__ import annotations

from ..context import CampaignContext
from ..events import Dispatched, Observed, Proposed, Rejected, Scored, Simulated
from ..history import iteration_payloads
from ..state import CampaignState

__all__ = ["reward", "step_contexts"]


def step_contexts(ctx: CampaignContext, iteration: int) -> list:
    """The rubric's view of every step of one iteration, rebuilt from the ledger."""
    from rewards import StepContext

    rejected = {r.candidate_id: r for r in iteration_payloads(ctx, Rejected.type, iteration)}
    statuses: dict[str, dict[str, str]] = {}
    for simulated in iteration_payloads(ctx, Simulated.type, iteration):
        statuses.setdefault(simulated.candidate_id, {})[simulated.rung] = simulated.observation["status"]
    contexts = []
    for proposal in iteration_payloads(ctx, Proposed.type, iteration):
        rejection = rejected.get(proposal.candidate_id)
        is_duplicate = rejection is not None and rejection.reason.startswith("duplicate")
        is_valid = rejection is None or is_duplicate
        contexts.append(StepContext(stage="proposal", subject=proposal.candidate_id, arm=proposal.arm, is_valid=is_valid,
                                    reason=None if is_valid else rejection.reason, is_duplicate=is_duplicate))
        if proposal.candidate_id in statuses:
            contexts.append(StepContext(stage="screen", subject=proposal.candidate_id, arm=proposal.arm, is_valid=True,
                                        screen_statuses=statuses[proposal.candidate_id]))

    budget = ctx.spec.budget.lab_experiments
    all_dispatched = ctx.ledger.events(ctx.campaign_id, types=[Dispatched.type])
    order = {e.payload["job_key"]: n for n, e in enumerate(all_dispatched)}
    for job in iteration_payloads(ctx, Dispatched.type, iteration):
        contexts.append(StepContext(stage="dispatch", subject=job.job_key, arm=job.arm, is_valid=True,
                                    n_lab_used=order[job.job_key], lab_budget=budget))

    objective = ctx.spec.objective
    best: float | None = None
    for event in ctx.ledger.events(ctx.campaign_id, types=[Observed.type]):
        observed = event.typed()
        utility = objective.utility(observed.value) if observed.status == "ok" else None
        if observed.observe_iteration == iteration:
            contexts.append(StepContext(stage="outcome", subject=observed.job_key, arm=observed.arm, is_valid=True,
                                        lab_value=observed.value if observed.status == "ok" else None,
                                        utility=utility, best_utility_before=best))
        if utility is not None:
            best = utility if best is None else max(best, utility)
    return contexts


def reward(state: CampaignState, ctx: CampaignContext) -> CampaignState:
    iteration = state["iteration"]
    rubric = ctx.rubric
    items = []
    for step in step_contexts(ctx, iteration):
        for score in rubric.score(step):
            payload = Scored(iteration=iteration, stage=step.stage, subject=step.subject, rubric_id=rubric.id,
                             rubric_version=rubric.version, criterion_id=score.criterion_id, value=score.value,
                             weight=score.weight, is_provisional=step.stage != "outcome", reason=score.reason)
            items.append((payload, f"it{iteration}:scored:{step.stage}:{step.subject}:{score.criterion_id}"))
    ctx.ledger.append_many(ctx.campaign_id, items, actor=f"rubric:{rubric.id}@{rubric.version}")
    return {}
