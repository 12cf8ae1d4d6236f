"""A lab where a person runs the experiments: jobs go to the bench and wait until someone enters their results.

``[lab] driver = "manual"``. The driver holds nothing of its own: a job it accepts is "running" (at the bench)
until the campaign's ledger holds a result entered for it (``closedloop results add``, ``Campaign.add_results``, the
dashboard's form, MCP's ``add_results``), so a restart loses nothing. The engine reads those entries; the driver
only declares that it is manual (``is_manual``), so a campaign on it returns ``waiting_for_results`` instead of
blocking while jobs are open.

Example:
    >>> import asyncio
    >>> from vocabulary.domain import Conditions
    >>> lab = ManualDriver()
    >>> job = LabJob(job_key="c/k1", candidate=Conditions(values={"T": 25.0}, id="k1"))
    >>> handle = asyncio.run(lab.submit(job))
    >>> asyncio.run(lab.status(handle)), is_manual(lab), is_manual(object())
    ('running', True, False)
"""

from __future__ import annotations

from typing import Any

from instruments.base import JobHandle, JobState, LabJob, LabResult
from instruments.envelope import EnvelopeViolation, SafetyEnvelope
from vocabulary.domain import InstrumentFault, SetupError

__all__ = ["ManualDriver", "is_manual"]


def is_manual(driver: Any) -> bool:
    """Whether ``driver`` hands its jobs to a person (declared by the driver's ``is_manual``, never sniffed)."""
    return getattr(driver, "is_manual", False) is True


class ManualDriver:
    """The bench: every job is at a person's hands until its result is entered into the ledger.

    Args:
        max_parallel_jobs: jobs a person runs at once (the campaign's default batch capacity).
        envelope: what the bench agrees to run; default: anything.
        steps: the stations a job names (informational: the person follows their own protocol).
    """

    name = "manual"
    version = "1"
    is_manual = True
    """Results come from people through the ledger, not from ``result()``."""

    def __init__(self, *, max_parallel_jobs: int = 4, envelope: SafetyEnvelope | dict | None = None,
                 steps: tuple[str, ...] = ("synthesis", "workup", "characterisation")) -> None:
        if int(max_parallel_jobs) < 1:
            raise SetupError(f"manual lab: {max_parallel_jobs=} must be at least 1 (the jobs a person runs at once)")
        self.max_parallel_jobs = int(max_parallel_jobs)
        self.envelope = envelope if isinstance(envelope, SafetyEnvelope) else SafetyEnvelope.model_validate(
            {"name": "the bench", **(envelope or {})})
        self.steps = tuple(steps)

    async def capabilities(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "is_manual": True, "steps": list(self.steps),
                "max_parallel_jobs": self.max_parallel_jobs, "property": "entered by hand"}

    async def submit(self, job: LabJob) -> JobHandle:
        """Hand the job to the bench (idempotent: the handle depends on the key alone); checked against the envelope."""
        violations = list(self.envelope.check(job))
        if violations:
            raise EnvelopeViolation.for_job(job.job_key, violations, self.envelope.name)
        return JobHandle(job_key=job.job_key, driver=self.name)

    async def status(self, handle: JobHandle) -> JobState:
        """Always ``running``: whether a person has finished is in the ledger, which the campaign reads."""
        return "running"

    async def result(self, handle: JobHandle) -> LabResult:
        raise InstrumentFault(f"job {handle.job_key!r} is at the bench: its result is entered by a person "
                              "(closedloop results add), not read from the manual driver")

    async def cancel(self, handle: JobHandle) -> None:
        return None  # tell the person; a result entered later is kept as an off-plan measurement

    async def health(self) -> dict[str, Any]:
        return {"is_ok": True, "driver": self.name, "note": "a person runs the jobs"}
