"""Results people entered by hand for a manual lab's jobs (``ResultEntered``), by job key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vocabulary.events import Event, ResultEntered

__all__ = ["Entry", "EnteredResults"]


@dataclass(frozen=True, slots=True)
class Entry:
    """One entered result: its payload (``ResultEntered`` as JSON), the ledger seq and the actor (``human:NAME``)."""

    payload: dict[str, Any]
    seq: int
    actor: str


class EnteredResults:
    """Fold of ``ResultEntered``: the first entry of each job (the ledger keeps one per job key)."""

    types = frozenset({ResultEntered.type})

    def __init__(self) -> None:
        self.by_job: dict[str, Entry] = {}
        self.latest_s: float | None = None
        """The latest lab time an entered result was measured at, seconds since the campaign started."""

    def on(self, event: Event) -> None:
        p = event.payload
        self.by_job.setdefault(p["job_key"], Entry(p, event.seq, event.actor))
        at = p.get("sim_time_s")
        if at is not None:
            self.latest_s = at if self.latest_s is None else max(self.latest_s, at)
