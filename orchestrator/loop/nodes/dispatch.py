"""dispatch: check each approved job against the driver's safety envelope, then submit it.

An out-of-envelope job is recorded as ``Rejected`` and never reaches the driver. Submits are idempotent on the job
key, so a resumed node is safe. A retry waits on the lab clock until its back-off has passed.
"""

from __future__ import annotations

from orchestrator.loop.context import CampaignContext
from orchestrator.loop.history import iteration_payloads, pending_retries
from orchestrator.loop.jobs import make_job, parse_job_key
from orchestrator.loop.lab_clock import lab_now, remember_handle
from orchestrator.loop.state import CampaignState
from vocabulary.events import Dispatched, Proposed, Rejected

__all__ = ["dispatch", "envelope_violations"]


def envelope_violations(ctx: CampaignContext, job) -> list[str]:
    """What in ``job`` lies outside the driver's declared safety envelope (nothing if it declares none)."""
    envelope = getattr(ctx.driver, "envelope", None)
    return list(envelope.check(job)) if envelope is not None else []


def dispatch(state: CampaignState, ctx: CampaignContext) -> CampaignState:
    iteration = state["iteration"]
    keys = state.get("job_keys", [])
    if not keys:
        return {}
    retries = pending_retries(ctx)
    not_before = {r.retry_key: r.not_before_s or 0.0 for r in retries}
    # A job belongs to the arm that proposed it this iteration (a candidate held earlier may be proposed again, by
    # either arm), and a retry to the arm of the job it repeats.
    arm_of_key = {r.retry_key: r.arm for r in retries}
    proposed_by = {p.candidate_id: p.arm for p in iteration_payloads(ctx, Proposed.type, iteration)}
    done = ctx.ledger.dispatched_keys(ctx.campaign_id, keys)
    items = []
    for key in keys:
        if key in done:  # dispatched before a crash; the lab replay has resubmitted it already
            continue
        job = make_job(ctx, key)
        candidate_id, _ = parse_job_key(ctx.campaign_id, key)
        arm = (arm_of_key.get(key) or proposed_by.get(candidate_id)
               or ctx.ledger.candidate(ctx.campaign_id, candidate_id).arm)
        violations = envelope_violations(ctx, job)
        if violations:
            items.append((Rejected(iteration=iteration, arm=arm, stage="dispatch", raw=key, candidate_id=candidate_id,
                                   reason="outside the lab's safety envelope: " + "; ".join(violations)),
                          f"envelope:{key}"))
            continue
        if key in not_before and hasattr(ctx.driver, "run_until"):
            ctx.driver.run_until(not_before[key])  # the back-off passes on the lab clock
        handle = ctx.loop.run(ctx.driver.submit(job))
        remember_handle(ctx, handle)
        items.append((Dispatched(iteration=iteration, job_key=handle.job_key, candidate_id=candidate_id, arm=arm,
                                 driver=ctx.driver.name, sim_time_s=lab_now(ctx)), f"dispatched:{key}"))
    # The events follow the submits, in one transaction: after a crash in between, the resumed node resubmits (a
    # no-op on the job key) and records them.
    ctx.ledger.append_many(ctx.campaign_id, items, actor="dispatcher")
    return {}
