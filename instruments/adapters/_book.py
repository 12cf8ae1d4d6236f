"""``JobBook``: the per-driver record of submitted jobs that every adapter shares.

An adapter talks to someone else's lab software (PyLabRobot, a SiLA 2 server, a MADSci node), and that software
knows nothing about closedloop's job keys. The book is what makes ``submit`` idempotent on the key, refuses a key
reused for a different job, and words the errors for unknown, unfinished and cancelled jobs the same way in every
adapter. Times are seconds on the driver's clock (``time.monotonic()`` since the driver was built).

Example:
    >>> from instruments.base import JobHandle, LabJob
    >>> from orchestrator.domain import Conditions
    >>> book = JobBook("demo")
    >>> job = LabJob(job_key="k1", candidate=Conditions(values={"x": 1.0}, id="c1"))
    >>> entry = book.add(job, submitted_s=0.0)
    >>> book.existing(job) is entry
    True
    >>> book.lookup(JobHandle(job_key="k1", driver="demo")).state
    'queued'
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from instruments.base import TERMINAL_STATES, JobHandle, JobState, LabJob, LabResult
from orchestrator.domain import InstrumentFault, SetupError

__all__ = ["BookEntry", "JobBook"]


@dataclass
class BookEntry:
    """One submitted job: the job, its state, its result once finished, and the remote side's handle for it."""

    job: LabJob
    state: JobState
    submitted_s: float
    started_s: float | None = None
    result: LabResult | None = None
    remote: Any = None
    is_cancel_requested: bool = False


class JobBook:
    """Jobs by key for one driver; the driver owns the transitions, the book owns the bookkeeping and the messages."""

    def __init__(self, driver_name: str) -> None:
        self.driver_name = driver_name
        self.entries: dict[str, BookEntry] = {}
        self._t0 = time.monotonic()

    def now(self) -> float:
        """Seconds since the book was made: the driver's lab clock."""
        return time.monotonic() - self._t0

    def handle(self, job_key: str) -> JobHandle:
        return JobHandle(job_key=job_key, driver=self.driver_name)

    def existing(self, job: LabJob) -> BookEntry | None:
        """The entry already holding ``job``'s key, None for a new key; ``SetupError`` for a different job."""
        entry = self.entries.get(job.job_key)
        if entry is not None and entry.job != job:
            raise SetupError(
                f"job key {job.job_key!r} was already submitted with a different job; "
                "use a new key for a new run (keys are idempotency keys)"
            )
        return entry

    def add(self, job: LabJob, submitted_s: float | None = None, remote: Any = None) -> BookEntry:
        entry = BookEntry(job=job, state="queued", submitted_s=self.now() if submitted_s is None else submitted_s,
                          remote=remote)
        self.entries[job.job_key] = entry
        return entry

    def lookup(self, handle: JobHandle) -> BookEntry:
        """The entry for ``handle``; ``InstrumentFault`` for another driver's handle or an unknown key."""
        if handle.driver != self.driver_name:
            raise InstrumentFault(
                f"handle for job {handle.job_key!r} belongs to driver {handle.driver!r}, not {self.driver_name!r}"
            )
        entry = self.entries.get(handle.job_key)
        if entry is None:
            raise InstrumentFault(
                f"job {handle.job_key!r} is unknown to this {self.driver_name} lab (submitted before a restart?); "
                "resubmit it: submit is idempotent on the job key"
            )
        return entry

    def finished_result(self, handle: JobHandle) -> LabResult:
        """The result of a done or failed job; ``InstrumentFault`` for an unfinished or cancelled one."""
        entry = self.lookup(handle)
        if entry.state == "cancelled":
            raise InstrumentFault(f"job {handle.job_key!r} was cancelled and has no result; resubmit under a new key")
        if entry.result is None:
            raise InstrumentFault(
                f"job {handle.job_key!r} is {entry.state} and has no result yet; poll status() until it is 'done'"
            )
        return entry.result

    def finish(
        self, entry: BookEntry, *, value: float | None = None, uncertainty: float | None = None,
        reason: str | None = None, station_log: list[tuple[str, float, float]] | None = None,
    ) -> LabResult:
        """Close ``entry`` as done (a finite ``value``) or failed (a ``reason``); a finished entry is left as it is."""
        if entry.state in TERMINAL_STATES and entry.result is not None:
            return entry.result
        completed_s = max(self.now(), entry.submitted_s)
        if reason is None:
            result = LabResult(job_key=entry.job.job_key, candidate_id=entry.job.candidate.id, value=value,
                               uncertainty=uncertainty, submitted_s=entry.submitted_s, completed_s=completed_s,
                               station_log=station_log or [])
        else:
            result = LabResult(job_key=entry.job.job_key, candidate_id=entry.job.candidate.id, status="failed",
                               reason=reason, submitted_s=entry.submitted_s, completed_s=completed_s,
                               station_log=station_log or [])
        entry.result = result
        entry.state = "done" if reason is None else "failed"
        return result

    def count_states(self) -> dict[str, int]:
        counts = dict.fromkeys(("queued", "running", "done", "failed", "cancelled"), 0)
        for entry in self.entries.values():
            counts[entry.state] += 1
        return counts
