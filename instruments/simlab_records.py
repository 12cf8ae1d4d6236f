"""What the simulated lab keeps of its jobs and reports of its load: a job's record while the lab holds it, the
trace of a retired one, ``LabMetrics``, and each job's own random streams (``job_rng``).

Records are ``SimLabDriver``'s bookkeeping; ``job_rng`` and ``LabMetrics`` are public, for drivers that want the
same determinism and the same load figures (the plate-reader notebook's driver uses both).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
import simpy
from pydantic import BaseModel, ConfigDict, Field

from instruments.base import JobState, LabJob, LabResult
from instruments.faults import FaultKind

__all__ = ["FAULT_KINDS", "TRANSFER_ROBOT", "JobFailed", "JobRecord", "LabMetrics", "RetiredJob",
           "job_rng"]

#: Resource name of the transfer robot in metrics.
TRANSFER_ROBOT = "transfer_robot"
#: Fault kinds counted in ``LabMetrics.n_faults``.
FAULT_KINDS: tuple[FaultKind, ...] = (
    "robot_jam", "station_timeout", "bad_reading", "station_down", "ttl_exceeded", "consumable_exhausted"
)


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


class JobFailed(Exception):
    """Ends a job process early with a failed result (a fault, an exhausted consumable)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class JobRecord:
    """A job the lab still holds: where it is, what it has done, and its result once it has one."""

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
class RetiredJob:
    """What the lab keeps of a job whose collected record it let go: enough for ``submit`` and ``status``."""

    fingerprint: int
    state: JobState

