"""``DriverContract``: the conformance suite every instrument driver passes.

Subclass it in a test module and say how to build the driver; pytest collects the inherited tests::

    from instruments.testing import DriverContract

    class TestMyDriver(DriverContract):
        def driver_factory(self):
            return MyDriver(...)

The contract: the protocol's members; idempotent submit; status moving ``queued -> running -> done`` and never
back; results only for finished jobs; cancel; a declared ``SafetyEnvelope`` and an out-of-envelope job refused with
``EnvelopeViolation`` at submit, never run; a fault surfacing as a failed ``LabResult`` with a reason (not an
exception, not a hang); a JSON-able ``health()`` with ``is_ok``.

Hooks to override:

- ``driver_factory()`` (required): a fresh driver per test.
- ``make_job(key)``: a job the driver can run to completion (default: a one-parameter ``Conditions`` candidate with
  id ``f"contract-{key}"`` through the default steps).
- ``out_of_envelope_job(envelope)``: a job outside the driver's envelope. The default pushes the first bounded
  setting past its limit, or declares a forbidden hazard or an unknown reagent; it skips the test when the envelope
  refuses nothing (declare limits, or override this hook).
- ``faulty_driver_factory()``: a driver configured so that the next job fails (e.g. a SimLab with
  ``FaultPlan(bad_reading_probability=1.0)``); None (the default) skips the fault test.
- ``wait_until_complete(driver, handles)`` (async): advance or wait until the jobs are terminal. The default calls
  ``driver.run_until_complete`` when the driver is an ``instruments.SimulatedClock`` (simulated labs), else polls
  ``status`` every ``poll_interval_s`` seconds for at most ``timeout_s`` seconds (remote labs).
- ``advance(driver)`` (async): let a little time pass; ``run_until(now + sim_step_s)`` on a ``SimulatedClock``,
  else a ``poll_interval_s`` sleep.

Each test runs one ``asyncio.run`` so a driver holding a connection sees a single event loop; a driver with an
``aclose()`` coroutine is closed after the scenario. This module imports pytest; it is for test suites and is not
re-exported by ``instruments``.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest

from instruments.base import (
    TERMINAL_STATES,
    InstrumentDriver,
    JobHandle,
    LabJob,
    SimulatedClock,
)
from instruments.envelope import EnvelopeViolation, SafetyEnvelope
from vocabulary.domain import Conditions, InstrumentFault

_STATE_ORDER = {"queued": 0, "running": 1, "done": 2, "failed": 2, "cancelled": 2}

__all__ = ["DriverContract"]


class DriverContract:
    """Mixin of contract tests for an ``InstrumentDriver``; subclasses provide ``driver_factory``."""

    poll_interval_s: float = 0.05
    timeout_s: float = 60.0
    sim_step_s: float = 600.0

    # ------------------------------------------------------------------------------------------- hooks
    def driver_factory(self) -> InstrumentDriver:
        raise NotImplementedError("override driver_factory() to return a fresh driver for each contract test")

    def make_job(self, key: str) -> LabJob:
        return LabJob(job_key=key, candidate=Conditions(values={"x": float(len(key))}, id=f"contract-{key}"))

    async def wait_until_complete(self, driver: InstrumentDriver, handles: Sequence[JobHandle]) -> None:
        if isinstance(driver, SimulatedClock):
            driver.run_until_complete(handles)
            return
        deadline = time.monotonic() + self.timeout_s
        while True:
            states = [await driver.status(handle) for handle in handles]
            if all(state in TERMINAL_STATES for state in states):
                return
            if time.monotonic() > deadline:
                pytest.fail(f"jobs still {states} after {self.timeout_s} s; raise timeout_s or check the driver")
            await asyncio.sleep(self.poll_interval_s)

    def out_of_envelope_job(self, envelope: SafetyEnvelope) -> LabJob | None:
        base = self.make_job("outside-envelope").model_dump()
        parameters = dict(base["parameters"])
        for name, limit in sorted(envelope.parameters.items()):
            if limit.high is not None:
                parameters[name] = limit.high + max(1.0, abs(limit.high))
            elif limit.low is not None:
                parameters[name] = limit.low - max(1.0, abs(limit.low))
            elif limit.choices:
                parameters[name] = "not-" + "-".join(sorted(limit.choices))
            else:
                continue
            break
        else:
            if envelope.forbidden_hazards:
                parameters["hazards"] = [sorted(envelope.forbidden_hazards)[0]]
            elif envelope.allowed_reagents is not None:
                parameters["reagents"] = ["contract-unlisted-reagent"]
            elif envelope.max_job_duration_s is not None:
                parameters["ttl_s"] = 2.0 * envelope.max_job_duration_s
            else:
                return None
        return LabJob.model_validate({**base, "parameters": parameters})

    def faulty_driver_factory(self) -> InstrumentDriver | None:
        return None

    async def advance(self, driver: InstrumentDriver) -> None:
        if isinstance(driver, SimulatedClock):
            driver.run_until(driver.now + self.sim_step_s)
        else:
            await asyncio.sleep(self.poll_interval_s)

    @staticmethod
    async def envelope_of(driver: InstrumentDriver) -> SafetyEnvelope:
        """The driver's envelope, fetched without blocking when the driver can (``fetch_envelope``)."""
        fetch = getattr(driver, "fetch_envelope", None)
        return await fetch() if callable(fetch) else driver.envelope

    def run_scenario(
        self, scenario: Callable[[InstrumentDriver], Awaitable[Any]], driver: InstrumentDriver | None = None
    ) -> Any:
        """Build a driver (unless given) and run ``scenario(driver)`` in one event loop."""
        driver = self.driver_factory() if driver is None else driver

        async def run() -> Any:
            try:
                return await scenario(driver)
            finally:
                aclose = getattr(driver, "aclose", None)
                if callable(aclose):
                    await aclose()

        return asyncio.run(run())

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
            job = self.make_job("handle")
            handle = await driver.submit(job)
            assert handle.job_key == job.job_key
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

    def test_health_is_ok_and_json(self) -> None:
        async def scenario(driver: InstrumentDriver) -> None:
            health = await driver.health()
            assert health.get("is_ok") is True, f"health() of a fresh lab should say is_ok=True, got {health}"
            json.dumps(health)
            json.dumps(await driver.capabilities())

        self.run_scenario(scenario)

    def test_status_moves_forward_only(self) -> None:
        async def scenario(driver: InstrumentDriver) -> None:
            handle = await driver.submit(self.make_job("forward"))
            seen = [await driver.status(handle)]
            for _ in range(int(self.timeout_s / self.poll_interval_s)):
                if seen[-1] in TERMINAL_STATES:
                    break
                await self.advance(driver)
                state = await driver.status(handle)
                if state != seen[-1]:
                    seen.append(state)
            assert seen[-1] == "done", f"job never finished; states seen: {seen}"
            ranks = [_STATE_ORDER[state] for state in seen]
            assert ranks == sorted(ranks) and len(set(seen)) == len(seen), f"status went backwards: {seen}"

        self.run_scenario(scenario)

    def test_declares_a_safety_envelope(self) -> None:
        async def scenario(driver: InstrumentDriver) -> None:
            envelope = await self.envelope_of(driver)
            assert isinstance(envelope, SafetyEnvelope)
            assert envelope.check(self.make_job("inside")) == [], "make_job() must build a job inside the envelope"

        self.run_scenario(scenario)

    def test_out_of_envelope_job_is_refused_and_never_runs(self) -> None:
        async def scenario(driver: InstrumentDriver) -> None:
            envelope = await self.envelope_of(driver)
            job = self.out_of_envelope_job(envelope)
            if job is None:
                pytest.skip("the driver's envelope refuses nothing; declare limits or override out_of_envelope_job()")
            assert envelope.check(job), "out_of_envelope_job() returned a job inside the envelope"
            with pytest.raises(EnvelopeViolation) as refused:
                await driver.submit(job)
            assert refused.value.violations and all(isinstance(v, str) and v for v in refused.value.violations)
            with pytest.raises(InstrumentFault, match=re.escape(job.job_key)):
                await driver.status(JobHandle(job_key=job.job_key, driver=driver.name))  # it was never queued
            handle = await driver.submit(self.make_job("inside-envelope"))
            await self.wait_until_complete(driver, [handle])
            assert await driver.status(handle) == "done"

        self.run_scenario(scenario)

    def test_fault_surfaces_as_a_failed_result(self) -> None:
        driver = self.faulty_driver_factory()
        if driver is None:
            pytest.skip("override faulty_driver_factory() to return a driver whose next job fails")

        async def scenario(driver: InstrumentDriver) -> None:
            job = self.make_job("faulty")
            handle = await driver.submit(job)
            await self.wait_until_complete(driver, [handle])
            assert await driver.status(handle) == "failed"
            result = await driver.result(handle)
            assert result.status == "failed" and result.reason, f"a failed job must say why, got {result}"
            assert (result.job_key, result.candidate_id) == (job.job_key, job.candidate.id)

        self.run_scenario(scenario, driver)
