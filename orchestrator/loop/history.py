"""Read-side helpers: what the ledger says has happened, in the shapes nodes need."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from orchestrator.ledger import LabJobRow
from orchestrator.loop.context import CampaignContext
from vocabulary.events import EVENT_TYPES, EventPayload, FailureHandled

__all__ = ["LabHistory", "is_failed_job", "is_open_job", "iteration_payloads", "lab_history", "pending_retries"]


@dataclass(frozen=True)
class LabHistory:
    """Lab jobs so far.

    ``results`` holds (candidate id, arm, value, utility) of successful jobs in the order they were observed, and
    ``iterations`` the iteration each of them was dispatched in and ``dispatched_seqs`` the ledger sequence of its
    dispatch (-1 for an imported past result); ``failures``
    holds (job key, candidate id, arm, reason) of failed ones. ``tested`` are candidates with at least one job;
    ``pending`` candidates have a job in the lab now. ``last_dispatch_iteration`` is the latest iteration that
    dispatched a job (-1 before any), ``lab_time_s`` the lab time used, seconds (``lab_clock.lab_time_s``).
    """

    tested: frozenset[str]
    pending: tuple[str, ...]
    results: tuple[tuple[str, str, float, float], ...]
    failures: tuple[tuple[str, str, str, str], ...]
    n_dispatched: int
    n_by_arm: dict[str, int] = field(default_factory=dict)
    iterations: tuple[int, ...] = ()
    dispatched_seqs: tuple[int, ...] = ()
    last_dispatch_iteration: int = -1
    lab_time_s: float = 0.0

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
    fold = resources.get("lab_job_fold") if resources is not None else None
    if fold is None:
        fold = _LabJobFold()
        if resources is not None:
            resources["lab_job_fold"] = fold
    fold.update(ctx)
    history = fold.history(ctx)
    if resources is not None:
        resources["lab_history"] = (head, history)
    return history


def _is_failed_or_imported(observation) -> bool:
    """The observations ``_lab_history`` reads: failed lab results (for their reasons) and imported past results.
    A long campaign's read cache holds these, not every rung and lab result."""
    return (observation.is_lab and observation.status == "failed") or observation.provenance == "imported"


def is_open_job(job) -> bool:
    """A lab job still in the lab: the ``keep`` filter of the readers that need only these (observe, decide's
    cancel), so their read cache holds the open jobs, not every job of a long campaign."""
    return job.status == "dispatched"


def is_failed_job(job) -> bool:
    """A lab job whose result failed (recover's ``keep`` filter)."""
    return job.status == "failed"


class _LabJobFold:
    """``LabHistory``'s inputs folded from the lab-job rows as they change (``Ledger.changed_rows``), so the
    loop holds a few numbers per finished job instead of every job's row.

    A job's row is written twice at most: when it is dispatched and when its result is observed (its
    ``updated_seq`` is then its ``observed_seq``), so rows read in the order they changed give the results in
    the order they were observed.
    """

    def __init__(self) -> None:
        self.seen_seq = 0
        self.open: dict[str, object] = {}
        self.tested: set[str] = set()
        self.n_dispatched = 0
        self.n_by_arm: dict[str, int] = {}
        self.done: list[tuple[str, str, float, float]] = []
        self.done_iterations: list[int] = []
        self.done_dispatched_seqs: list[int] = []
        self.failed: list[tuple[str, str, str, int]] = []
        self.last_dispatch_iteration = -1
        self.first_submitted_s: float | None = None
        self.last_s: float | None = None

    def update(self, ctx: CampaignContext) -> None:
        utility = ctx.spec.objective.utility
        for job in ctx.ledger.changed_rows(LabJobRow, ctx.campaign_id, self.seen_seq):
            self.seen_seq = max(self.seen_seq, job.updated_seq)
            # interned: one string per candidate and arm however many folds and histories hold it
            candidate_id, arm = sys.intern(job.candidate_id), sys.intern(job.arm)
            is_new = self.open.pop(job.job_key, None) is None
            if is_new:
                self.tested.add(candidate_id)
                self.n_dispatched += 1
                self.n_by_arm[arm] = self.n_by_arm.get(arm, 0) + 1
                self.last_dispatch_iteration = max(self.last_dispatch_iteration, job.iteration)
                self.first_submitted_s = (job.submitted_s if self.first_submitted_s is None
                                          else min(self.first_submitted_s, job.submitted_s))
                self._see_time(job.submitted_s)
            if job.status == "dispatched":
                self.open[job.job_key] = job
                continue
            if job.completed_s is not None:
                self._see_time(job.completed_s)
            if job.status == "done" and job.value is not None:
                # one tuple per result, shared by every LabHistory built from here on
                self.done.append((candidate_id, arm, job.value, utility(job.value)))
                self.done_iterations.append(job.iteration)
                self.done_dispatched_seqs.append(job.dispatched_seq)
            elif job.status == "failed":
                self.failed.append((job.job_key, candidate_id, arm, job.observed_seq))

    def _see_time(self, at_s: float) -> None:
        self.last_s = at_s if self.last_s is None else max(self.last_s, at_s)

    def history(self, ctx: CampaignContext) -> LabHistory:
        objective = ctx.spec.objective
        observations = ctx.ledger.observations(ctx.campaign_id, keep=_is_failed_or_imported)
        reasons = {o.seq: o.reason for o in observations if o.is_lab and o.status == "failed"}
        # Past results imported from a CSV come first: the planner learns from them, the budget does not count them.
        imported = [(o.candidate_id, "imported", o.value, objective.utility(o.value))
                    for o in sorted(observations, key=lambda o: o.seq)
                    if o.provenance == "imported" and o.status == "ok" and o.value is not None]
        pending = sorted(self.open.values(), key=lambda j: j.dispatched_seq)
        return LabHistory(
            tested=frozenset(self.tested) | {r[0] for r in imported},
            pending=tuple(j.candidate_id for j in pending),
            results=tuple(imported) + tuple(self.done),
            failures=tuple((key, c, arm, reasons.get(seq) or "") for key, c, arm, seq in self.failed),
            n_dispatched=self.n_dispatched,
            n_by_arm=dict(self.n_by_arm),
            iterations=tuple(-1 for _ in imported) + tuple(self.done_iterations),
            dispatched_seqs=tuple(-1 for _ in imported) + tuple(self.done_dispatched_seqs),
            last_dispatch_iteration=self.last_dispatch_iteration,
            lab_time_s=0.0 if self.first_submitted_s is None else self.last_s - self.first_submitted_s,
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
    handled = [e.typed() for e in ctx.ledger.events(ctx.campaign_id, types=[FailureHandled.type])]
    dispatched = ctx.ledger.dispatched_keys(ctx.campaign_id, (h.retry_key for h in handled if h.action == "retry"))
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
