"""``FaultPlan``: the faults a simulated lab injects, so failure handling can be tested before a real robot jams.

Every fault of a job is drawn from that job's own random stream, seeded by ``(seed, job_key)``, so the same job
meets the same faults in every replay, whatever else the lab is doing. A fault never loses a job:

- **robot jam** (per transfer): the transfer takes ``robot_jam_s`` longer and blocks the robot meanwhile. The job
  is delayed, not failed.
- **station timeout** (per station step): the step hangs and the station's watchdog aborts it after
  ``station_timeout_factor`` times the station's median duration. The job fails with a ``station timeout`` reason.
- **bad reading** (per job): the measurement is implausible. The job fails with a ``bad reading`` reason.
- **station down** (a window ``(station, start_s, end_s)`` on the lab clock): no step runs on the station in the
  window. A step under way is paused and resumes when the window ends; queued jobs wait. The jobs are delayed.

``forced`` names faults for particular job keys, whatever the probabilities say (for tests and demonstrations).

Example:
    >>> plan = FaultPlan(bad_reading_probability=0.1, station_down=[("workup", 3600.0, 7200.0)])
    >>> plan.station_down
    (('workup', 3600.0, 7200.0),)
    >>> FaultPlan.model_validate_json(plan.model_dump_json()) == plan
    True
    >>> FaultPlan().is_empty
    True
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["FaultKind", "FaultPlan", "InjectedFault"]

#: Faults that can be forced on a job key.
InjectedFault = Literal["robot_jam", "station_timeout", "bad_reading"]
#: Every kind a lab counts in ``metrics().n_faults``.
FaultKind = Literal[
    "robot_jam", "station_timeout", "bad_reading", "station_down", "ttl_exceeded", "consumable_exhausted"
]


class FaultPlan(BaseModel):
    """Probabilities and windows of the faults a ``SimLabDriver`` injects (all off by default).

    Times are seconds on the lab clock; probabilities lie in [0, 1].
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["fault_plan"] = "fault_plan"
    schema_version: int = 1
    robot_jam_probability: float = Field(default=0.0, ge=0.0, le=1.0, description="chance that one transfer jams")
    robot_jam_s: float = Field(default=1800.0, ge=0.0, description="extra seconds a jammed transfer takes")
    station_timeout_probability: float = Field(
        default=0.0, ge=0.0, le=1.0, description="chance that one station step hangs until its watchdog aborts it"
    )
    station_timeout_factor: float = Field(
        default=3.0, ge=1.0, description="a hung step is aborted after this many median durations of its station"
    )
    bad_reading_probability: float = Field(
        default=0.0, ge=0.0, le=1.0, description="chance that a job's measurement is implausible"
    )
    station_down: tuple[tuple[str, float, float], ...] = Field(
        default=(), description="(station, start_s, end_s) windows in which the station runs nothing"
    )
    forced: dict[str, InjectedFault] = Field(default_factory=dict, description="job key -> fault it always meets")

    @model_validator(mode="after")
    def _check_windows(self) -> FaultPlan:
        by_station: dict[str, list[tuple[float, float]]] = {}
        for station, start_s, end_s in self.station_down:
            if not start_s < end_s:
                raise ValueError(f"station_down window ({station!r}, {start_s}, {end_s}) needs start_s < end_s")
            by_station.setdefault(station, []).append((start_s, end_s))
        for station, windows in by_station.items():
            windows.sort()
            for (_, end_a), (start_b, _) in zip(windows, windows[1:], strict=False):
                if start_b < end_a:
                    raise ValueError(
                        f"station_down windows of {station!r} overlap ({start_b} < {end_a}); merge them into one"
                    )
        return self

    @property
    def is_empty(self) -> bool:
        """True when the plan injects nothing."""
        return self == FaultPlan()
