"""The lab's clock as the campaign sees it: where it stands, how much lab time was used, waiting for jobs, and
bringing a freshly built simulated lab back to the state the ledger records.

The functions read the campaign's runtime (``CampaignContext``) but import nothing above the ledger, so the context
(which replays the lab when it is built) and the nodes (which wait on it) both stand on this module.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.ledger import Ledger
    from orchestrator.loop.context import CampaignContext

__all__ = ["TERMINAL_STATES", "known_handle", "lab_now", "lab_time_s", "remember_handle", "replay_lab",
           "wait_for_jobs"]

TERMINAL_STATES = frozenset({"done", "failed", "cancelled"})
"""Job states after which a job does not change."""


async def _poll(driver, handles, *, wait_all: bool, interval_s: float) -> None:
    while True:
        states = [await driver.status(h) for h in handles]
        finished = [s in TERMINAL_STATES for s in states]
        if all(finished) or (not wait_all and any(finished)):
            return
        await asyncio.sleep(interval_s)


def wait_for_jobs(ctx: CampaignContext, handles) -> None:
    """Advance a simulated lab's clock, or poll a real driver, until one (or every) job has finished."""
    if not handles:
        return
    wait_all = ctx.spec.lab.wait == "all"
    if hasattr(ctx.driver, "run_until_complete"):
        (ctx.driver.run_until_complete if wait_all else ctx.driver.run_until_any_complete)(handles)
    else:
        ctx.loop.run(_poll(ctx.driver, handles, wait_all=wait_all, interval_s=0.2))


def lab_time_s(ledger: Ledger, campaign_id: str) -> float:
    """Lab time the campaign has used: from its first dispatch to its latest dispatch or result, seconds.

    (A remote lab's clock did not start with the campaign, so the first dispatch is the origin.)
    """
    jobs = ledger.lab_jobs(campaign_id)
    if not jobs:
        return 0.0
    starts = [j.submitted_s for j in jobs]
    ends = [j.completed_s for j in jobs if j.completed_s is not None]
    return max(starts + ends) - min(starts)


def lab_now(ctx: CampaignContext) -> float:
    """The lab clock in seconds since the campaign started: simulated for a simulated lab, wall time otherwise."""
    if hasattr(ctx.driver, "now"):
        return float(ctx.driver.now)
    import datetime as _dt

    started = ctx.ledger.events(ctx.campaign_id, types=["CampaignStarted"])[0].at
    if started.tzinfo is None:
        started = started.replace(tzinfo=_dt.UTC)
    return (_dt.datetime.now(_dt.UTC) - started).total_seconds()


def remember_handle(ctx: CampaignContext, handle) -> None:
    """Keep a submitted job's handle when the lab runs in this process (a simulated lab, which cannot lose a job it
    was given), so later rounds ask it without resubmitting. A remote lab's jobs are resubmitted each round instead
    (idempotent on the key), in case the lab restarted."""
    if hasattr(ctx.driver, "run_until"):
        ctx.resources.setdefault("lab_handles", {})[handle.job_key] = handle


def known_handle(ctx: CampaignContext, job_key: str):
    """The handle ``remember_handle`` kept for ``job_key``, or None."""
    return ctx.resources.get("lab_handles", {}).get(job_key)


def replay_lab(ctx: CampaignContext) -> None:
    """Bring a freshly built simulated lab to the state the ledger records, by replaying its interactions.

    The simulated lab is deterministic, so submitting the same jobs at the same lab times and waiting in the same
    rounds reproduces every queue, every station and the clock exactly. Real labs keep their own state.
    """
    driver = ctx.driver
    if not hasattr(driver, "run_until"):
        return
    from orchestrator.loop.jobs import make_job

    open_handles: dict[str, object] = {}
    last_round = None
    for event in ctx.ledger.events(ctx.campaign_id, types=["Dispatched", "Observed"]):
        p = event.payload
        if event.type == "Dispatched":
            driver.run_until(p["sim_time_s"])
            open_handles[p["job_key"]] = handle = ctx.loop.run(driver.submit(make_job(ctx, p["job_key"])))
            remember_handle(ctx, handle)
        elif p["provenance"] == "lab":
            if p["observe_iteration"] != last_round:
                wait_for_jobs(ctx, list(open_handles.values()))
                last_round = p["observe_iteration"]
            open_handles.pop(p["job_key"], None)
