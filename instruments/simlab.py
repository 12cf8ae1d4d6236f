"""``SimLabDriver``: a simpy digital twin of a robotic lab.

Each job walks its steps through stations (simpy ``PriorityResource``s with capacities), queueing when they are busy;
a job's ``parameters["priority"]`` orders the queues (lower goes first, ties first come first served). A transfer robot
(capacity 1) moves samples between consecutive stations. The last step ends with a measurement: the oracle's true
value plus Gaussian noise. Time is simulated seconds and only moves when the caller advances it
(``run_until_complete``, ``run_until_any_complete``, ``run_until``), so a month-long campaign runs in seconds.

The twin also models what makes walk-away operation hard: consumables that run out (``consumables``,
``consumable_use``, ``restock()``), injected faults (a ``FaultPlan``: robot jams, station timeouts, bad readings,
stations down for a window), a time-to-live per job (``parameters["ttl_s"]`` or ``default_ttl_s``) and a safety
envelope that ``submit`` enforces. A fault or an expired job ends as a failed ``LabResult`` whose reason names it,
or as a delay; a job is never lost.

Memory stays flat over a long campaign: a finished job's record (its job, result and Gantt rows) is kept until its
result has been collected (``result``, or ``status`` reporting a cancelled job) and ``n_results_kept`` newer
results have been; then only its key, a fingerprint of the job and its final state remain, so ``submit`` stays
idempotent and ``status`` answers, while ``result`` says the record was retired (the campaign's ledger holds it).
Utilisation, queue waits and job counts are running totals over every job since the start.

Determinism: every random draw of a job (station durations, measurement noise, faults) comes from a generator seeded
by ``(seed, job_key, stream)`` through SHA-256 (``job_rng``; the campaign id in the key is left out), never from
submission order. A resumed campaign that resubmits a job to a fresh twin gets the same durations, the same faults
and the same measured value, and so does a new campaign of the same spec and seed.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import simpy
from pydantic import BaseModel, ConfigDict, Field

from instruments.base import TERMINAL_STATES, JobHandle, JobState, LabJob, LabResult
from instruments.envelope import SafetyEnvelope
from instruments.faults import FaultKind, FaultPlan
from vocabulary.domain import ClosedLoopError, InstrumentFault, SetupError

__all__ = [
    "DEFAULT_DURATIONS_S",
    "DEFAULT_STATIONS",
    "FAULT_KINDS",
    "LabMetrics",
    "SimLabDriver",
    "TRANSFER_ROBOT",
    "job_rng",
]

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
#: Fault kinds counted in ``LabMetrics.n_faults``.
FAULT_KINDS: tuple[FaultKind, ...] = (
    "robot_jam", "station_timeout", "bad_reading", "station_down", "ttl_exceeded", "consumable_exhausted"
)

# Causes of a simpy interrupt of a job process.
_CANCEL, _TTL, _DOWN = "cancelled", "ttl", "station_down"


def job_rng(seed: int, job_key: str, stream: str) -> np.random.Generator:
    """Random generator for one job and one purpose, independent of every other job and of submission order.

    The key's first segment (the campaign id of closedloop's ``campaign/candidate[/retryN]`` keys) is left out, so
    the same seed and candidate draw the same in every campaign: a second run of a spec with the same seed, under a
    new campaign id, measures what the first measured.

    Example:
        >>> a = job_rng(0, "run-1/ABC", "measurement").standard_normal()
        >>> b = job_rng(0, "run-2/ABC", "measurement").standard_normal()
        >>> c = job_rng(0, "run-1/ABC/retry2", "measurement").standard_normal()
        >>> bool(a == b), bool(a == c)
        (True, False)
    """
    _, _, within_campaign = job_key.partition("/")
    digest = hashlib.sha256(f"{seed}:{within_campaign or job_key}:{stream}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "big"))


class LabMetrics(BaseModel):
    """Load figures of a simulated lab since its start time.

    ``utilisation`` is busy time / (capacity x elapsed) per resource, in [0, 1]. Queue waits (s) are means over
    granted requests, from request to the start of work. ``gantt`` rows are ``(job_key, resource, start_s, end_s)``
    sorted by start, for the jobs whose records the lab still keeps (unfinished ones, and the ``n_results_kept``
    latest collected; utilisation, waits and ``n_jobs`` cover every job); an interval still open ends at ``now``,
    and a step paused by a station-down window shows as two rows. ``n_faults`` counts faults that hit jobs, by kind; ``faults`` lists them as ``(kind, job_key, resource,
    time_s)``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    elapsed_s: float
    utilisation: dict[str, float]
    mean_queue_wait_s: float
    queue_wait_s: dict[str, float]
    n_jobs: dict[str, int]
    gantt: list[tuple[str, str, float, float]]
    n_faults: dict[str, int] = Field(default_factory=lambda: dict.fromkeys(FAULT_KINDS, 0))
    faults: list[tuple[str, str, str, float]] = Field(default_factory=list)


