"""The public driver kit: ``BaseDriver``, the frontend every closedloop driver can stand on, and its ``JobBook``.

A driver has two halves, as a PyLabRobot machine has a frontend over a backend. The **frontend** is the same for
every instrument and lives here: the six verbs of ``InstrumentDriver``, the book of jobs by key (so ``submit`` is
idempotent on ``job_key`` and refuses a key reused for a different job), the envelope check before anything runs,
forward-only states, and errors worded the same way in every driver. The **backend** is what a subclass writes: its
instrument logic, in a few hooks.

Two shapes of instrument, two ways to fill the hooks:

- An instrument that does one job at a time from start to end (a robot arm, a MADSci node): override
  ``run(entry)``. The kit queues jobs and runs them one after another, in priority then submission order, in a
  worker task on the event loop that submitted them. ``run`` ends the job with ``self.finish(entry, ...)``.
- An instrument that runs jobs itself (a SiLA 2 server, a simulator): override ``start(entry)`` to hand it the job
  and ``poll(entry)`` to ask how it is going; both move the job on with ``mark_running``, ``finish`` and
  ``mark_cancelled``.

Either may override ``validate(job)`` (refusals beyond the envelope), ``stop(entry)`` (tell the instrument to stop),
``describe()`` and ``diagnose()`` (what ``capabilities()`` and ``health()`` add to the kit's fields) and ``aclose()``.
Times are seconds on the driver's clock: ``time.monotonic()`` since the driver was built, unless ``clock=`` gives
another (a simulated one).

Example:
    >>> import asyncio
    >>> from instruments.base import LabJob
    >>> from vocabulary.domain import Conditions
    >>> class Doubler(BaseDriver):
    ...     name = "doubler"
    ...     async def run(self, entry):
    ...         self.finish(entry, value=2.0 * entry.job.candidate.values["x"])
    >>> async def one_job():
    ...     lab = Doubler(envelope={"name": "doubler", "parameters": {"x": [0.0, 10.0, "mL"]}})
    ...     job = LabJob(job_key="k1", candidate=Conditions(values={"x": 1.5}, id="c1"))
    ...     handle = await lab.submit(job)
    ...     assert await lab.submit(job) == handle  # the same key: the same handle, nothing runs twice
    ...     while await lab.status(handle) != "done":
    ...         await asyncio.sleep(0)
    ...     await lab.aclose()
    ...     return (await lab.result(handle)).value
    >>> asyncio.run(one_job())
    3.0
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from instruments.base import TERMINAL_STATES, JobHandle, JobState, LabJob, LabResult
from instruments.envelope import SafetyEnvelope
from vocabulary.domain import InstrumentFault, SetupError

__all__ = ["BaseDriver", "BookEntry", "JobBook", "SerialRunner"]


@dataclass
class BookEntry:
    """One submitted job: the job, its state, its result once finished, and the instrument's own handle for it.

    ``remote`` is the backend's to keep (a command instance, an action id, a simulation process). Times are
    seconds on the driver's clock.
    """

    job: LabJob
    state: JobState
    submitted_s: float
    started_s: float | None = None
    result: LabResult | None = None
    remote: Any = None
    is_cancel_requested: bool = False


class JobBook:
    """Jobs by key for one driver; the driver owns the transitions, the book owns the bookkeeping and the messages.

    Args:
        driver_name: the name every handle carries.
        clock: the lab clock, seconds; default ``time.monotonic()`` since the book was made.

    Example:
        >>> from vocabulary.domain import Conditions
        >>> book = JobBook("demo")
        >>> job = LabJob(job_key="k1", candidate=Conditions(values={"x": 1.0}, id="c1"))
        >>> entry = book.add(job, submitted_s=0.0)
        >>> book.existing(job) is entry
        True
        >>> book.lookup(JobHandle(job_key="k1", driver="demo")).state
        'queued'
    """

    def __init__(self, driver_name: str, clock: Callable[[], float] | None = None) -> None:
        self.driver_name = driver_name
        self.entries: dict[str, BookEntry] = {}
        self._t0 = time.monotonic()
        self._clock = clock

    def now(self) -> float:
        """The driver's lab clock, seconds."""
        return float(self._clock()) if self._clock is not None else time.monotonic() - self._t0

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
                f"job {handle.job_key!r} is {entry.state} at t={self.now():.0f} s and has no result yet; poll "
                "status() until it is 'done' (or advance a simulated lab's clock)"
            )
        return entry.result

    def finish(
        self, entry: BookEntry, *, value: float | None = None, uncertainty: float | None = None,
        reason: str | None = None, station_log: list[tuple[str, float, float]] | None = None,
    ) -> LabResult | None:
        """Close ``entry`` as done (a finite ``value``) or failed (a ``reason``) and return its result.

        An entry already finished keeps its result, and a cancelled one stays cancelled (None is returned).
        """
        if entry.state in TERMINAL_STATES:
            return entry.result
        completed_s = max(self.now(), entry.submitted_s)
        common = dict(job_key=entry.job.job_key, candidate_id=entry.job.candidate.id, submitted_s=entry.submitted_s,
                      completed_s=completed_s, station_log=station_log or [])
        if reason is None:
            result = LabResult(value=value, uncertainty=uncertainty, **common)
        else:
            result = LabResult(status="failed", reason=reason, **common)
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

    def __init__(self, book: JobBook, run: Callable[[BookEntry], Awaitable[None]], name: str) -> None:
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


