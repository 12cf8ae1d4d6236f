"""``PlateReaderDriver``: a simulated microplate reader, written the way a third-party closedloop driver is written.

Notebook ``02_plug_in_a_driver.ipynb`` walks through it. The driver subclasses ``instruments.BaseDriver``, which
brings the verbs of ``InstrumentDriver``, the book of jobs by key (idempotent ``submit``, ``status``, ``cancel``,
``result``) and the envelope check; this module holds only the instrument's logic. The instrument is small on
purpose:

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
real reader would leave those three methods and ``now`` out (it would not be a ``SimulatedClock``) and the
orchestrator would poll ``status`` instead.

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
from pathlib import Path
from typing import Any

import simpy

from instruments import (
    BaseDriver,
    BookEntry,
    JobHandle,
    LabJob,
    LabMetrics,
    SafetyEnvelope,
)
from instruments.simlab_records import job_rng
from vocabulary.domain import Conditions, InstrumentFault, SetupError

__all__ = ["PEAK_NM", "READ_S", "PlateReaderDriver"]

#: Seconds the reader head needs for one plate, by plate type.
READ_S: dict[str, float] = {"96-well": 240.0, "384-well": 600.0}
#: Wavelength (nm) where the assay's signal is strongest; the noise grows away from it.
PEAK_NM = 450.0


class PlateReaderDriver(BaseDriver):
    """A simulated microplate reader: an ``instruments.BaseDriver`` and an ``instruments.SimulatedClock``.

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
        envelope = SafetyEnvelope(
            name="plate reader",
            parameters={
                "wavelength_nm": {"low": 200.0, "high": 1000.0, "unit": "nm"},
                "plate_type": {"choices": sorted(READ_S)},
            },
            forbidden_hazards={"pyrophoric", "explosive"},  # an open plate in a warm reader
        )
        # the defaults must be inside the envelope too
        envelope.require(LabJob(job_key="defaults", candidate=Conditions(values={}, id="defaults"),
                                parameters={"wavelength_nm": wavelength_nm, "plate_type": plate_type}))
        super().__init__(envelope=envelope, clock=lambda: float(self.env.now))  # the job book runs on simpy time
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
        self._stations = {"incubator": simpy.Resource(self.env, n_incubator_slots),
                          "reader": simpy.Resource(self.env, 1)}
        self._gantt: list[tuple[str, str, float, float]] = []  # (job key, station, start s, end s)
        self._waits: list[tuple[str, float]] = []  # (station, s waited for it)

    # ------------------------------------------------------------------------------------------- the instrument
    async def describe(self) -> dict[str, Any]:
        """What the reader offers; the orchestrator keeps ``max_parallel_jobs`` plates in it by default."""
        return {
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

    async def diagnose(self) -> dict[str, Any]:
        """The clock and the load of both stations."""
        return {
            "now_s": self.now,
            "stations": {name: {"capacity": res.capacity, "n_busy": res.count, "n_waiting": len(res.queue)}
                         for name, res in self._stations.items()},
        }

    async def start(self, entry: BookEntry) -> None:
        """Load the plate: its protocol becomes a simpy process, which runs as the clock is advanced."""
        entry.remote = self.env.process(self._run(entry))

    async def stop(self, entry: BookEntry) -> None:
        """Eject the plate: interrupt its process where it waits (one that has not taken its first step yet sees
        the job cancelled when it does)."""
        process: simpy.Process = entry.remote
        if process.is_alive and not isinstance(process.target, simpy.events.Initialize):
            process.interrupt("cancelled")

    def _run(self, entry: BookEntry) -> Generator[simpy.Event, Any, None]:
        """The protocol: incubate, then read; the reading ends the job (done, or failed with a reason)."""
        if entry.state == "cancelled":  # ejected before the process took its first step
            return
        key = entry.job.job_key
        plate_type = str(entry.job.parameters.get("plate_type", self.plate_type))
        incubation_s = self.incubation_s * math.exp(0.1 * job_rng(self.seed, key, "incubation").standard_normal())
        try:
            yield from self._occupy(entry, "incubator", incubation_s)
            yield from self._occupy(entry, "reader", READ_S[plate_type])
        except simpy.Interrupt:
            return  # cancelled: the kit marked the job already
        log = [(station, start, end) for job_key, station, start, end in self._gantt if job_key == key]
        reason, value, noise_sd = self._read(entry.job)
        if reason:
            self.finish(entry, reason=reason, station_log=log)
        else:
            self.finish(entry, value=value, uncertainty=noise_sd, station_log=log)

    def _occupy(self, entry: BookEntry, station: str, duration_s: float) -> Generator[simpy.Event, Any, None]:
        requested_s = self.env.now
        with self._stations[station].request() as slot:
            yield slot
            self._waits.append((station, self.env.now - requested_s))
            self.mark_running(entry)
            start_s = self.env.now
            try:
                yield self.env.timeout(duration_s)
            finally:
                self._gantt.append((entry.job.job_key, station, start_s, float(self.env.now)))

    def _read(self, job: LabJob) -> tuple[str, float, float]:
        """``(reason, value, noise sd)``: a failure has a reason and no value; it is reported, never lost."""
        if job_rng(self.seed, job.job_key, "bad_read").random() < self.bad_read_probability:
            return "bad reading: the reader saw a bubble or a scratch in the well; re-read under a new job key", 0.0, 0.0
        try:
            truth = self._truth(job.candidate)
        except InstrumentFault as fault:  # no row for these conditions: a failed job, never a lost one
            return str(fault), 0.0, 0.0
        wavelength_nm = float(job.parameters.get("wavelength_nm", self.wavelength_nm))
        noise_sd = self.noise_sd * (1.0 + abs(wavelength_nm - PEAK_NM) / 250.0)
        return "", truth + noise_sd * job_rng(self.seed, job.job_key, "measurement").standard_normal(), noise_sd

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

    # ------------------------------------------------------------------------------------------- the simulated clock
    @property
    def now(self) -> float:
        """The reader's clock, simulated seconds."""
        return float(self.env.now)

    def run_until_complete(self, handles: Iterable[JobHandle]) -> float:
        """Advance the clock until every given plate is finished; return the clock (s)."""
        if pending := [entry.remote for entry in self.unfinished(handles)]:
            self.env.run(until=self.env.all_of(pending))
        return self.now

    def run_until_any_complete(self, handles: Iterable[JobHandle]) -> float:
        """Advance the clock until one of the given unfinished plates is finished; return the clock (s)."""
        if pending := [entry.remote for entry in self.unfinished(handles)]:
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
        busy = {name: sum(end - start for _, station, start, end in self._gantt if station == name)
                for name in self._stations}
        waits = {name: [w for station, w in self._waits if station == name] for name in self._stations}
        return LabMetrics(
            elapsed_s=float(elapsed),
            utilisation={name: busy[name] / (res.capacity * elapsed) if elapsed > 0 else 0.0
                         for name, res in self._stations.items()},
            mean_queue_wait_s=sum(w for _, w in self._waits) / len(self._waits) if self._waits else 0.0,
            queue_wait_s={name: sum(w) / len(w) if w else 0.0 for name, w in waits.items()},
            n_jobs=self.book.count_states(),
            gantt=sorted(self._gantt, key=lambda row: (row[2], row[3], row[0], row[1])),
        )

    def __repr__(self) -> str:
        return (f"PlateReaderDriver(value_column={self.value_column!r}, now={self.now:.0f} s, "
                f"n_jobs={len(self.book.entries)})")


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
