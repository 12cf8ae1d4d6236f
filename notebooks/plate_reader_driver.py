"""``PlateReaderDriver``: a simulated microplate reader, written the way a third-party closedloop driver is written.

Notebook ``02_plug_in_a_driver.ipynb`` walks through it. The instrument is small on purpose:

- an **incubator** (a plate hotel with ``n_incubator_slots`` positions) where each plate sits for ``incubation_s``;
- one **reader** head that reads one plate at a time, taking ``READ_S[plate_type]`` seconds;
- a **measurement**: the true value of the plate's conditions, looked up in a CSV file (``oracle_csv``,
  ``value_column``), plus Gaussian noise that grows as the wavelength moves away from the assay's peak
  (``PEAK_NM``).

A plate reader is one instrument, not a line of stations: it runs its own protocol (incubate, then read) whatever
``LabJob.steps`` lists, and its ``LabResult.station_log`` shows the two stations it really used.

Everything the constructor takes is JSON (strings, numbers, lists), so a campaign spec can name the driver and pass
its parameters (``[lab] driver = "plate_reader"``, ``[lab.parameters] oracle_csv = "..."``). Time is simulated
seconds on a simpy clock that moves only when the caller advances it (``run_until_complete``,
``run_until_any_complete``, ``run_until``), so the orchestrator jumps from one completion to the next; a driver for a
real reader would leave those three methods out and the orchestrator would poll ``status`` instead.

Example:
    >>> import asyncio, csv, tempfile
    >>> from pathlib import Path
    >>> from instruments import LabJob
    >>> from vocabulary.domain import Conditions
    >>> table = Path(tempfile.mkdtemp()) / "truth.csv"
    >>> _ = table.write_text("dye,absorbance\\nA,0.5\\nB,0.9\\n")
    >>> reader = PlateReaderDriver(oracle_csv=str(table), value_column="absorbance")
    >>> handle = asyncio.run(reader.submit(LabJob(job_key="p1", candidate=Conditions(values={"dye": "B"}, id="b"))))
    >>> reader.run_until_complete([handle]) > 1800  # simulated seconds
    True
    >>> asyncio.run(reader.result(handle)).value
    0.9
"""

from __future__ import annotations

import csv
import math
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import simpy

from instruments import (
    JobHandle,
    JobState,
    LabJob,
    LabMetrics,
    LabResult,
    SafetyEnvelope,
)
from instruments.base import TERMINAL_STATES
from instruments.simlab_records import job_rng
from vocabulary.domain import InstrumentFault, SetupError

__all__ = ["PEAK_NM", "READ_S", "PlateReaderDriver"]

#: Seconds the reader head needs for one plate, by plate type.
READ_S: dict[str, float] = {"96-well": 240.0, "384-well": 600.0}
#: Wavelength (nm) where the assay's signal is strongest; the noise grows away from it.
PEAK_NM = 450.0


@dataclass
class _Plate:
    """The driver's bookkeeping for one job (one plate)."""

    job: LabJob
    submitted_s: float
    wavelength_nm: float
    plate_type: str
    state: JobState = "queued"
    has_started: bool = False
    process: simpy.Process | None = None
    station_log: list[tuple[str, float, float]] = field(default_factory=list)
    result: LabResult | None = None