class _JobFailed(Exception):
    """Ends a job process early with a failed result (a fault, an exhausted consumable)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class _JobRecord:
    job: LabJob
    submitted_s: float
    priority: float = 0.0
    ttl_s: float | None = None
    state: JobState = "queued"
    has_started: bool = False
    process: simpy.Process | None = None
    intervals: list[tuple[str, float, float]] = field(default_factory=list)
    """(resource, start_s, end_s) of every finished stretch of work, transfers included."""
    open_interval: tuple[str, float] | None = None
    working_on: str | None = None
    location: tuple[str, str] = ("waiting to start", "")  # (what the job is doing, resource)
    result: LabResult | None = None

    @property
    def station_log(self) -> list[tuple[str, float, float]]:
        return [row for row in self.intervals if row[0] != TRANSFER_ROBOT]


@dataclass(frozen=True, slots=True)
class _RetiredJob:
    """What the lab keeps of a job whose collected record it let go: enough for ``submit`` and ``status``."""

    fingerprint: int
    state: JobState


def _fingerprint(job: LabJob) -> int:
    return hash(job.model_dump_json())


class SimLabDriver:
    """Simulated robotic lab implementing ``InstrumentDriver``.

    Args:
        oracle: ground truth ``oracle(candidate) -> float``; an exception makes the job fail with its message.
        noise_sd: sd of Gaussian measurement noise, in the objective's unit; reported as ``uncertainty``.
        seed: seed mixed with each job key for durations, noise and faults.
        stations: station name -> capacity; replaces the defaults (synthesis 2, workup 1, characterisation 1).
        durations_s: station -> (median s, log sd) of a lognormal duration; merged over the defaults.
        transfer_s: transfer robot time between consecutive stations, s (0 disables the robot).
        start_time_s: lab clock at start, s; a resumed campaign passes the time its ledger reached.
        envelope: the safety envelope ``submit`` enforces (a ``SafetyEnvelope`` or its dict); default permissive.
        faults: the faults to inject (a ``FaultPlan`` or its dict); default none.
        consumables: consumable name -> units in stock at start; None tracks no stock.
        consumable_use: station -> {consumable: units one step there uses}. A job's ``parameters["consumables"]``
            adds units used at its first step.
        default_ttl_s: time-to-live of jobs that set no ``parameters["ttl_s"]``, s from submission; None for none.
        n_results_kept: finished jobs whose whole record (result, Gantt rows) is kept after their result was
            collected; older collected ones are retired to their key, job fingerprint and state.

    Example:
        >>> import asyncio
        >>> from vocabulary.domain import Conditions
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
    version = "0.2.0"

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
        envelope: SafetyEnvelope | Mapping[str, Any] | None = None,
        faults: FaultPlan | Mapping[str, Any] | None = None,
        consumables: Mapping[str, float] | None = None,
        consumable_use: Mapping[str, Mapping[str, float]] | None = None,
        default_ttl_s: float | None = None,
        n_results_kept: int = 1000,
    ) -> None:
        if not callable(oracle):
            raise SetupError(f"SimLabDriver needs a callable oracle(candidate) -> float, got {oracle!r}")
        if not (noise_sd >= 0.0 and math.isfinite(noise_sd)):
            raise SetupError(f"{noise_sd=} must be a finite number >= 0 (objective units)")
        if not (transfer_s >= 0.0 and math.isfinite(transfer_s)):
            raise SetupError(f"{transfer_s=} must be a finite number of seconds >= 0")
        if default_ttl_s is not None and not (default_ttl_s > 0 and math.isfinite(default_ttl_s)):
            raise SetupError(f"{default_ttl_s=} must be a positive number of seconds, or None for no time-to-live")
        if isinstance(n_results_kept, bool) or not isinstance(n_results_kept, int) or n_results_kept < 0:
            raise SetupError(f"{n_results_kept=} must be a whole number >= 0 (collected results the lab keeps)")
        self.oracle = oracle
        self.n_results_kept = n_results_kept
        self.noise_sd = float(noise_sd)
        self.seed = int(seed)
        self.transfer_s = float(transfer_s)
        self.start_time_s = float(start_time_s)
        self.default_ttl_s = None if default_ttl_s is None else float(default_ttl_s)
        self.stations = dict(DEFAULT_STATIONS if stations is None else stations)
        self.durations_s = {**DEFAULT_DURATIONS_S, **(durations_s or {})}
        self.envelope = _as_model(SafetyEnvelope, envelope, "envelope")
        self.faults = _as_model(FaultPlan, faults, "faults")
        self._check_stations()
        self._initial_stock = {str(k): float(v) for k, v in (consumables or {}).items()}
        self._stock = dict(self._initial_stock)
        self.consumable_use = {station: dict(use) for station, use in (consumable_use or {}).items()}
        self._check_consumables()
        self.env = simpy.Environment(initial_time=self.start_time_s)
        self._resources = {name: simpy.PriorityResource(self.env, capacity) for name, capacity in self.stations.items()}
        self._resources[TRANSFER_ROBOT] = simpy.PriorityResource(self.env, 1)
        self._jobs: dict[str, _JobRecord] = {}
        self._collected: dict[str, None] = {}  # keys of kept records whose result was collected, oldest first
        self._retired: dict[str, _RetiredJob] = {}
        self._n_retired: Counter[str] = Counter()  # retired jobs by final state
        self._busy_s: dict[str, float] = dict.fromkeys(self._resources, 0.0)  # closed intervals' work, s
        self._wait_s: dict[str, float] = dict.fromkeys(self._resources, 0.0)  # summed queue waits, s
        self._n_waits: dict[str, int] = dict.fromkeys(self._resources, 0)
        self._fault_log: list[tuple[str, str, str, float]] = []
        self._down: dict[str, simpy.Event] = {}  # station -> event that fires when it is back up
        for station, start_s, end_s in self.faults.station_down:
            self.env.process(self._station_down(station, start_s, end_s))

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
        unknown = sorted({station for station, _, _ in self.faults.station_down} - set(self.stations))
        if unknown:
            raise SetupError(
                f"faults.station_down names {unknown}, which are not stations of this lab {list(self.stations)}"
            )

    def _check_consumables(self) -> None:
        for name, units in self._initial_stock.items():
            if not (units >= 0 and math.isfinite(units)):
                raise SetupError(f"consumable {name!r} starts with {units!r} units; give a finite number >= 0")
        for station, use in self.consumable_use.items():
            if station not in self.stations:
                raise SetupError(f"consumable_use names station {station!r}, which is not one of {list(self.stations)}")
            for name, units in use.items():
                if name not in self._initial_stock:
                    raise SetupError(
                        f"station {station!r} uses consumable {name!r}, which is not stocked; "
                        f"add it to consumables={{{name!r}: units}}"
                    )
                if not (units >= 0 and math.isfinite(units)):
                    raise SetupError(f"station {station!r} uses {units!r} units of {name!r}; give a number >= 0")

    # ------------------------------------------------------------------------------------------- protocol
    async def capabilities(self) -> dict[str, Any]:
        """Stations, default steps, duration model, measured property, envelope, consumables and faults."""
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
            "supports_priority": True,
            "default_ttl_s": self.default_ttl_s,
            "consumables": dict(self._stock),
            "consumable_use": {station: dict(use) for station, use in self.consumable_use.items()},
            "envelope": self.envelope.model_dump(mode="json"),
            "faults": self.faults.model_dump(mode="json"),
        }

    async def submit(self, job: LabJob) -> JobHandle:
        """Queue ``job`` at the current lab time; resubmitting its key returns the same handle and runs nothing.

        Raises:
            EnvelopeViolation: the job lies outside ``envelope`` (nothing is queued).
            SetupError: a step names no station, a job parameter (``priority``, ``ttl_s``, ``consumables``) is
                malformed, or the key was already used for a different job.
        """
        existing = self._jobs.get(job.job_key)
        retired = self._retired.get(job.job_key)
        if existing is not None or retired is not None:
            if existing.job != job if existing is not None else retired.fingerprint != _fingerprint(job):
                raise SetupError(
                    f"job key {job.job_key!r} was already submitted with a different job; "
                    "use a new key for a new run (keys are idempotency keys)"
                )
            return self._handle(job.job_key)
        self.envelope.require(job)
        unknown = [step for step in job.steps if step not in self.stations]
        if unknown:
            raise SetupError(
                f"job {job.job_key!r} has steps {unknown} that are not stations of this lab {list(self.stations)}"
            )
        record = _JobRecord(
            job=job, submitted_s=self.env.now, priority=self._priority(job), ttl_s=self._ttl(job)
        )
        self._job_consumables(job)
        self._jobs[job.job_key] = record
        record.process = self.env.process(self._run(record))
        if record.ttl_s is not None:
            self.env.process(self._watch_ttl(record))
        return self._handle(job.job_key)

    async def status(self, handle: JobHandle) -> JobState:
        """``queued`` until work starts on the first station, ``running`` until measured, then terminal."""
        record = self._lookup(handle)
        if isinstance(record, _RetiredJob):
            return record.state
        if record.state == "cancelled":  # all there is to collect of a cancelled job
            self._collect(record)
        return record.state

    async def result(self, handle: JobHandle) -> LabResult:
        """The ``LabResult`` of a ``done`` or ``failed`` job.

        Raises:
            InstrumentFault: the job is unknown, unfinished or cancelled, or its collected result was retired.
        """
        record = self._lookup(handle)
        if isinstance(record, _RetiredJob):
            raise InstrumentFault(
                f"job {handle.job_key!r} ended {record.state} and its result was collected; this lab keeps the last "
                f"{self.n_results_kept} collected results (n_results_kept), so read it from the campaign's ledger"
            )
        if record.state == "cancelled":
            raise InstrumentFault(f"job {handle.job_key!r} was cancelled and has no result; resubmit under a new key")
        if record.result is None:
            raise InstrumentFault(
                f"job {handle.job_key!r} is {record.state} at t={self.env.now:.0f} s and has no result yet; "
                "advance the lab with run_until_complete([handle]) or poll status() until it is 'done'"
            )
        self._collect(record)
        return record.result

    async def cancel(self, handle: JobHandle) -> None:
        """Cancel a queued or running job (freeing its station); a finished job is left as it is."""
        record = self._lookup(handle)
        if isinstance(record, _RetiredJob) or record.state in TERMINAL_STATES:
            return
        if record.has_started and record.process.is_alive:
            record.process.interrupt(_CANCEL)
        record.state = "cancelled"

    async def health(self) -> dict[str, Any]:
        """Clock, job counts by state, busy/waiting slots per station, stations down, stock and fault counts."""
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
            "stations_down": sorted(self._down),
            "consumables": dict(self._stock),
            "n_faults": self._count_faults(),
        }

    # ------------------------------------------------------------------------------------------- lab upkeep
    @property
    def stock(self) -> dict[str, float]:
        """Units left of each consumable."""
        return dict(self._stock)

    def restock(self, amounts: Mapping[str, float] | None = None) -> dict[str, float]:
        """Refill consumables: every one back to its starting level, or add ``amounts`` units; return the stock.

        Example:
            >>> lab = SimLabDriver(oracle=lambda c: 1.0, consumables={"pd_catalyst": 2})
            >>> lab.restock({"pd_catalyst": 3})
            {'pd_catalyst': 5.0}
        """
        if amounts is None:
            self._stock.update(self._initial_stock)
            return self.stock
        for name, units in amounts.items():
            if name not in self._stock:
                raise SetupError(f"consumable {name!r} is not stocked by this lab; it has {sorted(self._stock)}")
            if not (units >= 0 and math.isfinite(units)):
                raise SetupError(f"restock of {name!r} by {units!r} units; give a finite number >= 0")
            self._stock[name] += float(units)
        return self.stock

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
        """Utilisation, queue waits, Gantt rows and fault counts since ``start_time_s``.

        Example:
            >>> lab = SimLabDriver(oracle=lambda c: 1.0)
            >>> lab.metrics().utilisation["synthesis"]
            0.0
        """
        now = self.env.now
        elapsed = now - self.start_time_s
        rows = [(key, *interval) for key, rec in self._jobs.items() for interval in rec.intervals]
        busy = dict(self._busy_s)
        for key, rec in self._jobs.items():
            if rec.open_interval is not None:
                resource, start_s = rec.open_interval
                rows.append((key, resource, start_s, now))
                busy[resource] += now - start_s
        rows.sort(key=lambda row: (row[2], row[3], row[0], row[1]))
        utilisation = {
            name: (busy[name] / (res.capacity * elapsed) if elapsed > 0 else 0.0)
            for name, res in self._resources.items()
        }
        stations = [name for name in self._resources if name != TRANSFER_ROBOT]
        n_station_waits = sum(self._n_waits[name] for name in stations)
        return LabMetrics(
            elapsed_s=elapsed,
            utilisation=utilisation,
            mean_queue_wait_s=sum(self._wait_s[name] for name in stations) / n_station_waits if n_station_waits else 0.0,
            queue_wait_s={name: self._wait_s[name] / n if (n := self._n_waits[name]) else 0.0
                          for name in self._resources},
            n_jobs=self._count_states(),
            gantt=rows,
            n_faults=self._count_faults(),
            faults=list(self._fault_log),
        )

    # ------------------------------------------------------------------------------------------- simulation
    def _run(self, record: _JobRecord) -> Generator[simpy.Event, Any, None]:
        if record.state == "cancelled":  # cancelled before the process got its first step
            return
        record.has_started = True
        job, key = record.job, record.job.job_key
        try:
            for index, step in enumerate(job.steps):
                if index > 0 and self.transfer_s > 0:
                    transfer_s = self.transfer_s
                    if self._meets(key, "robot_jam", self.faults.robot_jam_probability, f"fault:jam:{index}"):
                        self._log_fault("robot_jam", key, TRANSFER_ROBOT)
                        transfer_s += self.faults.robot_jam_s
                    yield from self._occupy(record, TRANSFER_ROBOT, transfer_s)
                median_s, log_sd = self.durations_s[step]
                z = job_rng(self.seed, key, f"duration:{index}:{step}").standard_normal()
                duration_s = median_s * math.exp(log_sd * z)
                stream = f"fault:timeout:{index}:{step}"
                hangs = self._meets(key, "station_timeout", self.faults.station_timeout_probability, stream)
                if hangs:
                    duration_s = self.faults.station_timeout_factor * median_s
                needs = dict(self.consumable_use.get(step, {}))
                if index == 0:
                    for name, units in self._job_consumables(job).items():
                        needs[name] = needs.get(name, 0.0) + units
                yield from self._occupy(record, step, duration_s, needs=needs)
                if hangs:
                    self._log_fault("station_timeout", key, step)
                    raise _JobFailed(
                        f"station timeout: {step!r} did not finish its step within {duration_s:.0f} s and its "
                        "watchdog aborted it (injected fault); the sample is lost, resubmit under a new job key"
                    )
        except simpy.Interrupt as interrupt:
            if interrupt.cause == _TTL and record.state != "cancelled":  # a cancel that came first wins
                self._finish_failed(record, self._ttl_reason(record))
            else:
                record.state = "cancelled"
            return
        except _JobFailed as failure:
            self._finish_failed(record, failure.reason)
            return
        record.result = self._measure(record)
        record.state = "done" if record.result.status == "ok" else "failed"

    def _occupy(
        self, record: _JobRecord, resource: str, duration_s: float, needs: Mapping[str, float] | None = None
    ) -> Generator[simpy.Event, Any, None]:
        """Hold one slot of ``resource`` for ``duration_s`` of work, pausing while the station is down."""
        requested_s = self.env.now
        is_station = resource != TRANSFER_ROBOT
        record.location = ("waiting for", resource)
        with self._resources[resource].request(priority=record.priority) as request:
            yield request
            remaining_s, has_begun, is_held_up = duration_s, False, False
            while True:
                up = self._down.get(resource)
                if up is not None:
                    if not (has_begun or is_held_up):  # granted while down: one delay, however many windows
                        is_held_up = True
                        self._log_fault("station_down", record.job.job_key, resource)
                    try:
                        yield up
                    except simpy.Interrupt as interrupt:
                        if interrupt.cause != _DOWN:
                            raise
                    continue
                if not has_begun:
                    has_begun = True
                    self._wait_s[resource] += self.env.now - requested_s
                    self._n_waits[resource] += 1
                    if needs:
                        self._consume(record, resource, needs)
                    if is_station:
                        record.state = "running"
                start_s = self.env.now
                record.open_interval, record.working_on = (resource, start_s), resource
                record.location = ("on", resource)
                try:
                    yield self.env.timeout(remaining_s)
                except simpy.Interrupt as interrupt:
                    self._close_interval(record, resource, start_s, is_station)
                    if interrupt.cause != _DOWN:
                        raise
                    self._log_fault("station_down", record.job.job_key, resource)
                    remaining_s -= self.env.now - start_s
                    if remaining_s > 1e-9:
                        continue
                    return
                self._close_interval(record, resource, start_s, is_station)
                return

    def _close_interval(self, record: _JobRecord, resource: str, start_s: float, is_station: bool) -> None:
        record.open_interval, record.working_on = None, None
        record.intervals.append((resource, start_s, self.env.now))
        self._busy_s[resource] += self.env.now - start_s

    def _consume(self, record: _JobRecord, station: str, needs: Mapping[str, float]) -> None:
        short = {name: units for name, units in needs.items() if self._stock.get(name, 0.0) < units}
        if short:
            name, units = next(iter(short.items()))
            self._log_fault("consumable_exhausted", record.job.job_key, station)
            raise _JobFailed(
                f"consumable exhausted: {name!r} has {self._stock.get(name, 0.0):g} units left and step "
                f"{station!r} needs {units:g}; call restock() on the lab, then resubmit under a new job key"
            )
        for name, units in needs.items():
            self._stock[name] -= units

    def _station_down(self, station: str, start_s: float, end_s: float) -> Generator[simpy.Event, Any, None]:
        if end_s <= self.env.now:
            return
        if start_s > self.env.now:
            yield self.env.timeout(start_s - self.env.now)
        up = self.env.event()
        self._down[station] = up
        for record in self._jobs.values():
            if record.working_on == station and record.process is not None and record.process.is_alive:
                record.process.interrupt(_DOWN)
        yield self.env.timeout(end_s - self.env.now)
        if self._down.get(station) is up:  # a window starting right now may already have replaced it
            del self._down[station]
        up.succeed()

    def _watch_ttl(self, record: _JobRecord) -> Generator[simpy.Event, Any, None]:
        yield self.env.timeout(record.ttl_s)
        if record.state not in TERMINAL_STATES and record.process.is_alive:
            record.process.interrupt(_TTL)

    def _ttl_reason(self, record: _JobRecord) -> str:
        doing, resource = record.location
        where = f"{doing} {resource!r}" if resource else doing
        self._log_fault("ttl_exceeded", record.job.job_key, resource)
        return (
            f"ttl exceeded: job {record.job.job_key!r} was not finished {record.ttl_s:g} s after submission "
            f"(submitted at t={record.submitted_s:.0f} s, stopped at t={self.env.now:.0f} s {where}); "
            "raise parameters['ttl_s'] or default_ttl_s, or look for a stuck station"
        )

    def _finish_failed(self, record: _JobRecord, reason: str) -> None:
        record.result = LabResult(
            job_key=record.job.job_key,
            candidate_id=record.job.candidate.id,
            status="failed",
            reason=reason,
            submitted_s=record.submitted_s,
            completed_s=self.env.now,
            station_log=list(record.station_log),
        )
        record.state = "failed"

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
        if self._meets(job.job_key, "bad_reading", self.faults.bad_reading_probability, "fault:bad_reading"):
            station = job.steps[-1]
            self._log_fault("bad_reading", job.job_key, station)
            reason = (
                f"bad reading: the detector on {station!r} returned an implausible signal (injected fault); "
                "re-measure under a new job key"
            )
            return LabResult(status="failed", reason=reason, **common)
        noise = self.noise_sd * job_rng(self.seed, job.job_key, "measurement").standard_normal()
        return LabResult(status="ok", value=truth + noise, uncertainty=self.noise_sd, **common)

    def _meets(self, job_key: str, kind: str, probability: float, stream: str) -> bool:
        """Whether a job meets a fault here: forced for its key, or drawn from its own stream."""
        if self.faults.forced.get(job_key) == kind:
            return True
        return probability > 0.0 and job_rng(self.seed, job_key, stream).random() < probability

    def _log_fault(self, kind: FaultKind, job_key: str, resource: str) -> None:
        self._fault_log.append((kind, job_key, resource, float(self.env.now)))

    def _run_env(self, until: simpy.Event) -> None:
        try:
            self.env.run(until=until)
        except RuntimeError as exc:
            if "No scheduled events left" not in str(exc):
                raise
            raise InstrumentFault(
                f"the simulated lab stalled at t={self.env.now:.0f} s with jobs unfinished; check health()"
            ) from exc

    # ------------------------------------------------------------------------------------------- job parameters
    @staticmethod
    def _priority(job: LabJob) -> float:
        raw = job.parameters.get("priority", 0)
        if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw):
            raise SetupError(f"job {job.job_key!r} has priority={raw!r}; give a finite number (lower runs sooner)")
        return float(raw)

    def _ttl(self, job: LabJob) -> float | None:
        raw = job.parameters.get("ttl_s", self.default_ttl_s)
        if raw is None:
            return None
        if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not (raw > 0 and math.isfinite(raw)):
            raise SetupError(f"job {job.job_key!r} has ttl_s={raw!r}; give a positive number of seconds")
        return float(raw)

    def _job_consumables(self, job: LabJob) -> dict[str, float]:
        raw = job.parameters.get("consumables", {})
        if not isinstance(raw, Mapping):
            raise SetupError(f"job {job.job_key!r} has consumables={raw!r}; give a mapping name -> units")
        needs = {}
        for name, units in raw.items():
            if name not in self._stock:
                raise SetupError(
                    f"job {job.job_key!r} needs consumable {name!r}, which this lab does not stock "
                    f"(stocked: {sorted(self._stock) or 'none'})"
                )
            is_number = isinstance(units, (int, float)) and not isinstance(units, bool)
            if not (is_number and units >= 0 and math.isfinite(units)):
                raise SetupError(f"job {job.job_key!r} needs {units!r} units of {name!r}; give a number >= 0")
            needs[name] = float(units)
        return needs

    # ------------------------------------------------------------------------------------------- helpers
    def _handle(self, job_key: str) -> JobHandle:
        return JobHandle(job_key=job_key, driver=self.name)

    def _collect(self, record: _JobRecord) -> None:
        """Note that a finished job's result was handed out; retire the oldest collected records beyond the
        ``n_results_kept`` newest."""
        self._collected[record.job.job_key] = None
        while len(self._collected) > self.n_results_kept:
            key = next(iter(self._collected))
            del self._collected[key]
            old = self._jobs.pop(key)
            self._retired[key] = _RetiredJob(_fingerprint(old.job), old.state)
            self._n_retired[old.state] += 1

    def _lookup(self, handle: JobHandle) -> _JobRecord | _RetiredJob:
        if handle.driver != self.name:
            raise InstrumentFault(
                f"handle for job {handle.job_key!r} belongs to driver {handle.driver!r}, not {self.name!r}"
            )
        record = self._jobs.get(handle.job_key) or self._retired.get(handle.job_key)
        if record is None:
            raise InstrumentFault(
                f"job {handle.job_key!r} is unknown to this {self.name} lab (submitted before a restart?); "
                "resubmit it: submit is idempotent on the job key"
            )
        return record

    def _pending_processes(self, handles: Iterable[JobHandle]) -> list[simpy.Process]:
        records = [self._lookup(handle) for handle in handles]
        return [rec.process for rec in records if isinstance(rec, _JobRecord) and rec.state not in TERMINAL_STATES]

    def _count_states(self) -> dict[str, int]:
        counts = dict.fromkeys(("queued", "running", "done", "failed", "cancelled"), 0)
        counts.update(self._n_retired)
        for record in self._jobs.values():
            counts[record.state] += 1
        return counts

    def _count_faults(self) -> dict[str, int]:
        counts = dict.fromkeys(FAULT_KINDS, 0)
        for kind, *_ in self._fault_log:
            counts[kind] += 1
        return counts

    def __repr__(self) -> str:
        return (
            f"SimLabDriver(stations={self.stations}, seed={self.seed}, now={self.env.now:.0f} s, "
            f"n_jobs={len(self._jobs) + len(self._retired)})"
        )


def _as_model(model: type[BaseModel], value: Any, what: str) -> Any:
    """Accept a model, its dict (as read from a TOML spec or JSON) or None (the model's default)."""
    if value is None:
        return model()
    if isinstance(value, model):
        return value
    try:
        return model.model_validate(dict(value))
    except (TypeError, ValueError) as exc:
        raise SetupError(f"{what}={value!r} is not a valid {model.__name__}: {exc}") from exc
