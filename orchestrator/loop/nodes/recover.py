"""recover: decide what each failed lab job leads to: a retry with back-off, a skip, or an abort.

The lab's ``failure_policy`` decides, or, with ``ask``, a human does through a LangGraph ``interrupt`` answered with
``{job_key: "retry" | "skip" | "abort"}`` (or one action for all), optionally with the person's name as
``{"answer": ..., "by": NAME}`` (``orchestrator.loop.human_answer``), recorded as decided by ``human:NAME`` (``human``
without a name). A retry is a new job key, so the failed run and
its retry both stay in the ledger. Retries are capped by ``max_retries``; then the candidate is skipped. An
infeasible result, and every failure under the policy ``learn``, is skipped at once: the point cannot work, and the
planners learn where runs fail.
"""

from __future__ import annotations

from langgraph.types import interrupt

from orchestrator.loop.context import CampaignContext
from orchestrator.loop.human_answer import read_answer
from orchestrator.loop.jobs import job_key, parse_job_key
from orchestrator.loop.state import CampaignState
from vocabulary.events import FailureHandled, Observed

__all__ = ["recover", "unhandled_failures"]


def unhandled_failures(ctx: CampaignContext) -> list[Observed]:
    """Failed lab results that no ``FailureHandled`` event has answered yet, oldest first."""
    return ctx.view.unhandled_failures()


def _human_actions(failures: list[Observed], ctx: CampaignContext) -> tuple[dict[str, str], str]:
    """The action a human chose for each failure, and who chose (``human`` or ``human:NAME``)."""
    answer, decided_by = read_answer(interrupt({
        "campaign_id": ctx.campaign_id,
        "question": "lab jobs failed; resume with 'retry', 'skip' or 'abort' (or a mapping of job key to action; "
                    "or {'answer': one of those, 'by': your name})",
        "failures": [{"job_key": f.job_key, "candidate_id": f.candidate_id, "reason": f.reason} for f in failures],
    }))
    if isinstance(answer, str):
        return {f.job_key: answer for f in failures}, decided_by
    return {f.job_key: answer.get(f.job_key, "skip") for f in failures}, decided_by


def recover(state: CampaignState, ctx: CampaignContext) -> CampaignState:
    iteration = state["iteration"]
    failures = unhandled_failures(ctx)
    if not failures:
        return {}
    lab = ctx.spec.lab
    if lab.failure_policy == "ask":
        actions, decided_by = _human_actions(failures, ctx)
    else:
        actions, decided_by = {f.job_key: lab.failure_policy for f in failures}, f"policy:{lab.failure_policy}"
    items = []
    for failure in failures:
        candidate_id, attempt = parse_job_key(ctx.campaign_id, failure.job_key)
        action = actions[failure.job_key]
        if failure.infeasible:
            action = "skip"  # the lab says the point cannot work: a retry would fail again; the planners learn it
        if action not in {"retry", "skip", "abort"}:
            action = "skip"  # 'learn': infeasible here, never retried (the planners learn it from the ledger)
        retry_key, not_before = None, None
        if action == "retry" and attempt > lab.max_retries:
            action = "skip"
        if action == "retry":
            retry_key = job_key(ctx.campaign_id, candidate_id, attempt + 1)
            not_before = failure.sim_time_s + lab.retry_backoff_s * 2 ** (attempt - 1)
        items.append((FailureHandled(iteration=iteration, job_key=failure.job_key, candidate_id=candidate_id,
                                     arm=failure.arm, action=action, reason=failure.reason or "unknown",
                                     decided_by=decided_by, attempt=attempt, retry_key=retry_key,
                                     not_before_s=not_before), f"handled:{failure.job_key}"))
    ctx.ledger.append_many(ctx.campaign_id, items, actor=decided_by)
    return {}
