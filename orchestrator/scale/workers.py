"""Several orchestrator workers sharing the campaigns of one ledger database.

A campaign is one LangGraph thread, and its loop is sequential (each plan needs the results before it), so workers
share campaigns by taking turns: a worker drives a campaign only while it holds that campaign's **lease**, resumes it
from its last checkpoint, runs up to ``turn_steps`` graph nodes, and lets go. Other workers take the next turn, or
other campaigns meanwhile; a worker that dies loses its lease with its connection (or process), and the next worker
resumes where the checkpoint and the ledger say the campaign is.

Leases (``orchestrator.loop.lease``) use the databases' own locks, not a lock table of ours: a PostgreSQL session
advisory lock, or a ``flock`` beside a SQLite file. A killed worker cannot keep a campaign. ``closedloop run`` takes
the same lease, so a worker and a ``run --resume`` never drive one campaign at once.

The lease is the first line against double dispatch. The second is the ledger: appends to one campaign are
serialised (``BEGIN IMMEDIATE`` / a transaction-level advisory lock), every lab job has an idempotency key, and a lab
driver's ``submit`` is idempotent on the job key. A worker whose lease failed under it stops after the node it is
in, and anything that node repeats is an identical re-append (a no-op) or a ``LedgerConflict``, never a second run.

Run a worker from the shell with ``python -m orchestrator.scale.workers --db postgresql://… [--campaign ID …]``.

Example:
    >>> from orchestrator.loop.campaign import Campaign
    >>> from orchestrator.spec import CampaignSpec
    >>> import tempfile, pathlib
    >>> spec = CampaignSpec.model_validate({
    ...     "campaign": {"name": "demo", "kind": "molecule", "seed": 1},
    ...     "objective": {"direction": "maximize"},
    ...     "space": {"inline": ["C", "CC", "CCC", "CCCC"]},
    ...     "lab": {"oracle": {"C": 1, "CC": 2, "CCC": 3, "CCCC": 4}},
    ...     "budget": {"lab_experiments": 2}, "planner": {"main": "random", "control": None, "control_share": 0},
    ... })
    >>> db = pathlib.Path(tempfile.mkdtemp()) / "shared.db"
    >>> Campaign.start(spec, db=db, campaign_id="w1").close()
    >>> report = run_worker(db, worker_id="a")
    >>> report.campaigns_finished, report.n_steps > 0
    (['w1'], True)
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.ledger import Ledger
from orchestrator.loop.lease import CampaignLease, LeaseLost

__all__ = ["CampaignLease", "LeaseLost", "WorkerReport", "run_worker"]

log = logging.getLogger(__name__)


@dataclass
class WorkerReport:
    """What one worker did."""

    worker_id: str
    n_turns: int = 0
    n_steps: int = 0
    steps_by_campaign: dict[str, int] = field(default_factory=dict)
    campaigns_finished: list[str] = field(default_factory=list)
    """Campaigns that stopped during one of this worker's turns."""
    campaigns_waiting: list[str] = field(default_factory=list)
    """Campaigns left waiting for a human answer (approval or failure handling)."""

    def as_dict(self) -> dict[str, Any]:
        return {"worker_id": self.worker_id, "n_turns": self.n_turns, "n_steps": self.n_steps,
                "steps_by_campaign": self.steps_by_campaign, "campaigns_finished": self.campaigns_finished,
                "campaigns_waiting": self.campaigns_waiting}