class BaseDriver:
    """The frontend of an ``InstrumentDriver``: subclass it, set ``name``, ``version`` and ``envelope``, and write
    the instrument's logic in the hooks (``run``, or ``start`` and ``poll``; see the module docstring).

    Args:
        envelope: the lab's ``SafetyEnvelope`` (or its dict); or set ``self.envelope`` yourself (a property that
            asks the instrument is fine, with ``fetch_envelope`` for the async read).
        clock: the lab clock in seconds; default ``time.monotonic()`` since the driver was built. A simulated
            instrument passes its simulation clock (and implements ``instruments.SimulatedClock`` itself).

    Attributes:
        book: the ``JobBook`` of this driver's jobs by key.
    """

    name: ClassVar[str] = ""
    version: ClassVar[str] = "0.1.0"
    envelope: SafetyEnvelope

    def __init__(
        self, *, envelope: SafetyEnvelope | dict[str, Any] | None = None, clock: Callable[[], float] | None = None,
    ) -> None:
        cls = type(self)
        if not isinstance(cls.name, str) or not cls.name:
            raise SetupError(f"{cls.__name__} needs a class attribute name = '...', the name its handles carry")
        if cls.run is BaseDriver.run and cls.start is BaseDriver.start:
            raise SetupError(f"{cls.__name__} implements no instrument logic; override run(entry) for one job at a "
                             "time, or start(entry) and poll(entry) for an instrument that runs jobs itself")
        if envelope is not None:
            self.envelope = (envelope if isinstance(envelope, SafetyEnvelope)
                             else SafetyEnvelope.model_validate(envelope))
        self.book = JobBook(cls.name, clock)
        self._runner = SerialRunner(self.book, self.run, f"{cls.name} worker")

    # ------------------------------------------------------------------------------------------- the verbs
    async def capabilities(self) -> dict[str, Any]:
        """The driver's name and version, and what ``describe()`` adds."""
        return {"driver": self.name, "version": self.version, **await self.describe()}

    async def submit(self, job: LabJob) -> JobHandle:
        """Queue ``job``; the same key returns the same handle and runs once.

        Raises:
            EnvelopeViolation: the job is outside the envelope; nothing reaches the instrument.
            SetupError: the key was used for a different job, or ``validate`` refused the job.
        """
        if self.book.existing(job) is not None:
            return self.book.handle(job.job_key)
        (await self.fetch_envelope()).require(job)
        await self.validate(job)
        entry = self.book.add(job)
        try:
            await self.start(entry)
        except BaseException:
            self.book.entries.pop(job.job_key, None)  # the instrument never took it: a retry submits it afresh
            raise
        return self.book.handle(job.job_key)

    async def status(self, handle: JobHandle) -> JobState:
        """``queued -> running -> done | failed``, or ``cancelled``; ``InstrumentFault`` for an unknown job."""
        entry = self.book.lookup(handle)
        if entry.state not in TERMINAL_STATES:
            await self.poll(entry)
        return entry.state

    async def result(self, handle: JobHandle) -> LabResult:
        """The result of a done or failed job; ``InstrumentFault`` for an unfinished, cancelled or unknown one."""
        entry = self.book.lookup(handle)
        if entry.state not in TERMINAL_STATES:
            await self.poll(entry)
        return self.book.finished_result(handle)

    async def cancel(self, handle: JobHandle) -> None:
        """Stop a queued or running job (``stop`` tells the instrument); a finished job keeps its result."""
        entry = self.book.lookup(handle)
        if entry.state in TERMINAL_STATES:
            return
        await self.stop(entry)
        entry.is_cancel_requested = True
        self.mark_cancelled(entry)

    async def health(self) -> dict[str, Any]:
        """``is_ok``, the driver's name and its jobs by state, updated with what ``diagnose()`` reports."""
        return {"is_ok": True, "driver": self.name, "n_jobs": self.book.count_states(), **await self.diagnose()}

    async def fetch_envelope(self) -> SafetyEnvelope:
        """The envelope ``submit`` checks; override to read it from the instrument without blocking the loop."""
        try:
            return self.envelope
        except AttributeError as exc:
            raise SetupError(f"{type(self).__name__} declares no SafetyEnvelope; pass envelope= to "
                             "BaseDriver.__init__ or set self.envelope (what the instrument accepts)") from exc

    async def aclose(self) -> None:
        """Stop the worker task; override to close connections too (and await ``super().aclose()``)."""
        await self._runner.close()

    # ------------------------------------------------------------------------------------------- the hooks
    async def validate(self, job: LabJob) -> None:
        """Refuse a job the instrument cannot run (raise ``SetupError`` or ``EnvelopeViolation``); the envelope was
        checked already. Default: accept."""

    async def start(self, entry: BookEntry) -> None:
        """Hand a new job to the instrument. Default: queue it for ``run`` (one job at a time, in a worker task)."""
        self._runner.wake()

    async def run(self, entry: BookEntry) -> None:
        """Do one job from start to end and close it with ``self.finish(entry, ...)``; an exception fails the job
        with the exception as the reason. Check ``entry.is_cancel_requested`` between steps."""
        raise NotImplementedError(f"{type(self).__name__} overrides start(); run() is not used")

    async def poll(self, entry: BookEntry) -> None:
        """Ask the instrument how an unfinished job is going and move it on (``mark_running``, ``finish``).
        Default: nothing to ask (``run`` or a simulation moves the job itself)."""

    async def stop(self, entry: BookEntry) -> None:
        """Tell the instrument to stop a queued or running job (raise ``InstrumentFault`` when it cannot); the kit
        marks the job cancelled after. Default: nothing to tell (``run`` sees ``entry.is_cancel_requested``)."""

    async def describe(self) -> dict[str, Any]:
        """JSON fields ``capabilities()`` adds: stations, the measured ``property``, ``max_parallel_jobs``."""
        return {}

    async def diagnose(self) -> dict[str, Any]:
        """JSON fields ``health()`` adds; return ``is_ok=False`` with a ``reason`` when the lab must not take work."""
        return {}

    # ------------------------------------------------------------------------------------------- for the hooks
    def mark_running(self, entry: BookEntry) -> None:
        """The job has started on the instrument (a job that is already further along is left as it is)."""
        if entry.state == "queued":
            entry.state, entry.started_s = "running", self.book.now()

    def finish(
        self, entry: BookEntry, *, value: float | None = None, uncertainty: float | None = None,
        reason: str | None = None, station_log: list[tuple[str, float, float]] | None = None,
    ) -> LabResult | None:
        """Close the job as done (a finite ``value``, its ``uncertainty``) or failed (a ``reason`` a person can act
        on, starting with its kind: ``bad reading: ...``); see ``JobBook.finish``."""
        return self.book.finish(entry, value=value, uncertainty=uncertainty, reason=reason, station_log=station_log)

    def mark_cancelled(self, entry: BookEntry) -> None:
        """The job was stopped and has no result (a finished job keeps its result)."""
        if entry.state not in TERMINAL_STATES:
            entry.state = "cancelled"

    def unfinished(self, handles: Iterable[JobHandle]) -> list[BookEntry]:
        """The entries of ``handles`` that are not terminal yet (``InstrumentFault`` for an unknown one); what a
        simulated clock's ``run_until_complete`` waits for."""
        entries = [self.book.lookup(handle) for handle in handles]
        return [entry for entry in entries if entry.state not in TERMINAL_STATES]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n_jobs={len(self.book.entries)})"


def _priority(job: LabJob) -> float:
    try:
        return float(job.parameters.get("priority", 0))
    except (TypeError, ValueError):
        return 0.0
