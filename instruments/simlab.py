"""``SimLabDriver``: a simpy digital twin of a robotic lab.

Each job walks its steps through stations (simpy ``Resource``s with capacities), queueing when they are busy; a
transfer robot (capacity 1) moves samples between consecutive stations. The last step ends with a measurement:
the oracle's true value plus Gaussian noise. Time is simulated seconds and only moves when the caller advances it
(``run_until_complete``, ``run_until_any_complete``, ``run_until``), so a month-long campaign runs in seconds.

Determinism: every random draw of a job (station durations, measurement noise) comes from a generator seeded by
``(seed, job_key, stream)`` through SHA-256, never from submission order. A resumed campaign that resubmits a job
to a fresh twin gets the same durations and the same measured value.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import simpy
from pydantic import BaseModel, ConfigDict

from instruments.base import TERMINAL_STATES, JobHandle, JobState, LabJob, LabResult
from orchestrator.domain import ClosedLoopError, InstrumentFault, SetupError

__all__ = ["DEFAULT_DURATIONS_S", "DEFAULT_STATIONS", "LabMetrics", "SimLabDriver", "TRANSFER_ROBOT"]

#: Station capacities (parallel slots) of the default lab.
DEFAULT_STATIONS: dict[str, int] = {"synthesis": 2, "workup": 1, "characterisation": 1}
#: Per station: (median duration in s, sd of log duration) of a lognormal.
DEFAULT_DURATIONS_S: dict[str, tuple[float, float]] = {
    "synthesis": (4 * 3600.0, 0.3),
    "workup": (3600.0, 0.25),
    "characterisation": (1800.0, 0.2),
}
#: Resource name of the transfer robot in metrics.
TRANSFER_ROBOT = "transfer_robot"


def job_rng(seed: int, job_key: str, stream: str) -> np.random.Generator:
    """Random generator for one job and one purpose, independent of every other job and of submission order."""
    digest = hashlib.sha256(f"{seed}:{job_key}:{stream}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "big"))


class LabMetrics(BaseModel):
    """Load figures of a simulated lab since its start time.

    ``utilisation`` is busy time / (capacity x elapsed) per resource, in [0, 1]. Queue waits (s) are means over
    granted requests. ``gantt`` rows are ``(job_key, resource, start_s, end_s)`` sorted by start; an interval still
    open ends at ``now``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    elapsed_s: float
    utilisation: dict[str, float]
    mean_queue_wait_s: float
    queue_wait_s: dict[str, float]
    n_jobs: dict[str, int]
    gantt: list[tuple[str, str, float, float]]


@dataclass
class _JobRecord:
    job: LabJob
    submitted_s: float
    state: JobState = "queued"
    has_started: bool = False
    process: simpy.Process | None = None
    station_log: list[tuple[str, float, float]] = field(default_factory=list)
    open_interval: tuple[str, float] | None = None
    result: LabResult | None = None


