"""``Lab``: the campaign's frontend over its instrument driver (PyLabRobot's frontend over a backend).

It owns the driver, the event-loop thread the driver's coroutines run on, the lab clock and the handles of jobs
submitted in this process. What the driver can do is declared by the protocols it implements and checked once, when
the lab is built: a ``SimulatedClock`` (the simulated lab: its clock is advanced, its jobs are kept in this process
and replayed on resume) or a ``LabClock`` (a lab that only reports its time); any other driver is polled and its
time is the wall clock since the campaign started. A manual lab (``instruments.manual``: a person at the bench)
is never waited on: its results come from the ledger, and ``observe`` raises ``WaitingForResults`` while jobs are
open and nothing new was entered.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
from collections.abc import Callable, Iterable
from typing import Any

from instruments import TERMINAL_STATES, LabClock, SimulatedClock
from instruments.manual import is_manual
from orchestrator.loop.aio import LoopThread

__all__ = ["Lab", "TERMINAL_STATES", "WaitingForResults"]


class WaitingForResults(Exception):  # noqa: N818 - a pause, not an error
    """A manual lab's jobs wait on a person: the run ends here and ``run`` (``--resume``) continues once results are
    entered. Raised by ``observe`` before it records anything more, so the checkpoint stays before ``observe``."""

    def __init__(self, job_keys: list[str]):
        super().__init__(f"waiting for the results of {len(job_keys)} job(s) entered by hand")
        self.job_keys = list(job_keys)


async def _poll(driver, handles, *, wait_all: bool, interval_s: float) -> None:
    while True:
        states = [await driver.status(h) for h in handles]
        finished = [s in TERMINAL_STATES for s in states]
        if all(finished) or (not wait_all and any(finished)):
            return
        await asyncio.sleep(interval_s)


async def _submit_all(driver, jobs) -> list:
    return [await driver.submit(job) for job in jobs]


async def _finished(driver, handles) -> list[tuple[str, object]]:
    out = []
    for handle in handles:
        status = await driver.status(handle)
        is_answered = status in TERMINAL_STATES and status != "cancelled"
        out.append((status, await driver.result(handle) if is_answered else None))
    return out


class Lab:
    """The driver of a campaign, its clock and its job handles.

    ``wait`` is the spec's ``lab.wait``: ``"all"`` (a round waits for every open job) or ``"any"`` (for the first).
    """

    def __init__(self, driver: Any, *, wait: str = "all", loop: LoopThread | None = None):
        self.driver = driver
        self.wait_all = wait == "all"
        self.loop = loop or LoopThread()
        self.is_simulated = isinstance(driver, SimulatedClock)
        """The lab runs in this process on a simulated clock (declared by the driver's protocol)."""
        self.has_clock = self.is_simulated or isinstance(driver, LabClock)
        self.is_manual = is_manual(driver)
        """A person runs the jobs; their results are entered into the ledger (``orchestrator.loop.manual_results``)."""
        self.envelope = getattr(driver, "envelope", None)
        """The driver's safety envelope (an ``InstrumentDriver`` member; None where a driver declares none)."""
        self.handles: dict[str, Any] = {}
        """Handles of the open jobs submitted in this process (a simulated lab's only: a remote lab's jobs are
        resubmitted each round, idempotently on the key, in case the lab restarted)."""

    @property
    def name(self) -> str:
        return self.driver.name

    def run(self, coroutine):
        """Run one of the driver's coroutines on the lab's event loop."""
        return self.loop.run(coroutine)

    def capabilities(self) -> dict[str, Any]:
        return self.run(self.driver.capabilities())

    # ------------------------------------------------------------------------------------------------ the clock
    def now(self, started_at: _dt.datetime | None) -> float:
        """The lab clock, seconds: simulated for a simulated lab, the lab's own for one that reports it, else wall
        time since ``started_at`` (the campaign's start)."""
        if self.has_clock:
            return float(self.driver.now)
        if started_at is None:
            return 0.0
        if started_at.tzinfo is None:
            started_at = started_at.replace(tzinfo=_dt.UTC)
        return (_dt.datetime.now(_dt.UTC) - started_at).total_seconds()

    def run_until(self, time_s: float) -> None:
        """Let a simulated lab's clock reach ``time_s`` (a retry's back-off); a real lab's time passes by itself."""
        if self.is_simulated:
            self.driver.run_until(time_s)

    def wait(self, handles: list) -> None:
        """Advance a simulated lab's clock, or poll a real driver, until one (or every) job has finished."""
        if not handles:
            return
        if self.is_simulated:
            (self.driver.run_until_complete if self.wait_all else self.driver.run_until_any_complete)(handles)
        else:
            self.run(_poll(self.driver, handles, wait_all=self.wait_all, interval_s=0.2))

    # ------------------------------------------------------------------------------------------------ jobs
    def submit(self, job):
        """Submit one job (idempotent on its key) and keep its handle when the lab runs in this process."""
        handle = self.run(self.driver.submit(job))
        if self.is_simulated:
            self.handles[handle.job_key] = handle
        return handle

    def open_handles(self, job_keys: list[str], make_job: Callable[[str], Any]) -> list:
        """Handles of the open jobs ``job_keys``: those kept, the others resubmitted (idempotently)."""
        handles = [self.handles.get(key) for key in job_keys]
        missing = [i for i, handle in enumerate(handles) if handle is None]
        if missing:
            submitted = self.run(_submit_all(self.driver, [make_job(job_keys[i]) for i in missing]))
            for i, handle in zip(missing, submitted, strict=True):
                handles[i] = handle
                if self.is_simulated:
                    self.handles[handle.job_key] = handle
        return handles

    def finished(self, handles: list) -> list[tuple[str, object]]:
        """(status, result) of each job, in order: the result of a finished job, None for one still running or
        cancelled. One trip to the driver's event loop for the whole round."""
        return self.run(_finished(self.driver, handles)) if handles else []

    def cancel(self, handle) -> None:
        self.run(self.driver.cancel(handle))

    def forget(self, job_keys: Iterable[str]) -> None:
        """Drop the handles of recorded jobs: the handles held are the open jobs', not every job's of a campaign."""
        for key in job_keys:
            self.handles.pop(key, None)

    def replay(self, events: Iterable, make_job: Callable[[str], Any]) -> None:
        """Bring a freshly built simulated lab to the state ``events`` (the ledger's ``Dispatched`` and
        ``Observed``, in order) record, by replaying its interactions.

        The simulated lab is deterministic, so submitting the same jobs at the same lab times and waiting in the same
        rounds reproduces every queue, every station and the clock exactly. Real labs keep their own state.
        """
        if not self.is_simulated:
            return
        open_handles: dict[str, object] = {}
        last_round = None
        for event in events:
            p = event.payload
            if event.type == "Dispatched":
                self.driver.run_until(p["sim_time_s"])
                open_handles[p["job_key"]] = self.submit(make_job(p["job_key"]))
            elif event.type == "Observed" and p["provenance"] == "lab":
                if p["observe_iteration"] != last_round:
                    self.wait(list(open_handles.values()))
                    last_round = p["observe_iteration"]
                open_handles.pop(p["job_key"], None)

    def close(self) -> None:
        self.loop.close()