def run_worker(
    db: str | Path | Ledger,
    *,
    worker_id: str | None = None,
    campaign_ids: list[str] | None = None,
    turn_steps: int = 10,
    poll_s: float = 0.2,
    max_turns: int | None = None,
) -> WorkerReport:
    """Take turns on the running campaigns of a ledger until none is left to drive.

    Args:
        db: the shared ledger (a PostgreSQL URL for workers on several machines, or a SQLite file on one).
        worker_id: a name for logs and the report (default ``host-pid``).
        campaign_ids: only these campaigns (default: every campaign that is still running).
        turn_steps: graph nodes per turn before the lease is offered to other workers (10 is about one iteration).
        poll_s: how long to wait when every campaign is leased by other workers.
        max_turns: stop after this many turns (for tests and draining); None runs until nothing is left.

    Returns:
        What this worker did. It returns when every selected campaign has stopped or waits for a human.
    """
    from orchestrator.loop.campaign import Campaign

    ledger, owns = (db, False) if isinstance(db, Ledger) else (Ledger.open(db), True)
    report = WorkerReport(worker_id or f"{socket.gethostname()}-{os.getpid()}")
    open_campaigns: dict[str, tuple[Campaign, int]] = {}
    try:
        while max_turns is None or report.n_turns < max_turns:
            candidates = [c.id for c in ledger.campaigns() if c.status == "running"
                          and (campaign_ids is None or c.id in campaign_ids) and c.id not in report.campaigns_waiting]
            if not candidates:
                break
            # start the scan at a different place in every worker, so workers spread over campaigns
            offset = zlib.crc32(report.worker_id.encode()) % len(candidates)
            did_work = False
            for campaign_id in candidates[offset:] + candidates[:offset]:
                lease = CampaignLease(ledger, campaign_id)
                if not lease.try_acquire():
                    continue
                did_work = True
                try:
                    campaign = _open(Campaign, ledger, campaign_id, open_campaigns, lease)
                    n_steps = _turn(campaign, lease, turn_steps)
                except LeaseLost as exc:
                    log.warning("worker %s: %s; leaving the campaign to the others", report.worker_id, exc)
                    campaign.close()
                    break
                finally:
                    lease.release()
                open_campaigns[campaign_id] = (campaign, ledger.n_events(campaign_id))
                report.n_turns += 1
                report.n_steps += n_steps
                report.steps_by_campaign[campaign_id] = report.steps_by_campaign.get(campaign_id, 0) + n_steps
                if campaign.is_finished:
                    report.campaigns_finished.append(campaign_id)
                elif campaign.pending_interrupt is not None:
                    report.campaigns_waiting.append(campaign_id)
                log.info("worker %s: %d steps of %s", report.worker_id, n_steps, campaign_id)
                time.sleep(poll_s)  # let the others have a go at this campaign before taking it again
                break
            if not did_work:
                time.sleep(poll_s)
    finally:
        for campaign, _ in open_campaigns.values():
            campaign.close()
        if owns:
            ledger.close()
    return report


def _open(campaign_cls, ledger: Ledger, campaign_id: str, open_campaigns: dict, lease: CampaignLease) -> Any:
    """The campaign as this worker left it, or rebuilt from the ledger if anyone else has driven it since."""
    cached = open_campaigns.pop(campaign_id, None)
    if cached is not None:
        campaign, n_events = cached
        if ledger.n_events(campaign_id) == n_events:
            return campaign
        campaign.close()  # its lab replica and caches are behind: rebuild
    return campaign_cls.resume(campaign_id, db=ledger, lease=lease)


def _turn(campaign: Any, lease: CampaignLease, turn_steps: int) -> int:
    n_steps = 0

    def on_step(_node: str, _update: dict) -> None:
        nonlocal n_steps
        n_steps += 1
        lease.check()  # a worker that lost its lease stops here, before the next node

    campaign.run(max_steps=turn_steps, on_step=on_step)
    return n_steps


def _main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m orchestrator.scale.workers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, help="the shared ledger: a PostgreSQL URL or a SQLite file")
    parser.add_argument("--campaign", action="append", dest="campaign_ids", help="only this campaign (repeatable)")
    parser.add_argument("--worker-id", default=None)
    parser.add_argument("--turn-steps", type=int, default=10)
    parser.add_argument("--poll-s", type=float, default=0.2)
    args = parser.parse_args(argv)
    report = run_worker(args.db, worker_id=args.worker_id, campaign_ids=args.campaign_ids,
                        turn_steps=args.turn_steps, poll_s=args.poll_s)
    print(json.dumps(report.as_dict()))


if __name__ == "__main__":
    _main()
