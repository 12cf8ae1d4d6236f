"""``SimLabDriver``: a simpy digital twin of a robotic lab.

Each job walks its steps through stations (simpy ``PriorityResource``s with capacities), queueing when they are busy;
a job's ``parameters["priority"]`` orders the queues (lower goes first, ties first come first served). A transfer robot
(capacity 1) moves samples between consecutive stations. The last step ends with a measurement: the oracle's true
value plus Gaussian noise, kept within the property's bounds (``bounds``, or the ``unit``'s: a yield in "%" reads
0..100, never 103). Time is simulated seconds and only moves when the caller advances it
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

The jobs' simpy processes live in ``simlab_process``, their records, ``LabMetrics`` and ``job_rng`` in
``simlab_records``, and the checks of the lab's configuration and of a job's parameters in ``simlab_setup``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import simpy

from instruments.base import TERMINAL_STATES, JobHandle, JobState, LabJob, LabResult
from instruments.envelope import SafetyEnvelope
from instruments.faults import FaultPlan
from instruments.oracle import MeasuredProperty, unit_bounds
from instruments.simlab_process import CAUSE_CANCEL, JobProcesses
from instruments.simlab_records import (
    FAULT_KINDS,
    TRANSFER_ROBOT,
    JobRecord,
    LabMetrics,
    RetiredJob,
)
from instruments.simlab_retired import RetiredJobs, job_fingerprint
from instruments.simlab_setup import (
    as_model,
    check_consumables,
    check_stations,
    job_consumables,
    job_priority,
    job_ttl,
)
from vocabulary.domain import InstrumentFault, SetupError

__all__ = [
    "DEFAULT_DURATIONS_S",
    "DEFAULT_STATIONS",
    "SimLabDriver",
]

#: Station capacities (parallel slots) of the default lab.
DEFAULT_STATIONS: dict[str, int] = {"synthesis": 2, "workup": 1, "characterisation": 1}
#: Per station: (median duration in s, sd of log duration) of a lognormal.
DEFAULT_DURATIONS_S: dict[str, tuple[float, float]] = {
    "synthesis": (4 * 3600.0, 0.3),
    "workup": (3600.0, 0.25),
    "characterisation": (1800.0, 0.2),
}


class SimLabDriver(JobProcesses):
    """Simulated robotic lab implementing ``InstrumentDriver``.

    Args:
        oracle: ground truth ``oracle(candidate) -> float``; an exception makes the job fail with its message.
        noise_sd: sd of Gaussian measurement noise, in the objective's unit; reported as ``uncertainty``.
        unit: the objective's unit; a bounded one (``instruments.oracle.UNIT_BOUNDS``: "%" is 0..100) bounds the
            readings when ``bounds`` is not given.
        bounds: (lowest, highest) a reading can be, objective units (either None for no bound); a noisy reading
            beyond one is read as the bound, as a detector saturates. Default: the ``unit``'s, else unbounded.
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
        measured: every other property a job measures (further objectives, outcome constraints): name ->
            ``MeasuredProperty`` (its own truth, noise and bounds), returned in ``LabResult.values``.
        fails_at_or_below: a job whose true value (of ``oracle``) is at or below this fails ("no product"),
            objective units; None: never. The campaign's failure policy says what such a failure means.
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
        unit: str | None = None,
        bounds: tuple[float | None, float | None] | None = None,
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
        measured: Mapping[str, MeasuredProperty] | None = None,
        fails_at_or_below: float | None = None,
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
        self.unit = unit
        self.measured = dict(measured or {})
        bad = [name for name, m in self.measured.items() if not isinstance(m, MeasuredProperty)]
        if bad:
            raise SetupError(f"measured properties {bad} must be MeasuredProperty(oracle, noise_sd, unit)")
        if fails_at_or_below is not None and not math.isfinite(fails_at_or_below):
            raise SetupError(f"{fails_at_or_below=} must be a finite number (objective units) or None")
        self.fails_at_or_below = fails_at_or_below
        self.n_results_kept = n_results_kept
        self.noise_sd = float(noise_sd)
        self.bounds = _checked_bounds(unit_bounds(unit) if bounds is None else bounds)
        self.seed = int(seed)
        self.transfer_s = float(transfer_s)
        self.start_time_s = float(start_time_s)
        self.default_ttl_s = None if default_ttl_s is None else float(default_ttl_s)
        self.stations = dict(DEFAULT_STATIONS if stations is None else stations)
        self.durations_s = {**DEFAULT_DURATIONS_S, **(durations_s or {})}
        self.envelope = as_model(SafetyEnvelope, envelope, "envelope")
        self.faults = as_model(FaultPlan, faults, "faults")
        check_stations(self.stations, self.durations_s, self.faults)
        self._initial_stock = {str(k): float(v) for k, v in (consumables or {}).items()}
        self._stock = dict(self._initial_stock)
        self.consumable_use = {station: dict(use) for station, use in (consumable_use or {}).items()}
        check_consumables(self._initial_stock, self.consumable_use, self.stations)
        self.env = simpy.Environment(initial_time=self.start_time_s)
        self._resources = {name: simpy.PriorityResource(self.env, capacity) for name, capacity in self.stations.items()}
        self._resources[TRANSFER_ROBOT] = simpy.PriorityResource(self.env, 1)
        self._jobs: dict[str, JobRecord] = {}
        self._collected: dict[str, None] = {}  # keys of kept records whose result was collected, oldest first
        self._retired = RetiredJobs()  # key, fingerprint and final state of each retired job
        self._busy_s: dict[str, float] = dict.fromkeys(self._resources, 0.0)  # closed intervals' work, s
        self._wait_s: dict[str, float] = dict.fromkeys(self._resources, 0.0)  # summed queue waits, s
        self._n_waits: dict[str, int] = dict.fromkeys(self._resources, 0)
        self._fault_log: list[tuple[str, str, str, float]] = []
        self._down: dict[str, simpy.Event] = {}  # station -> event that fires when it is back up
        for station, start_s, end_s in self.faults.station_down:
            self.env.process(self._station_down(station, start_s, end_s))

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
            if existing.job != job if existing is not None else retired.fingerprint != job_fingerprint(job):
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
        record = JobRecord(
            job=job, submitted_s=self.env.now, priority=job_priority(job), ttl_s=job_ttl(job, self.default_ttl_s)
        )
        job_consumables(job, self._stock)
        self._jobs[job.job_key] = record
        record.process = self.env.process(self._run(record))
        if record.ttl_s is not None:
            self.env.process(self._watch_ttl(record))
        return self._handle(job.job_key)

    async def status(self, handle: JobHandle) -> JobState:
        """``queued`` until work starts on the first station, ``running`` until measured, then terminal."""
        record = self._lookup(handle)
        if isinstance(record, RetiredJob):
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
        if isinstance(record, RetiredJob):
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
        if isinstance(record, RetiredJob) or record.state in TERMINAL_STATES:
            return
        if record.has_started and record.process.is_alive:
            record.process.interrupt(CAUSE_CANCEL)
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
    def _measure(self, record: JobRecord) -> LabResult:
        """The reading ``JobProcesses`` takes, held within ``bounds`` (the noise is drawn as before)."""
        result = super()._measure(record)
        low, high = self.bounds
        if result.status != "ok" or result.value is None or (low is None and high is None):
            return result
        value = min(max(result.value, -math.inf if low is None else low), math.inf if high is None else high)
        return result if value == result.value else result.model_copy(update={"value": value})

    def _handle(self, job_key: str) -> JobHandle:
        return JobHandle(job_key=job_key, driver=self.name)

    def _collect(self, record: JobRecord) -> None:
        """Note that a finished job's result was handed out; retire the oldest collected records beyond the
        ``n_results_kept`` newest."""
        self._collected[record.job.job_key] = None
        while len(self._collected) > self.n_results_kept:
            key = next(iter(self._collected))
            del self._collected[key]
            old = self._jobs.pop(key)
            self._retired.add(key, fingerprint=job_fingerprint(old.job), state=old.state)

    def _lookup(self, handle: JobHandle) -> JobRecord | RetiredJob:
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
        return [rec.process for rec in records if isinstance(rec, JobRecord) and rec.state not in TERMINAL_STATES]

    def _count_states(self) -> dict[str, int]:
        counts = dict.fromkeys(("queued", "running", "done", "failed", "cancelled"), 0)
        counts.update(self._retired.n_by_state)
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


def _checked_bounds(bounds: Any) -> tuple[float | None, float | None]:
    """``(low, high)`` as floats or None, refused with a fix when it is not a range."""
    if bounds is None:
        return None, None
    try:
        low, high = (None if b is None else float(b) for b in bounds)
    except (TypeError, ValueError) as exc:
        raise SetupError(f"bounds={bounds!r} must be (lowest, highest), numbers or None, e.g. (0, 100)") from exc
    if any(b is not None and math.isnan(b) for b in (low, high)) or (
            low is not None and high is not None and low > high):
        raise SetupError(f"bounds={bounds!r} must have lowest <= highest; swap them or use None for no bound")
    return low, high
