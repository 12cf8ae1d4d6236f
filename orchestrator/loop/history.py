"""Read-side helpers: what the ledger says has happened, in the shapes nodes need."""

from __future__ import annotations

from dataclasses import dataclass, field

from orchestrator.loop.context import CampaignContext
from vocabulary.events import EVENT_TYPES, EventPayload, FailureHandled

__all__ = ["LabHistory", "iteration_payloads", "lab_history", "pending_retries"]


@dataclass(frozen=True)
class LabHistory:
    """Lab jobs so far.

    ``results`` holds (candidate id, arm, value, utility) of successful jobs in the order they were observed, and
    ``iterations`` the iteration each of them was dispatched in and ``dispatched_seqs`` the ledger sequence of its
    dispatch (-1 for an imported past result); ``failures``
    holds (job key, candidate id, arm, reason) of failed ones. ``tested`` are candidates with at least one job;
    ``pending`` candidates have a job in the lab now.
    """

    tested: frozenset[str]
    pending: tuple[str, ...]
    results: tuple[tuple[str, str, float, float], ...]
    failures: tuple[tuple[str, str, str, str], ...]
    n_dispatched: int
    n_by_arm: dict[str, int] = field(default_factory=dict)
    iterations: tuple[int, ...] = ()
    dispatched_seqs: tuple[int, ...] = ()

    @property
    def best(self) -> tuple[str, str, float, float] | None:
        """The result with the highest utility (earliest wins ties)."""
        return max(self.results, key=lambda r: r[3], default=None)

    @property
    def n_finished(self) -> int:
        return len(self.results) + len(self.failures)


def lab_history(ctx: CampaignContext) -> LabHistory:
    """The lab so far (``LabHistory``), rebuilt only when the campaign has new events since the last call."""
    head = ctx.ledger.head_seq(ctx.campaign_id)
    resources = getattr(ctx, "resources", None)
    cached = resources.get("lab_history") if resources is not None else None
    if cached is not None and cached[0] == head:
        return cached[1]
    history = _lab_history(ctx)
    if resources is not None:
        resources["lab_history"] = (head, history)
    return history


def _is_failed_or_imported(observation) -> bool:
    """The observations ``_lab_history`` reads: failed lab results (for their reasons) and imported past results.
    A long campaign's read cache holds these, not every rung and lab result."""
    return (observation.is_lab and observation.status == "failed") or observation.provenance == "imported"


def _lab_history(ctx: CampaignContext) -> LabHistory:
    jobs = sorted(ctx.ledger.lab_jobs(ctx.campaign_id), key=lambda j: j.dispatched_seq)
    objective = ctx.spec.objective
    n_by_arm: dict[str, int] = {}
    for job in jobs:
        n_by_arm[job.arm] = n_by_arm.get(job.arm, 0) + 1
    done = sorted((j for j in jobs if j.status == "done" and j.value is not None), key=lambda j: j.observed_seq)
    failed = sorted((j for j in jobs if j.status == "failed"), key=lambda j: j.observed_seq)
    observations = ctx.ledger.observations(ctx.campaign_id, keep=_is_failed_or_imported)
    reasons = {o.seq: o.reason for o in observations if o.is_lab and o.status == "failed"}
    # Past results imported from a CSV come first: the planner learns from them, the budget does not count them.
    imported = [(o.candidate_id, "imported", o.value, objective.utility(o.value))
                for o in sorted(observations, key=lambda o: o.seq)
                if o.provenance == "imported" and o.status == "ok" and o.value is not None]
    return LabHistory(
        tested=frozenset(j.candidate_id for j in jobs) | {r[0] for r in imported},
        pending=tuple(j.candidate_id for j in jobs if j.status == "dispatched"),
        results=tuple(imported) + tuple((j.candidate_id, j.arm, j.value, objective.utility(j.value)) for j in done),
        failures=tuple((j.job_key, j.candidate_id, j.arm, reasons.get(j.observed_seq) or "") for j in failed),
        n_dispatched=len(jobs),
        n_by_arm=n_by_arm,
        iterations=tuple(-1 for _ in imported) + tuple(j.iteration for j in done),
        dispatched_seqs=tuple(-1 for _ in imported) + tuple(j.dispatched_seq for j in done),
    )


def pending_retries(ctx: CampaignContext) -> list[FailureHandled]:
    """Retries decided but not yet dispatched, oldest first (worked out again only when the campaign has new events
    since the last call)."""
    head = ctx.ledger.head_seq(ctx.campaign_id)
    resources = getattr(ctx, "resources", None)
    cached = resources.get("pending_retries") if resources is not None else None
    if cached is not None and cached[0] == head:
        return list(cached[1])
    retries = _pending_retries(ctx)
    if resources is not None:
        resources["pending_retries"] = (head, tuple(retries))
    return retries


def _pending_retries(ctx: CampaignContext) -> list[FailureHandled]:
    dispatched = {j.job_key for j in ctx.ledger.lab_jobs(ctx.campaign_id)}
    handled = [e.typed() for e in ctx.ledger.events(ctx.campaign_id, types=[FailureHandled.type])]
    withdrawn = {h.job_key for h in handled if h.action != "retry"}
    withdrawn |= {e.payload["raw"] for e in ctx.ledger.events(ctx.campaign_id, types=["Rejected"])
                  if e.payload["stage"] == "dispatch"}
    return [h for h in handled if h.action == "retry" and h.retry_key not in dispatched | withdrawn]


def iteration_payloads(ctx: CampaignContext, event_type: str, iteration: int) -> list[EventPayload]:
    """Typed payloads of one type written in one iteration, in seq order.

    Built without validating again: every payload was validated when it was appended, and payloads carry no
    validators that change what they hold. Treat them as read-only.
    """
    cls = EVENT_TYPES[event_type]
    return [cls.model_construct(**e.payload) for e in ctx.ledger.iteration_events(ctx.campaign_id, event_type, iteration)]
