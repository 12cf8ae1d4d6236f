"""A lab that answers from a recorded campaign: what-if replays against a real lab reuse its measurements.

Candidates the recorded campaign measured get their recorded value (the mean of repeats); any other candidate's job
fails with a reason that starts with ``unknown``, because nobody can say what the real lab would have measured.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from .oracle import TableOracle
from .simlab import SimLabDriver

__all__ = ["RecordedLabDriver", "UNKNOWN_PREFIX", "recorded_values"]

UNKNOWN_PREFIX = "unknown"


def recorded_values(db: str, campaign_id: str) -> dict[str, float]:
    """Candidate id -> mean recorded lab value (successful lab results only)."""
    from orchestrator.ledger import Ledger

    ledger = Ledger.open(db)
    try:
        values: dict[str, list[float]] = defaultdict(list)
        for event in ledger.events(campaign_id, types=["Observed"]):
            p = event.payload
            if p["status"] == "ok" and p["value"] is not None:
                values[p["candidate_id"]].append(float(p["value"]))
    finally:
        ledger.close()
    return {cid: sum(v) / len(v) for cid, v in values.items()}


class _RecordedOracle(TableOracle):
    def __call__(self, candidate: Any) -> float:
        from orchestrator.domain import InstrumentFault

        if candidate.id not in self:
            raise InstrumentFault(f"{UNKNOWN_PREFIX}: the recorded campaign never measured {candidate.id}, so its "
                                  "lab result is unknown in this what-if")
        return super().__call__(candidate)


class RecordedLabDriver(SimLabDriver):
    """The simulated lab's scheduling, with the recorded campaign's results as ground truth and no added noise.

    Args:
        db: the recorded campaign's ledger URL or path.
        campaign_id: the recorded campaign.
        **params: SimLab keyword arguments (stations, durations_s, ...), except oracle and noise.
    """

    name = "recorded"

    def __init__(self, *, db: str, campaign_id: str, **params: Any) -> None:
        params.pop("oracle", None)
        params["noise_sd"] = 0.0
        super().__init__(oracle=_RecordedOracle(recorded_values(db, campaign_id), property="recorded"), **params)