class PlateReaderDriver:
    """A simulated microplate reader implementing ``instruments.InstrumentDriver``.

    Args:
        oracle_csv: CSV file with a header; each row gives the true value of one set of conditions.
        value_column: the column holding the true value (the measured property, e.g. ``"yield"``).
        key_columns: the columns that identify a row; default: the names of the candidate's condition values
            (``Conditions.values``), or ``smiles`` / ``formula`` for molecules and materials. Rows sharing a key
            (replicates) are averaged.
        noise_sd: sd of the Gaussian measurement noise at ``PEAK_NM``, in the value's unit.
        seed: mixed with each job key for durations and noise, so a job measures the same in every replay.
        wavelength_nm: wavelength used when a job does not set ``parameters["wavelength_nm"]``.
        plate_type: plate type used when a job does not set ``parameters["plate_type"]``.
        n_incubator_slots: plates the incubator holds at once.
        incubation_s: median incubation time per plate, s (lognormal, log sd 0.1).
        bad_read_probability: chance that a read fails (a bubble, a scratched plate); the job fails with a reason.
        start_time_s: the clock at start, s (a resumed campaign continues its lab clock).
    """

    name = "plate_reader"
    version = "0.1.0"

    def __init__(
        self,
        *,
        oracle_csv: str,
        value_column: str,
        key_columns: Sequence[str] | None = None,
        noise_sd: float = 0.0,
        seed: int = 0,
        wavelength_nm: float = PEAK_NM,
        plate_type: str = "96-well",
        n_incubator_slots: int = 4,
        incubation_s: float = 1800.0,
        bad_read_probability: float = 0.0,
        start_time_s: float = 0.0,
    ) -> None:
        if not (noise_sd >= 0 and math.isfinite(noise_sd)):
            raise SetupError(f"{noise_sd=} must be a finite number >= 0 (unit of {value_column!r})")
        if not (isinstance(n_incubator_slots, int) and n_incubator_slots >= 1):
            raise SetupError(f"{n_incubator_slots=} must be a whole number >= 1")
        if not (incubation_s > 0 and math.isfinite(incubation_s)):
            raise SetupError(f"{incubation_s=} must be a positive number of seconds")
        if not 0.0 <= bad_read_probability <= 1.0:
            raise SetupError(f"{bad_read_probability=} must lie in [0, 1]")
        self.envelope = SafetyEnvelope(
            name="plate reader",
            parameters={
                "wavelength_nm": {"low": 200.0, "high": 1000.0, "unit": "nm"},
                "plate_type": {"choices": sorted(READ_S)},
            },
            forbidden_hazards={"pyrophoric", "explosive"},  # an open plate in a warm reader
        )
        self.envelope.require(self._probe_job(wavelength_nm, plate_type))  # the defaults must be inside it too
        self.value_column = value_column
        self.key_columns = None if key_columns is None else tuple(key_columns)
        self._rows, columns = _read_table(Path(oracle_csv), value_column)
        missing = sorted(set(self.key_columns or ()) - set(columns))
        if missing:
            raise SetupError(f"key_columns {missing} are not columns of {oracle_csv}; its columns are {columns}")
        self._tables: dict[tuple[str, ...], dict[tuple[Any, ...], float]] = {}
        self.noise_sd, self.seed = float(noise_sd), int(seed)
        self.wavelength_nm, self.plate_type = float(wavelength_nm), plate_type
        self.n_incubator_slots, self.incubation_s = n_incubator_slots, float(incubation_s)
        self.bad_read_probability, self.start_time_s = float(bad_read_probability), float(start_time_s)
        self.env = simpy.Environment(initial_time=self.start_time_s)
        self._stations = {
            "incubator": simpy.Resource(self.env, n_incubator_slots),
            "reader": simpy.Resource(self.env, 1),
        }
        self._plates: dict[str, _Plate] = {}
        self._waits: list[tuple[str, float]] = []

    # ------------------------------------------------------------------------------------------- the protocol
    async def capabilities(self) -> dict[str, Any]:
        """What the reader offers; the orchestrator keeps ``max_parallel_jobs`` plates in it by default."""
        return {
            "driver": self.name,
            "version": self.version,
            "is_simulated": True,
            "property": self.value_column,
            "stations": {name: resource.capacity for name, resource in self._stations.items()},
            "max_parallel_jobs": self.n_incubator_slots + 1,
            "plate_types": {plate: {"read_s": read_s} for plate, read_s in READ_S.items()},
            "incubation_s": self.incubation_s,
            "noise_sd": self.noise_sd,
            "supports_cancel": True,
            "envelope": self.envelope.model_dump(mode="json"),
        }

    async def submit(self, job: LabJob) -> JobHandle:
        """Load a plate at the current time; the same job key again returns the same handle and reads nothing.

        Raises:
            EnvelopeViolation: the job is outside the envelope (nothing is loaded).
            SetupError: the key was used before for a different job.
        """
        known = self._plates.get(job.job_key)
        if known is not None:
            if known.job != job:
                raise SetupError(
                    f"job key {job.job_key!r} was already submitted with a different job; use a new key for a new run"
                )
            return self._handle(job.job_key)
        self.envelope.require(job)
        plate = _Plate(
            job=job,
            submitted_s=self.env.now,
            wavelength_nm=float(job.parameters.get("wavelength_nm", self.wavelength_nm)),
            plate_type=str(job.parameters.get("plate_type", self.plate_type)),
        )
        self._plates[job.job_key] = plate
        plate.process = self.env.process(self._run(plate))
        return self._handle(job.job_key)

    async def status(self, handle: JobHandle) -> JobState:
        """``queued`` until the plate enters the incubator, ``running`` until it is read, then terminal."""
        return self._lookup(handle).state

    async def result(self, handle: JobHandle) -> LabResult:
        """The reading of a ``done`` or ``failed`` plate; raises ``InstrumentFault`` otherwise."""
        plate = self._lookup(handle)
        if plate.state == "cancelled":
            raise InstrumentFault(f"job {handle.job_key!r} was cancelled and has no reading; resubmit under a new key")
        if plate.result is None:
            raise InstrumentFault(
                f"job {handle.job_key!r} is {plate.state} at t={self.env.now:.0f} s and has no reading yet; "
                "advance the reader with run_until_complete([handle]) or poll status()"
            )
        return plate.result

    async def cancel(self, handle: JobHandle) -> None:
        """Eject a queued or running plate; a finished plate keeps its reading."""
        plate = self._lookup(handle)
        if plate.state in TERMINAL_STATES:
            return
        if plate.has_started and plate.process.is_alive:
            plate.process.interrupt("cancelled")
        plate.state = "cancelled"

    async def health(self) -> dict[str, Any]:
        """Clock, plates by state and the load of both stations, as JSON."""
        counts = dict.fromkeys(("queued", "running", "done", "failed", "cancelled"), 0)
        for plate in self._plates.values():
            counts[plate.state] += 1
        return {
            "is_ok": True,
            "driver": self.name,
            "now_s": float(self.env.now),
            "n_jobs": counts,
            "stations": {
                name: {"capacity": res.capacity, "n_busy": res.count, "n_waiting": len(res.queue)}
                for name, res in self._stations.items()
            },
        }

    # ------------------------------------------------------------------------------------------- the clock
    @property
    def now(self) -> float:
        """The reader's clock, simulated seconds."""
        return float(self.env.now)

    def run_until_complete(self, handles: Iterable[JobHandle]) -> float:
        """Advance the clock until every given plate is finished; return the clock (s)."""
        pending = self._pending(handles)
        if pending:
            self.env.run(until=self.env.all_of(pending))
        return self.now

    def run_until_any_complete(self, handles: Iterable[JobHandle]) -> float:
        """Advance the clock until one of the given unfinished plates is finished; return the clock (s)."""
        pending = self._pending(handles)
        if pending:
            self.env.run(until=self.env.any_of(pending))
        return self.now

    def run_until(self, time_s: float) -> float:
        """Advance the clock to ``time_s`` (nothing happens if it is already past); return the clock (s)."""
        if time_s > self.env.now:
            self.env.run(until=time_s)
        return self.now

    def metrics(self) -> LabMetrics:
        """Utilisation (busy time / (capacity x elapsed)), queue waits and the Gantt rows of finished steps."""
        elapsed = self.env.now - self.start_time_s
        rows = [(key, station, start, end)
                for key, plate in self._plates.items() for station, start, end in plate.station_log]
        rows.sort(key=lambda row: (row[2], row[3], row[0], row[1]))
        busy = dict.fromkeys(self._stations, 0.0)
        for _, station, start, end in rows:
            busy[station] += end - start
        waits = {name: [w for station, w in self._waits if station == name] for name in self._stations}
        counts = dict.fromkeys(("queued", "running", "done", "failed", "cancelled"), 0)
        for plate in self._plates.values():
            counts[plate.state] += 1
        return LabMetrics(
            elapsed_s=float(elapsed),
            utilisation={
                name: busy[name] / (res.capacity * elapsed) if elapsed > 0 else 0.0
                for name, res in self._stations.items()
            },
            mean_queue_wait_s=sum(w for _, w in self._waits) / len(self._waits) if self._waits else 0.0,
            queue_wait_s={name: sum(w) / len(w) if w else 0.0 for name, w in waits.items()},
            n_jobs=counts,
            gantt=rows,
        )

    # ------------------------------------------------------------------------------------------- simulation
    def _run(self, plate: _Plate) -> Generator[simpy.Event, Any, None]:
        if plate.state == "cancelled":  # ejected before the process took its first step
            return
        plate.has_started = True
        key = plate.job.job_key
        incubation_s = self.incubation_s * math.exp(0.1 * job_rng(self.seed, key, "incubation").standard_normal())
        try:
            yield from self._occupy(plate, "incubator", incubation_s)
            yield from self._occupy(plate, "reader", READ_S[plate.plate_type])
        except simpy.Interrupt:
            plate.state = "cancelled"
            return
        plate.result = self._read(plate)
        plate.state = "done" if plate.result.status == "ok" else "failed"

    def _occupy(self, plate: _Plate, station: str, duration_s: float) -> Generator[simpy.Event, Any, None]:
        requested_s = self.env.now
        with self._stations[station].request() as slot:
            yield slot
            self._waits.append((station, self.env.now - requested_s))
            plate.state = "running"
            start_s = self.env.now
            try:
                yield self.env.timeout(duration_s)
            finally:
                plate.station_log.append((station, start_s, float(self.env.now)))

    def _read(self, plate: _Plate) -> LabResult:
        job = plate.job
        common = dict(
            job_key=job.job_key,
            candidate_id=job.candidate.id,
            submitted_s=plate.submitted_s,
            completed_s=float(self.env.now),
            station_log=list(plate.station_log),
        )
        if job_rng(self.seed, job.job_key, "bad_read").random() < self.bad_read_probability:
            reason = "bad reading: the reader saw a bubble or a scratch in the well; re-read under a new job key"
            return LabResult(status="failed", reason=reason, **common)
        try:
            truth = self._truth(job.candidate)
        except InstrumentFault as fault:  # no row for these conditions: a failed job, never a lost one
            return LabResult(status="failed", reason=str(fault), **common)
        noise_sd = self.noise_sd * (1.0 + abs(plate.wavelength_nm - PEAK_NM) / 250.0)
        value = truth + noise_sd * job_rng(self.seed, job.job_key, "measurement").standard_normal()
        return LabResult(status="ok", value=value, uncertainty=noise_sd, **common)

    def _truth(self, candidate: Any) -> float:
        settings = _settings(candidate)
        columns = self.key_columns or tuple(settings)
        absent = [name for name in columns if name not in settings]
        if absent:
            raise InstrumentFault(f"candidate {candidate.id!r} has no value for key column(s) {absent}")
        if columns not in self._tables:
            self._tables[columns] = _index(self._rows, columns, self.value_column)
        key = tuple(_normalise(settings[name]) for name in columns)
        table = self._tables[columns]
        if key not in table:
            raise InstrumentFault(
                f"the plate reader's table has no {self.value_column!r} for candidate {candidate.id!r} "
                f"({dict(zip(columns, key))}); add a row or restrict the design space to the table"
            )
        return table[key]

    # ------------------------------------------------------------------------------------------- helpers
    def _probe_job(self, wavelength_nm: float, plate_type: str) -> LabJob:
        from vocabulary.domain import Conditions

        return LabJob(
            job_key="defaults",
            candidate=Conditions(values={}, id="defaults"),
            parameters={"wavelength_nm": wavelength_nm, "plate_type": plate_type},
        )

    def _handle(self, job_key: str) -> JobHandle:
        return JobHandle(job_key=job_key, driver=self.name)

    def _lookup(self, handle: JobHandle) -> _Plate:
        plate = self._plates.get(handle.job_key)
        if handle.driver != self.name or plate is None:
            raise InstrumentFault(
                f"job {handle.job_key!r} is unknown to this {self.name} (submitted elsewhere or before a restart?); "
                "resubmit it: submit is idempotent on the job key"
            )
        return plate

    def _pending(self, handles: Iterable[JobHandle]) -> list[simpy.Process]:
        plates = [self._lookup(handle) for handle in handles]
        return [plate.process for plate in plates if plate.state not in TERMINAL_STATES]

    def __repr__(self) -> str:
        return (f"PlateReaderDriver(value_column={self.value_column!r}, now={self.env.now:.0f} s, "
                f"n_jobs={len(self._plates)})")


