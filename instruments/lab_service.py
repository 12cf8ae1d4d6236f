"""The lab behind the HTTP routes: ``LabService`` journals jobs, checks them, keeps a simulated lab's clock running
and collects results, with no HTTP in it; ``instruments.server`` maps its answers and its ``ApiError``s to
responses.

**Journal.** Accepted jobs and their results go to a SQLite ``LabJournal`` (``journal_path``; in memory when None).
On start-up the server serves finished results from it and resubmits accepted-but-unfinished jobs to its fresh driver;
those never completed, so nothing runs twice. Resubmitting a known key returns the existing job.

**Time.** A simulated driver (an ``instruments.SimulatedClock``, checked once when the service is built) would
otherwise stand still behind a server, so a background task advances its clock in step with the wall clock:
``seconds_per_sim_hour`` real seconds per simulated hour (default 0.01, so a 5-hour job takes about 0.05 s; 3600 is
real time). The simpy lab stays an ordinary
``Environment``: ``simpy.rt.RealtimeEnvironment`` would sleep inside ``run`` and block the server's event loop.
The same task polls unfinished jobs of any driver and journals their results.

Example:
    >>> from instruments.simlab import SimLabDriver
    >>> service = LabService(SimLabDriver(oracle=lambda c: 1.0), seconds_per_sim_hour=3600)
    >>> service.is_simulated, service.now_s, service.envelope.name
    (True, 0.0, 'lab')
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from instruments.base import (
    TERMINAL_STATES,
    InstrumentDriver,
    JobHandle,
    JobState,
    LabClock,
    LabJob,
    LabResult,
    SimulatedClock,
)
from instruments.envelope import EnvelopeViolation, SafetyEnvelope
from instruments.journal import LabJournal
from instruments.request_checks import candidate_problem
from vocabulary.domain import InstrumentFault, SetupError

__all__ = ["DEFAULT_SECONDS_PER_SIM_HOUR", "ApiError", "ErrorBody", "ErrorKind", "JobInfo", "LabService"]

log = logging.getLogger(__name__)

#: Real seconds per simulated hour for a simulated lab behind the server.
DEFAULT_SECONDS_PER_SIM_HOUR = 0.01

ErrorKind = Literal[
    "envelope_violation", "key_conflict", "not_found", "not_finished", "setup_error", "instrument_fault",
    "unauthorized", "invalid_job", "invalid_candidate", "payload_too_large", "method_not_allowed", "http_error",
]


class JobInfo(BaseModel):
    """Where a job stands. ``now_s`` is the lab clock (s) when the lab has one."""

    model_config = ConfigDict(frozen=True)

    job_key: str
    driver: str = Field(description="name of the driver behind the server")
    state: JobState
    now_s: float | None = None


class ErrorBody(BaseModel):
    """Why a request was refused: a machine-readable ``error``, a message saying what to fix, and for an
    ``envelope_violation`` every violation."""

    error: ErrorKind
    message: str
    violations: list[str] = Field(default_factory=list)


class ApiError(Exception):
    """Raised inside the service; turned into an ``ErrorBody`` response."""

    def __init__(self, status_code: int, error: ErrorKind, message: str, violations: list[str] | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.body = ErrorBody(error=error, message=message, violations=violations or [])


def _not_found(job_key: str) -> ApiError:
    return ApiError(
        404,
        "not_found",
        f"job {job_key!r} is unknown to this lab server (never submitted here, or submitted to a server without a "
        "journal before it restarted); resubmit it: submit is idempotent on the job key",
    )


class LabService:
    """The server's logic, independent of HTTP: journal, envelope check, clock pump and result collection.

    Args:
        driver: the lab to serve.
        journal_path: SQLite file for the journal; None keeps it in memory (nothing survives a restart).
        seconds_per_sim_hour: real seconds per simulated hour when ``driver`` is simulated.
        tick_s: real seconds between clock advances.
        poll_s: real seconds between status polls of a driver that is not simulated.
    """

    def __init__(
        self,
        driver: InstrumentDriver,
        *,
        journal_path: str | Path | None = None,
        seconds_per_sim_hour: float = DEFAULT_SECONDS_PER_SIM_HOUR,
        tick_s: float = 0.005,
        poll_s: float = 1.0,
    ) -> None:
        if not seconds_per_sim_hour > 0:
            raise SetupError(f"{seconds_per_sim_hour=} must be > 0 real seconds per simulated hour (3600 is real time)")
        self.driver = driver
        self.journal_path = None if journal_path is None else str(journal_path)
        self.seconds_per_sim_hour = float(seconds_per_sim_hour)
        self.tick_s = float(tick_s)
        self.poll_s = float(poll_s)
        #: declared capabilities, read once: a simulated clock to pump, or at least a clock to report
        self.is_simulated = isinstance(driver, SimulatedClock)
        self.has_clock = isinstance(driver, LabClock)
        self.journal: LabJournal | None = None
        self.pump_error: str | None = None
        self.n_resubmitted = 0
        self._unfinished: dict[str, JobHandle] = {}
        self._task: asyncio.Task | None = None

    @property
    def envelope(self) -> SafetyEnvelope:
        return getattr(self.driver, "envelope", None) or SafetyEnvelope()

    @property
    def now_s(self) -> float | None:
        return float(self.driver.now) if self.has_clock else None

    # ------------------------------------------------------------------------------------------- life cycle
    async def start(self) -> None:
        """Open the journal, continue the lab clock, resubmit unfinished jobs and start the pump."""
        self.journal = LabJournal(self.journal_path or ":memory:")
        if self.is_simulated:
            recorded = self.journal.lab_time_s()
            if recorded is not None and recorded > self.driver.now:
                self.driver.run_until(recorded)
        for entry in self.journal.unfinished():
            try:
                handle = await self.driver.submit(entry.job)
            except Exception as exc:  # a job that cannot run any more is reported failed, never dropped
                now = self.now_s or 0.0
                self.journal.complete(
                    LabResult(
                        job_key=entry.job_key, candidate_id=entry.job.candidate.id, status="failed",
                        reason=f"the lab restarted and could not resubmit the job: {exc}",
                        submitted_s=now, completed_s=now,
                    )
                )
                continue
            self.journal.note_resubmitted(entry.job_key, self.now_s)
            self._unfinished[entry.job_key] = handle
            self.n_resubmitted += 1
        self._task = asyncio.create_task(self._pump())

    async def stop(self) -> None:
        """Stop the pump, remember the lab clock and close the journal."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.journal is not None:
            if self.is_simulated:
                self.journal.set_lab_time(self.driver.now)
            self.journal.close()

    async def _pump(self) -> None:
        last_tick = last_poll = last_clock_note = time.monotonic()
        while True:
            await asyncio.sleep(self.tick_s)
            now = time.monotonic()
            try:
                if self.is_simulated:
                    sim_s = (now - last_tick) * 3600.0 / self.seconds_per_sim_hour
                    self.driver.run_until(self.driver.now + sim_s)
                    if now - last_clock_note >= 0.5:
                        self.journal.set_lab_time(self.driver.now)
                        last_clock_note = now
                if self.is_simulated or now - last_poll >= self.poll_s:
                    last_poll = now
                    for job_key, handle in list(self._unfinished.items()):
                        state = await self.driver.status(handle)
                        if state in TERMINAL_STATES:
                            await self._collect(job_key, handle, state)
                self.pump_error = None
            except Exception as exc:  # keep serving; health() reports the problem
                if self.pump_error is None:
                    log.exception("lab server pump failed")
                self.pump_error = f"{type(exc).__name__}: {exc}"
            last_tick = now

    async def _collect(self, job_key: str, handle: JobHandle, state: JobState) -> None:
        if state in ("done", "failed"):
            self.journal.complete(await self.driver.result(handle))
        elif state == "cancelled":
            self.journal.cancel(job_key, self.now_s)
        self._unfinished.pop(job_key, None)

    # ------------------------------------------------------------------------------------------- verbs
    def _handle(self, job_key: str) -> JobHandle:
        return JobHandle(job_key=job_key, driver=self.driver.name)

    def _info(self, job_key: str, state: JobState) -> JobInfo:
        return JobInfo(job_key=job_key, driver=self.driver.name, state=state, now_s=self.now_s)

    async def submit(self, job: LabJob) -> JobInfo:
        problem = candidate_problem(job.candidate)
        if problem is not None:
            raise ApiError(422, "invalid_candidate", f"job {job.job_key!r} was refused: {problem}")
        entry = self.journal.get(job.job_key)
        if entry is not None:
            if entry.job != job:
                raise ApiError(
                    409, "key_conflict",
                    f"job key {job.job_key!r} was already submitted with a different job; use a new key for a new run",
                )
            return await self.status(job.job_key)
        violations = self.envelope.check(job)
        if violations:
            error = EnvelopeViolation.for_job(job.job_key, violations, envelope_name=self.envelope.name)
            raise ApiError(422, "envelope_violation", str(error), list(error.violations))
        try:
            handle = await self.driver.submit(job)
        except EnvelopeViolation as exc:
            raise ApiError(422, "envelope_violation", str(exc), list(exc.violations)) from exc
        except SetupError as exc:
            raise ApiError(400, "setup_error", str(exc)) from exc
        except InstrumentFault as exc:
            raise ApiError(503, "instrument_fault", f"the lab could not take job {job.job_key!r}: {exc}") from exc
        self.journal.accept(job, self.now_s)
        self._unfinished[job.job_key] = handle
        return self._info(job.job_key, await self.driver.status(handle))

    async def status(self, job_key: str) -> JobInfo:
        entry = self.journal.get(job_key)
        if entry is None:
            raise _not_found(job_key)
        if entry.state != "accepted":
            return self._info(job_key, entry.state)
        handle = self._handle(job_key)
        try:
            state = await self.driver.status(handle)
        except InstrumentFault as exc:
            raise ApiError(503, "instrument_fault", f"the lab lost track of job {job_key!r}: {exc}") from exc
        if state in TERMINAL_STATES:
            await self._collect(job_key, handle, state)
        return self._info(job_key, state)

    async def result(self, job_key: str) -> LabResult:
        info = await self.status(job_key)
        if info.state == "cancelled":
            raise ApiError(
                409, "not_finished", f"job {job_key!r} was cancelled and has no result; resubmit under a new key"
            )
        if info.state not in ("done", "failed"):
            clock = f" at t={info.now_s:.0f} s" if info.now_s is not None else ""
            raise ApiError(
                409, "not_finished",
                f"job {job_key!r} is {info.state}{clock} and has no result yet; "
                f"poll GET /jobs/{job_key} until it is 'done' or 'failed'",
            )
        return self.journal.get(job_key).result

    async def cancel(self, job_key: str) -> JobInfo:
        info = await self.status(job_key)
        if info.state in TERMINAL_STATES:
            return info
        try:
            await self.driver.cancel(self._handle(job_key))
        except InstrumentFault as exc:
            raise ApiError(503, "instrument_fault", f"the lab could not cancel job {job_key!r}: {exc}") from exc
        return await self.status(job_key)

    async def health(self) -> dict[str, Any]:
        try:
            health = dict(await self.driver.health())
        except Exception as exc:  # a sick driver is reported, not raised
            health = {"is_ok": False, "driver": self.driver.name, "reason": f"{type(exc).__name__}: {exc}"}
        is_pumping = self._task is not None and not self._task.done()
        health["is_ok"] = bool(health.get("is_ok", True)) and is_pumping and self.pump_error is None
        health["server"] = self._server_info() | {"is_pumping": is_pumping, "pump_error": self.pump_error}
        return health

    async def capabilities(self) -> dict[str, Any]:
        return dict(await self.driver.capabilities()) | {"server": self._server_info()}

    def _server_info(self) -> dict[str, Any]:
        return {
            "journal": self.journal_path,
            "n_journaled": self.journal.count_states() if self.journal is not None else {},
            "n_resubmitted_on_start": self.n_resubmitted,
            "is_simulated": self.is_simulated,
            "seconds_per_sim_hour": self.seconds_per_sim_hour if self.is_simulated else None,
        }
