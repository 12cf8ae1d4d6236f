"""The instrument vocabulary: lab jobs, handles, results and the async ``InstrumentDriver`` protocol.

A driver is the backend of one lab (simulated, HTTP, serial, SiLA). The engine talks to every lab through the same
six verbs, so a simulated twin and a real robot are interchangeable. Times are seconds on the lab's clock.

Example:
    >>> from vocabulary.domain import Conditions
    >>> job = LabJob(job_key="c1-lab", candidate=Conditions(values={"T": 25.0}, id="c1"))
    >>> job.steps
    ('synthesis', 'workup', 'characterisation')
    >>> LabJob.model_validate_json(job.model_dump_json()) == job
    True
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, model_validator

from instruments.envelope import SafetyEnvelope
from vocabulary.domain import Candidate, Observation

__all__ = [
    "TERMINAL_STATES",
    "InstrumentDriver",
    "JobHandle",
    "JobState",
    "LabClock",
    "LabJob",
    "LabResult",
    "SimulatedClock",
]

JobState = Literal["queued", "running", "done", "failed", "cancelled"]

#: States a job never leaves; ``result()`` is available for ``done`` and ``failed``.
TERMINAL_STATES: frozenset[str] = frozenset({"done", "failed", "cancelled"})


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LabJob(_Frozen):
    """One candidate to make and measure, walked through ``steps`` (station names, in order).

    ``job_key`` is the idempotency key: submitting the same key twice runs the job once.

    ``parameters`` holds the run's settings (checked against the driver's ``SafetyEnvelope``) and a few keys with a
    fixed meaning: ``priority`` (lower runs sooner, default 0), ``ttl_s`` (seconds from submission after which an
    unfinished job fails), ``consumables`` ({name: units} used at the first step), ``reagents`` and ``hazards``
    (lists the envelope checks) and ``duration_s`` (the expected duration). See ``instruments.envelope``.
    """

    type: Literal["lab_job"] = "lab_job"
    schema_version: int = 1
    job_key: str = Field(min_length=1, description="idempotency key, unique per intended lab run")
    candidate: Candidate
    steps: tuple[str, ...] = Field(default=("synthesis", "workup", "characterisation"), min_length=1)
    parameters: dict[str, Any] = Field(default_factory=dict, description="driver-specific settings for the run")


class JobHandle(_Frozen):
    """What ``submit`` returns: enough to ask the same driver about the job later, also after a restart."""

    type: Literal["job_handle"] = "job_handle"
    schema_version: int = 1
    job_key: str
    driver: str = Field(description="name of the driver that accepted the job")


class LabResult(_Frozen):
    """The outcome of one finished job.

    ``value`` is the measured objective property in the objective's unit and ``uncertainty`` its one standard
    deviation. ``submitted_s`` and ``completed_s`` are on the lab clock (seconds); ``station_log`` holds
    ``(station, start_s, end_s)`` rows in the order the job visited the stations. A failed job has
    ``status="failed"``, a ``reason`` and usually no value: it is reported, never dropped.
    """

    type: Literal["lab_result"] = "lab_result"
    schema_version: int = 1
    job_key: str
    candidate_id: str
    value: float | None = None
    uncertainty: float | None = Field(default=None, ge=0.0)
    status: Literal["ok", "failed"] = "ok"
    reason: str | None = None
    values: dict[str, float] = Field(default_factory=dict, description="every other measured property (further "
                                     "objectives, outcome constraints) by name, in its unit")
    infeasible: bool = Field(default=False, description="a failed job whose point cannot work (no product, phase "
                             "separated): learned by the planners whatever the failure policy, never retried")
    submitted_s: float
    completed_s: float
    station_log: list[tuple[str, float, float]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> LabResult:
        if self.status == "failed" and not self.reason:
            raise ValueError(f"failed lab result for job {self.job_key!r} must say why (reason=...)")
        if self.status == "ok" and (self.value is None or not math.isfinite(self.value)):
            raise ValueError(f"ok lab result for job {self.job_key!r} needs a finite value, got {self.value!r}")
        if self.infeasible and self.status != "failed":
            raise ValueError(f"lab result for job {self.job_key!r} is infeasible but has status {self.status!r}: an "
                             "infeasible run is a failed one (status='failed', reason=...)")
        bad = {k: v for k, v in self.values.items() if not math.isfinite(v)}
        if bad:
            raise ValueError(f"lab result for job {self.job_key!r} has non-finite measured values {bad}: leave a "
                             "property out when it was not measured")
        if self.completed_s < self.submitted_s:
            raise ValueError(f"job {self.job_key!r} completed at {self.completed_s} s before it was submitted")
        return self

    @property
    def station_time_s(self) -> float:
        """Seconds spent on stations (queueing and transfers excluded); the instrument cost of the job."""
        return float(sum(end - start for _, start, end in self.station_log))

    def to_observation(
        self, source: str, property: str = "value", source_version: str = "", fidelity: int = 0
    ) -> Observation:
        """Convert to the domain ``Observation``, charging the station time as ``cost_s``.

        Example:
            >>> r = LabResult(job_key="k", candidate_id="c1", value=1.5, uncertainty=0.1,
            ...               submitted_s=0.0, completed_s=10.0, station_log=[("synthesis", 2.0, 8.0)])
            >>> obs = r.to_observation("simlab", property="yield")
            >>> obs.properties, obs.uncertainty, obs.cost_s
            ({'yield': 1.5}, {'yield': 0.1}, 6.0)
        """
        is_ok = self.status == "ok"
        return Observation(
            candidate_id=self.candidate_id,
            source=source,
            source_version=source_version,
            fidelity=fidelity,
            properties={property: self.value} if is_ok else {},
            uncertainty={property: self.uncertainty} if is_ok and self.uncertainty is not None else {},
            status=self.status,
            reason=self.reason,
            cost_s=self.station_time_s,
            parameters={"job_key": self.job_key, "submitted_s": self.submitted_s, "completed_s": self.completed_s},
        )


@runtime_checkable
class InstrumentDriver(Protocol):
    """The async interface every lab backend implements.

    Contract (checked by ``instruments.testing.DriverContract``):

    - ``submit(job)`` is idempotent on ``job.job_key``: the same key returns the same handle and runs once.
    - ``status(handle)`` moves ``queued -> running -> done | failed``, or to ``cancelled``.
    - ``result(handle)`` returns a ``LabResult`` for ``done`` and ``failed`` jobs and raises ``InstrumentFault``
      for jobs that are unfinished, cancelled or unknown.
    - ``cancel(handle)`` stops a queued or running job; cancelling a finished job changes nothing.
    - ``health()`` and ``capabilities()`` return plain JSON-able dicts; ``health()["is_ok"]`` says whether the lab
      can take work.
    - ``envelope`` is the ``SafetyEnvelope`` the lab declares; ``submit`` raises ``EnvelopeViolation`` for a job
      outside it, and nothing runs.
    - A fault while running (a jam, a timeout, a bad reading) ends as a failed ``LabResult`` with its reason, never as
      a lost job.
    """

    name: str
    version: str
    envelope: SafetyEnvelope

    async def capabilities(self) -> dict[str, Any]:
        """Stations, steps, measured property and limits the lab offers."""
        ...

    async def submit(self, job: LabJob) -> JobHandle:
        """Queue a job (idempotent on ``job.job_key``)."""
        ...

    async def status(self, handle: JobHandle) -> JobState:
        """Current state of a job."""
        ...

    async def result(self, handle: JobHandle) -> LabResult:
        """Result of a finished job; raises ``InstrumentFault`` otherwise."""
        ...

    async def cancel(self, handle: JobHandle) -> None:
        """Cancel a queued or running job."""
        ...

    async def health(self) -> dict[str, Any]:
        """Liveness and load of the lab."""
        ...


@runtime_checkable
class LabClock(Protocol):
    """A driver that reports its lab clock (``HttpDriver`` reports the server's): ``now``, seconds.

    A driver without it runs on wall time; the campaign then measures lab time itself. Check once, when the driver
    is built: ``isinstance(driver, LabClock)``.
    """

    @property
    def now(self) -> float:
        """The lab clock, seconds."""
        ...


@runtime_checkable
class SimulatedClock(LabClock, Protocol):
    """A simulated lab whose clock moves only when the caller advances it (``SimLabDriver``).

    The campaign jumps from one completion to the next instead of polling ``status``. A driver for a real
    instrument leaves these out. Check once, when the driver is built: ``isinstance(driver, SimulatedClock)``.

    Example:
        >>> class Clock:
        ...     now = 0.0
        ...     def run_until(self, time_s): return time_s
        ...     def run_until_complete(self, handles): return 0.0
        ...     def run_until_any_complete(self, handles): return 0.0
        >>> isinstance(Clock(), SimulatedClock), isinstance(Clock(), LabClock), isinstance(object(), LabClock)
        (True, True, False)
    """

    def run_until(self, time_s: float) -> float:
        """Advance the clock to ``time_s`` (nothing happens if it is already past); return the clock, s."""
        ...

    def run_until_complete(self, handles: Iterable[JobHandle]) -> float:
        """Advance the clock until every given job is terminal; return the clock, s."""
        ...

    def run_until_any_complete(self, handles: Iterable[JobHandle]) -> float:
        """Advance the clock until one of the given unfinished jobs is terminal; return the clock, s."""
        ...
