"""Read-side helpers: what the ledger says has happened, in the shapes nodes need."""

from __future__ import annotations

from dataclasses import dataclass

from .context import CampaignContext
from .events import EventPayload, parse_payload

__all__ = ["LabHistory", "iteration_payloads", "lab_history"]


@dataclass(frozen=True)
class LabHistory:
    """Lab jobs so far. ``results`` holds (candidate id, arm, value, utility) for successful jobs, in seq order."""

    tested: frozenset[str]
    pending: tuple[str, ...]
    results: tuple[tuple[str, str, float, float], ...]
    n_dispatched: int
    n_by_arm: dict[str, int]

    @property
    def best(self) -> tuple[str, str, float, float] | None:
        """The result with the highest utility (earliest wins ties)."""
        return max(self.results, key=lambda r: r[3], default=None)


def lab_history(ctx: CampaignContext) -> LabHistory:
    jobs = ctx.ledger.lab_jobs(ctx.campaign_id)
    jobs.sort(key=lambda j: j.dispatched_seq)
    objective = ctx.spec.objective
    n_by_arm: dict[str, int] = {}
    for job in jobs:
        n_by_arm[job.arm] = n_by_arm.get(job.arm, 0) + 1
    done = sorted((j for j in jobs if j.status == "done" and j.value is not None), key=lambda j: j.observed_seq)
    return LabHistory(
        tested=frozenset(j.candidate_id for j in jobs),
        pending=tuple(j.candidate_id for j in jobs if j.status == "dispatched"),
        results=tuple((j.candidate_id, j.arm, j.value, objective.utility(j.value)) for j in done),
        n_dispatched=len(jobs),
        n_by_arm=n_by_arm,
    )


def iteration_payloads(ctx: CampaignContext, event_type: str, iteration: int) -> list[EventPayload]:
    """Typed payloads of one type written in one iteration, in seq order."""
    events = ctx.ledger.events(ctx.campaign_id, types=[event_type])
    return [parse_payload(e.type, e.payload) for e in events if e.payload.get("iteration") == iteration]
