"""``DriverContract``: the conformance suite every instrument driver passes.

Subclass it in a test module and say how to build the driver; pytest collects the inherited tests::

    from instruments.testing import DriverContract

    class TestMyDriver(DriverContract):
        def driver_factory(self):
            return MyDriver(...)

Hooks to override:

- ``driver_factory()`` (required): a fresh driver per test.
- ``make_job(key)``: a job the driver can run to completion (default: a one-parameter ``Conditions`` candidate with
  id ``f"contract-{key}"`` through the default steps).
- ``wait_until_complete(driver, handles)`` (async): advance or wait until the jobs are terminal. The default calls
  ``driver.run_until_complete`` when the driver has it (simulated labs), else polls ``status`` every
  ``poll_interval_s`` seconds for at most ``timeout_s`` seconds (remote labs).

Each test runs one ``asyncio.run`` so a driver holding a connection sees a single event loop. This module imports
pytest; it is for test suites and is not re-exported by ``instruments``.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest

from instruments.base import TERMINAL_STATES, InstrumentDriver, JobHandle, LabJob
from orchestrator.domain import Conditions, InstrumentFault

__all__ = ["DriverContract"]


class DriverContract:
    """Mixin of contract tests for an ``InstrumentDriver``; subclasses provide ``driver_factory``."""

    poll_interval_s: float = 0.05
    timeout_s: float = 60.0

    # ------------------------------------------------------------------------------------------- hooks
    def driver_factory(self) -> InstrumentDriver:
        raise NotImplementedError("override driver_factory() to return a fresh driver for each contract test")

    def make_job(self, key: str) -> LabJob:
        return LabJob(job_key=key, candidate=Conditions(values={"x": float(len(key))}, id=f"contract-{key}"))

    async def wait_until_complete(self, driver: InstrumentDriver, handles: Sequence[JobHandle]) -> None:
        run_until_complete = getattr(driver, "run_until_complete", None)
        if callable(run_until_complete):
            run_until_complete(handles)
            return
        deadline = time.monotonic() + self.timeout_s
        while True:
            states = [await driver.status(handle) for handle in handles]
            if all(state in TERMINAL_STATES for state in states):
                return
            if time.monotonic() > deadline:
                pytest.fail(f"jobs still {states} after {self.timeout_s} s; raise timeout_s or check the driver")
            await asyncio.sleep(self.poll_interval_s)

    def run_scenario(self, scenario: Callable[[InstrumentDriver], Awaitable[Any]]) -> Any:
        """Build a driver and run ``scenario(driver)`` in one event loop."""
        driver = self.driver_factory()
        return asyncio.run(scenario(driver))

    # ------------------------------------------------------------------------------------------- contract
    def test_implements_protocol(self) -> None:
        driver = self.driver_factory()
        assert isinstance(driver, InstrumentDriver)
        assert isinstance(driver.name, str) and driver.name
        assert isinstance(driver.version, str) and driver.version

    def test_capabilities_and_health_are_dicts(self) -> None:
        async def scenario(driver: InstrumentDriver) -> None:
            assert isinstance(await driver.capabilities(), dict)
            health = await driver.health()
            assert isinstance(health, dict) and health

        self.run_scenario(scenario)

    def test_submit_returns_handle_for_this_driver(self) -> None:
        async def scenario(driver: InstrumentDriver) -> None:
            handle = await driver.submit(self.make_job("handle"))
            assert handle.job_key == "handle"
            assert handle.driver == driver.name
            assert await driver.status(handle) in ("queued", "running")

        self.run_scenario(scenario)

    def test_submit_is_idempotent_on_job_key(self) -> None:
        async def scenario(driver: InstrumentDriver) -> None:
            twice, once = self.make_job("twice"), self.make_job("once")
            first = await driver.submit(twice)
            again = await driver.submit(twice)
            single = await driver.submit(once)
            assert again == first
            await self.wait_until_complete(driver, [first, single])
            assert await driver.status(again) == "done"
            result_twice = await driver.result(first)
            assert await driver.result(again) == result_twice
            # a job that ran twice would log its stations twice
            assert len(result_twice.station_log) == len((await driver.result(single)).station_log)

        self.run_scenario(scenario)

    def test_status_reaches_done_with_a_result(self) -> None:
        async def scenario(driver: InstrumentDriver) -> None:
            job = self.make_job("done")
            handle = await driver.submit(job)
            await self.wait_until_complete(driver, [handle])
            assert await driver.status(handle) == "done"
            result = await driver.result(handle)
            assert result.job_key == job.job_key
            assert result.candidate_id == job.candidate.id
            assert result.status == "ok" and math.isfinite(result.value)
            assert result.completed_s >= result.submitted_s

        self.run_scenario(scenario)

    def test_result_before_completion_raises(self) -> None:
        async def scenario(driver: InstrumentDriver) -> None:
            handle = await driver.submit(self.make_job("early"))
            with pytest.raises(InstrumentFault, match="early"):
                await driver.result(handle)

        self.run_scenario(scenario)

    def test_cancel_queued_job(self) -> None:
        async def scenario(driver: InstrumentDriver) -> None:
            kept = await driver.submit(self.make_job("kept"))
            dropped = await driver.submit(self.make_job("dropped"))
            await driver.cancel(dropped)
            assert await driver.status(dropped) == "cancelled"
            await self.wait_until_complete(driver, [kept, dropped])
            assert await driver.status(dropped) == "cancelled"
            assert await driver.status(kept) == "done"
            with pytest.raises(InstrumentFault):
                await driver.result(dropped)
            assert await driver.submit(self.make_job("dropped")) == dropped  # idempotent: not revived
            assert await driver.status(dropped) == "cancelled"

        self.run_scenario(scenario)

    def test_cancel_finished_job_keeps_its_result(self) -> None:
        async def scenario(driver: InstrumentDriver) -> None:
            handle = await driver.submit(self.make_job("finished"))
            await self.wait_until_complete(driver, [handle])
            before = await driver.result(handle)
            await driver.cancel(handle)
            assert await driver.status(handle) == "done"
            assert await driver.result(handle) == before

        self.run_scenario(scenario)

    def test_unknown_handle_raises(self) -> None:
        async def scenario(driver: InstrumentDriver) -> None:
            ghost = JobHandle(job_key="never-submitted", driver=driver.name)
            with pytest.raises(InstrumentFault, match="never-submitted"):
                await driver.status(ghost)
            with pytest.raises(InstrumentFault, match="never-submitted"):
                await driver.result(ghost)

        self.run_scenario(scenario)
