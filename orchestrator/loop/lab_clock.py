"""The lab time a finished or running campaign has used, read from its ledger's lab-job rows (reports and the
summary; the loop's own clock is ``loop.lab.Lab``)."""

from __future__ import annotations

from orchestrator.ledger import Ledger
from orchestrator.loop.lab import TERMINAL_STATES

__all__ = ["TERMINAL_STATES", "lab_time_s"]


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
