"""dispatch: check each approved job against the driver's safety envelope, then submit it.

An out-of-envelope job is recorded as ``Rejected`` and never reaches the driver. Submits are idempotent on the job
key, so a resumed node is safe. A retry waits on the lab clock until its back-off has passed. A manual lab's clock
is the later of the wall clock and the newest result entered (a person's time stamps may run ahead of it).
"""

from __future__ import annotations

from orchestrator.loop.context import CampaignContext
from orchestrator.loop.jobs import make_job, parse_job_key
from orchestrator.loop.state import CampaignState
from vocabulary.events import Dispatched, Rejected

__all__ = ["dispatch", "envelope_violations"]


def envelope_violations(ctx: CampaignContext, job) -> list[str]:
    """What in ``job`` lies outside the driver's declared safety envelope (nothing if it declares none)."""
    envelope = ctx.lab.envelope
    return list(envelope.check(job)) if envelope is not None else []


def dispatch(state: CampaignState, ctx: CampaignContext) -> CampaignState:
    iteration = state["iteration"]
    keys = state.get("job_keys", [])
    if not keys:
        return {}
    view = ctx.view
    retries = view.pending_retries()
    not_before = {r.retry_key: r.not_before_s or 0.0 for r in retries}
    # A job belongs to the arm that proposed it this iteration (a candidate held earlier may be proposed again, by
    # either arm), and a retry to the arm of the job it repeats.
    arm_of_key = {r.retry_key: r.arm for r in retries}
    proposed_by = {p.candidate_id: p.arm for p in view.proposals.of_iteration(iteration)}
    done = view.lab.keys
    items = []
    for key in keys:
        if key in done:  # dispatched before a crash; the lab replay has resubmitted it already
            continue
        job = make_job(ctx, key)
        candidate_id, _ = parse_job_key(ctx.campaign_id, key)
        arm = arm_of_key.get(key) or proposed_by.get(candidate_id) or view.proposals.first_arm[candidate_id]
        violations = envelope_violations(ctx, job)
        if violations:
            items.append((Rejected(iteration=iteration, arm=arm, stage="dispatch", raw=key, candidate_id=candidate_id,
                                   reason="outside the lab's safety envelope: " + "; ".join(violations)),
                          f"envelope:{key}"))
            continue
        if key in not_before:
            ctx.lab.run_until(not_before[key])  # the back-off passes on a simulated lab's clock
        handle = ctx.lab.submit(job)
        at = ctx.lab.now(view.started_at)
        if ctx.lab.is_manual and view.entered.latest_s is not None:
            at = max(at, view.entered.latest_s)
        items.append((Dispatched(iteration=iteration, job_key=handle.job_key, candidate_id=candidate_id, arm=arm,
                                 driver=ctx.lab.name, sim_time_s=at), f"dispatched:{key}"))
    # The events follow the submits, in one transaction: after a crash in between, the resumed node resubmits (a
    # no-op on the job key) and records them.
    ctx.ledger.append_many(ctx.campaign_id, items, actor="dispatcher")
    return {}
