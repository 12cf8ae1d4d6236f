"""``JobBook``: the per-driver record of submitted jobs that every adapter shares.

An adapter talks to someone else's lab software (PyLabRobot, a SiLA 2 server, a MADSci node), and that software
knows nothing about closedloop's job keys. The book is what makes ``submit`` idempotent on the key, refuses a key
reused for a different job, and words the errors for unknown, unfinished and cancelled jobs the same way in every
adapter. Times are seconds on the driver's clock (``time.monotonic()`` since the driver was built).

Example:
    >>> from instruments.base import JobHandle, LabJob
    >>> from vocabulary.domain import Conditions
    >>> book = JobBook("demo")
    >>> job = LabJob(job_key="k1", candidate=Conditions(values={"x": 1.0}, id="c1"))
    >>> entry = book.add(job, submitted_s=0.0)
    >>> book.existing(job) is entry
    True
    >>> book.lookup(JobHandle(job_key="k1", driver="demo")).state
    'queued'
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from typing import Any

from instruments.base import TERMINAL_STATES, JobHandle, JobState, LabJob, LabResult
from vocabulary.domain import InstrumentFault, SetupError

__all__ = ["BookEntry", "JobBook", "SerialRunner"]


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


class SerialRunner:
    """Runs a book's queued jobs one at a time, in priority then submission order, in a task on the running loop.

    ``run(entry)`` does one job and closes it through the book (done, failed or cancelled). An exception escaping it
    fails that job with the exception as the reason; the runner goes on with the next. If the loop that ran the
    worker has closed (a caller that used ``asyncio.run`` per call), the next ``wake()`` starts a new worker on the
    current loop, and a job that was running on the old one fails as interrupted: nobody knows how far it got.
    """

    def __init__(self, book: JobBook, run: Any, name: str) -> None:
        self.book, self.run, self.name = book, run, name
        self._task: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wakeup: asyncio.Event | None = None

    def wake(self) -> None:
        """Make sure a worker runs on this loop and let it look at the queue."""
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done() or self._loop is not loop:
            for entry in self.book.entries.values():
                if entry.state == "running":
                    self.book.finish(entry, reason="interrupted: the event loop running the job closed before it "
                                                   "finished; check the instrument and resubmit under a new key")
            self._wakeup, self._loop = asyncio.Event(), loop
            self._task = loop.create_task(self._work(), name=self.name)
        self._wakeup.set()

    async def close(self) -> None:
        """Stop the worker (a running job is interrupted where it awaits)."""
        if self._task is not None and not self._task.done() and self._loop is asyncio.get_running_loop():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._task = None

    def _next(self) -> BookEntry | None:
        queued = [e for e in self.book.entries.values() if e.state == "queued"]
        return min(queued, key=lambda e: (_priority(e.job), e.submitted_s), default=None)

    async def _work(self) -> None:
        while True:
            entry = self._next()
            if entry is None:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            entry.state, entry.started_s = "running", self.book.now()
            try:
                await self.run(entry)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - one job's failure never stops the lab
                self.book.finish(entry, reason=f"{type(exc).__name__}: {exc}")
            if entry.state == "running":
                self.book.finish(entry, reason=f"{self.name}: the job ended without a result")


def _priority(job: LabJob) -> float:
    try:
        return float(job.parameters.get("priority", 0))
    except (TypeError, ValueError):
        return 0.0