def _read_table(path: Path, value_column: str) -> tuple[list[dict[str, str]], list[str]]:
    if not path.is_file():
        raise SetupError(f"oracle_csv={str(path)!r} is not a file; give the path of the ground-truth CSV")
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        columns = list(reader.fieldnames or [])
        if value_column not in columns:
            raise SetupError(f"{path} has no column {value_column!r}; its columns are {columns}")
        return list(reader), columns


def _index(rows: list[dict[str, str]], columns: tuple[str, ...], value_column: str) -> dict[tuple[Any, ...], float]:
    """Key -> mean value over the rows with that key (replicates); rows without a value are left out."""
    sums: dict[tuple[Any, ...], list[float]] = {}
    for row in rows:
        if row.get(value_column, "") == "" or any(name not in row for name in columns):
            continue
        key = tuple(_normalise(row[name]) for name in columns)
        sums.setdefault(key, []).append(float(row[value_column]))
    return {key: sum(values) / len(values) for key, values in sums.items()}


def _settings(candidate: Any) -> dict[str, Any]:
    values = getattr(candidate, "values", None)
    if isinstance(values, dict):
        return dict(values)
    for name in ("smiles", "formula"):
        if getattr(candidate, name, None) is not None:
            return {name: getattr(candidate, name)}
    return {}


def _normalise(value: Any) -> Any:
    """A CSV cell and a candidate value compare equal when they are the same number or the same text."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value).strip()