class SimLabDriver:
    """Simulated robotic lab implementing ``InstrumentDriver``.

    Args:
        oracle: ground truth ``oracle(candidate) -> float``; an exception makes the job fail with its message.
        noise_sd: sd of Gaussian measurement noise, in the objective's unit; reported as ``uncertainty``.
        seed: seed mixed with each job key for durations and noise.
        stations: station name -> capacity; replaces the defaults (synthesis 2, workup 1, characterisation 1).
        durations_s: station -> (median s, log sd) of a lognormal duration; merged over the defaults.
        transfer_s: transfer robot time between consecutive stations, s (0 disables the robot).
        start_time_s: lab clock at start, s; a resumed campaign passes the time its ledger reached.

    Example:
        >>> import asyncio
        >>> from orchestrator.domain import Conditions
        >>> from instruments.oracle import FunctionOracle
        >>> lab = SimLabDriver(oracle=FunctionOracle(lambda c: 2.0 * c.values["T"]), seed=1)
        >>> handle = asyncio.run(lab.submit(LabJob(job_key="run-1", candidate=Conditions(values={"T": 25.0}, id="c1"))))
        >>> asyncio.run(lab.status(handle))
        'queued'
        >>> lab.run_until_complete([handle]) > 5 * 3600  # simulated seconds, no real waiting
        True
        >>> result = asyncio.run(lab.result(handle))
        >>> result.status, result.value, [row[0] for row in result.station_log]
        ('ok', 50.0, ['synthesis', 'workup', 'characterisation'])
    """

    name = "simlab"
    version = "0.1.0"

    def __init__(
        self,
        *,
        oracle: Callable[[Any], float],
        noise_sd: float = 0.0,
        seed: int = 0,
        stations: Mapping[str, int] | None = None,
        durations_s: Mapping[str, tuple[float, float]] | None = None,
        transfer_s: float = 120.0,
        start_time_s: float = 0.0,
    ) -> None:
        if not callable(oracle):
            raise SetupError(f"SimLabDriver needs a callable oracle(candidate) -> float, got {oracle!r}")
        if not (noise_sd >= 0.0 and math.isfinite(noise_sd)):
            raise SetupError(f"{noise_sd=} must be a finite number >= 0 (objective units)")
        if not (transfer_s >= 0.0 and math.isfinite(transfer_s)):
            raise SetupError(f"{transfer_s=} must be a finite number of seconds >= 0")
        self.oracle = oracle
        self.noise_sd = float(noise_sd)
        self.seed = int(seed)
        self.transfer_s = float(transfer_s)
        self.start_time_s = float(start_time_s)
        self.stations = dict(DEFAULT_STATIONS if stations is None else stations)
        self.durations_s = {**DEFAULT_DURATIONS_S, **(durations_s or {})}
        self._check_stations()
        self.env = simpy.Environment(initial_time=self.start_time_s)
        self._resources = {name: simpy.Resource(self.env, capacity) for name, capacity in self.stations.items()}
        self._resources[TRANSFER_ROBOT] = simpy.Resource(self.env, 1)
        self._jobs: dict[str, _JobRecord] = {}
        self._intervals: list[tuple[str, str, float, float]] = []
        self._waits: list[tuple[str, float]] = []

    def _check_stations(self) -> None:
        if not self.stations:
            raise SetupError("stations is empty; give at least one, e.g. stations={'synthesis': 1}")
        for name, capacity in self.stations.items():
            if name == TRANSFER_ROBOT:
                raise SetupError(f"station name {TRANSFER_ROBOT!r} is reserved for the transfer robot; rename it")
            if not isinstance(capacity, int) or capacity < 1:
                raise SetupError(f"station {name!r} has capacity {capacity!r}; give a whole number >= 1")
            if name not in self.durations_s:
                raise SetupError(f"station {name!r} has no duration; pass durations_s={{{name!r}: (median_s, log_sd)}}")
            median_s, log_sd = self.durations_s[name]
            if not (median_s > 0 and log_sd >= 0 and math.isfinite(median_s) and math.isfinite(log_sd)):
                raise SetupError(
                    f"station {name!r} duration ({median_s!r}, {log_sd!r}) needs median_s > 0 and log_sd >= 0"
                )

    # ------------------------------------------------------------------------------------------- protocol
    async def capabilities(self) -> dict[str, Any]:
        """Stations, default steps, duration model and measured property."""
        return {
            "driver": self.name,
            "version": self.version,
            "is_simulated": True,
            "property": getattr(self.oracle, "property", "value"),
            "stations": dict(self.stations),
            "default_steps": list(LabJob.model_fields["steps"].default),
            "durations_s": {name: list(self.durations_s[name]) for name in self.stations},
            "transfer_s": self.transfer_s,
            "noise_sd": self.noise_sd,
            "supports_cancel": True,
        }

    async def submit(self, job: LabJob) -> JobHandle:
        """Queue ``job`` at the current lab time; resubmitting its key returns the same handle and runs nothing.

        Raises:
            SetupError: a step names no station, or the key was already used for a different job.
        """
        existing = self._jobs.get(job.job_key)
        if existing is not None:
            if existing.job != job:
                raise SetupError(
                    f"job key {job.job_key!r} was already submitted with a different job; "
                    "use a new key for a new run (keys are idempotency keys)"
                )
            return self._handle(job.job_key)
        unknown = [step for step in job.steps if step not in self.stations]
        if unknown:
            raise SetupError(
                f"job {job.job_key!r} has steps {unknown} that are not stations of this lab {list(self.stations)}"
            )
        record = _JobRecord(job=job, submitted_s=self.env.now)
        self._jobs[job.job_key] = record
        record.process = self.env.process(self._run(record))
        return self._handle(job.job_key)

    async def status(self, handle: JobHandle) -> JobState:
        """``queued`` until the first station is granted, ``running`` until measured, then terminal."""
        return self._lookup(handle).state

    async def result(self, handle: JobHandle) -> LabResult:
        """The ``LabResult`` of a ``done`` or ``failed`` job.

        Raises:
            InstrumentFault: the job is unknown, unfinished or cancelled.
        """
        record = self._lookup(handle)
        if record.state == "cancelled":
            raise InstrumentFault(f"job {handle.job_key!r} was cancelled and has no result; resubmit under a new key")
        if record.result is None:
            raise InstrumentFault(
                f"job {handle.job_key!r} is {record.state} at t={self.env.now:.0f} s and has no result yet; "
                "advance the lab with run_until_complete([handle]) or poll status() until it is 'done'"
            )
        return record.result

    async def cancel(self, handle: JobHandle) -> None:
        """Cancel a queued or running job (freeing its station); a finished job is left as it is."""
        record = self._lookup(handle)
        if record.state in TERMINAL_STATES:
            return
        if record.has_started:
            record.process.interrupt("cancelled")
        record.state = "cancelled"

    async def health(self) -> dict[str, Any]:
        """Clock, job counts by state, and busy/waiting slots per station."""
        return {
            "is_ok": True,
            "driver": self.name,
            "version": self.version,
            "now_s": self.env.now,
            "n_jobs": self._count_states(),
            "stations": {
                name: {"capacity": res.capacity, "n_busy": res.count, "n_waiting": len(res.queue)}
                for name, res in self._resources.items()
            },
        }

    # ------------------------------------------------------------------------------------------- clock
    @property
    def now(self) -> float:
        """Lab clock, simulated seconds."""
        return float(self.env.now)

    def run_until_complete(self, handles: Iterable[JobHandle]) -> float:
        """Advance simulated time until every given job is terminal; return the clock (s)."""
        pending = self._pending_processes(handles)
        if pending:
            self._run_env(self.env.all_of(pending))
        return self.now

    def run_until_any_complete(self, handles: Iterable[JobHandle]) -> float:
        """Advance simulated time until one of the given unfinished jobs is terminal; return the clock (s)."""
        pending = self._pending_processes(handles)
        if pending:
            self._run_env(self.env.any_of(pending))
        return self.now

    def run_until(self, time_s: float) -> float:
        """Advance simulated time to ``time_s`` (no-op if already past it); return the clock (s)."""
        if time_s > self.env.now:
            self.env.run(until=time_s)
        return self.now

    def metrics(self) -> LabMetrics:
        """Utilisation, queue waits and Gantt rows since ``start_time_s``.

        Example:
            >>> lab = SimLabDriver(oracle=lambda c: 1.0)
            >>> lab.metrics().utilisation["synthesis"]
            0.0
        """
        now = self.env.now
        elapsed = now - self.start_time_s
        rows = list(self._intervals) + [
            (key, rec.open_interval[0], rec.open_interval[1], now)
            for key, rec in self._jobs.items()
            if rec.open_interval is not None
        ]
        rows.sort(key=lambda row: (row[2], row[3], row[0], row[1]))
        busy = dict.fromkeys(self._resources, 0.0)
        for _, resource, start, end in rows:
            busy[resource] += end - start
        utilisation = {
            name: (busy[name] / (res.capacity * elapsed) if elapsed > 0 else 0.0)
            for name, res in self._resources.items()
        }
        waits: dict[str, list[float]] = {name: [] for name in self._resources}
        for resource, wait in self._waits:
            waits[resource].append(wait)
        station_waits = [wait for resource, wait in self._waits if resource != TRANSFER_ROBOT]
        return LabMetrics(
            elapsed_s=elapsed,
            utilisation=utilisation,
            mean_queue_wait_s=float(np.mean(station_waits)) if station_waits else 0.0,
            queue_wait_s={name: float(np.mean(w)) if w else 0.0 for name, w in waits.items()},
            n_jobs=self._count_states(),
            gantt=rows,
        )

    # ------------------------------------------------------------------------------------------- simulation
    def _run(self, record: _JobRecord) -> Generator[simpy.Event, Any, None]:
        if record.state == "cancelled":  # cancelled before the process got its first step
            return
        record.has_started = True
        key = record.job.job_key
        try:
            for index, step in enumerate(record.job.steps):
                if index > 0 and self.transfer_s > 0:
                    yield from self._occupy(record, TRANSFER_ROBOT, self.transfer_s)
                median_s, log_sd = self.durations_s[step]
                z = job_rng(self.seed, key, f"duration:{index}:{step}").standard_normal()
                duration_s = median_s * math.exp(log_sd * z)
                yield from self._occupy(record, step, duration_s)
        except simpy.Interrupt:
            record.state = "cancelled"
            return
        record.result = self._measure(record)
        record.state = "done" if record.result.status == "ok" else "failed"

    def _occupy(self, record: _JobRecord, resource: str, duration_s: float) -> Generator[simpy.Event, Any, None]:
        requested_s = self.env.now
        with self._resources[resource].request() as request:
            yield request
            start_s = self.env.now
            self._waits.append((resource, start_s - requested_s))
            if resource != TRANSFER_ROBOT:
                record.state = "running"
            record.open_interval = (resource, start_s)
            try:
                yield self.env.timeout(duration_s)
            except simpy.Interrupt:
                self._close_interval(record, resource, start_s, is_station=resource != TRANSFER_ROBOT)
                raise
            self._close_interval(record, resource, start_s, is_station=resource != TRANSFER_ROBOT)

    def _close_interval(self, record: _JobRecord, resource: str, start_s: float, is_station: bool) -> None:
        record.open_interval = None
        self._intervals.append((record.job.job_key, resource, start_s, self.env.now))
        if is_station:
            record.station_log.append((resource, start_s, self.env.now))

    def _measure(self, record: _JobRecord) -> LabResult:
        job = record.job
        common = dict(
            job_key=job.job_key,
            candidate_id=job.candidate.id,
            submitted_s=record.submitted_s,
            completed_s=self.env.now,
            station_log=list(record.station_log),
        )
        try:
            truth = float(self.oracle(job.candidate))
        except ClosedLoopError as exc:
            return LabResult(status="failed", reason=str(exc) or type(exc).__name__, **common)
        except KeyError as exc:
            reason = f"the oracle has no value for candidate id {job.candidate.id!r} (KeyError: {exc})"
            return LabResult(status="failed", reason=reason, **common)
        except Exception as exc:  # a lab reports a broken measurement as a failed job, never drops it
            return LabResult(status="failed", reason=f"the oracle raised {type(exc).__name__}: {exc}", **common)
        if not math.isfinite(truth):
            reason = f"the oracle returned {truth} for candidate id {job.candidate.id!r}; no finite value to measure"
            return LabResult(status="failed", reason=reason, **common)
        noise = self.noise_sd * job_rng(self.seed, job.job_key, "measurement").standard_normal()
        return LabResult(status="ok", value=truth + noise, uncertainty=self.noise_sd, **common)

    def _run_env(self, until: simpy.Event) -> None:
        try:
            self.env.run(until=until)
        except RuntimeError as exc:
            if "No scheduled events left" not in str(exc):
                raise
            raise InstrumentFault(
                f"the simulated lab stalled at t={self.env.now:.0f} s with jobs unfinished; check health()"
            ) from exc

    # ------------------------------------------------------------------------------------------- helpers
    def _handle(self, job_key: str) -> JobHandle:
        return JobHandle(job_key=job_key, driver=self.name)

    def _lookup(self, handle: JobHandle) -> _JobRecord:
        if handle.driver != self.name:
            raise InstrumentFault(
                f"handle for job {handle.job_key!r} belongs to driver {handle.driver!r}, not {self.name!r}"
            )
        record = self._jobs.get(handle.job_key)
        if record is None:
            raise InstrumentFault(
                f"job {handle.job_key!r} is unknown to this {self.name} lab (submitted before a restart?); "
                "resubmit it: submit is idempotent on the job key"
            )
        return record

    def _pending_processes(self, handles: Iterable[JobHandle]) -> list[simpy.Process]:
        records = [self._lookup(handle) for handle in handles]
        return [rec.process for rec in records if rec.state not in TERMINAL_STATES]

    def _count_states(self) -> dict[str, int]:
        counts = dict.fromkeys(("queued", "running", "done", "failed", "cancelled"), 0)
        for record in self._jobs.values():
            counts[record.state] += 1
        return counts

    def __repr__(self) -> str:
        return (
            f"SimLabDriver(stations={self.stations}, seed={self.seed}, now={self.env.now:.0f} s, "
            f"n_jobs={len(self._jobs)})"
        )
