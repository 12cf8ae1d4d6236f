"""``BaseDriver``, the public driver kit: the frontend's bookkeeping (idempotent submit, status, cancel, result,
errors) over small backends of both shapes (``run`` one job at a time; ``start`` and ``poll``), the contract suite on
both, and the clock capabilities (``LabClock``, ``SimulatedClock``) checked by protocol, not by attribute name."""

from __future__ import annotations

import asyncio

import pytest

from instruments import (
    BaseDriver,
    BookEntry,
    EnvelopeViolation,
    InstrumentDriver,
    JobHandle,
    LabClock,
    LabJob,
    SafetyEnvelope,
    SimLabDriver,
    SimulatedClock,
)
from instruments.lab_service import LabService
from instruments.testing import DriverContract
from vocabulary.domain import Conditions, InstrumentFault, SetupError

ENVELOPE = SafetyEnvelope(name="bench", parameters={"x": (0.0, 100.0, "mL")})


def job(key: str, x: float = 2.0, **parameters) -> LabJob:
    return LabJob(job_key=key, candidate=Conditions(values={"x": x}, id=f"c-{key}"), parameters=parameters)


class BenchDriver(BaseDriver):
    """One job at a time; each job waits for ``gate`` (when set) between its two steps, then reads ``3 x``."""

    name = "bench"
    version = "1.2.3"

    def __init__(self, gated: bool = False) -> None:
        super().__init__(envelope=ENVELOPE)
        self.gate = asyncio.Event() if gated else None
        self.runs: list[str] = []

    async def validate(self, job: LabJob) -> None:
        if job.candidate.values["x"] == 13.0:
            raise SetupError("the bench refuses x = 13")

    async def run(self, entry: BookEntry) -> None:
        self.runs.append(entry.job.job_key)
        start = self.book.now()
        if self.gate is not None:
            await self.gate.wait()
        if entry.is_cancel_requested:
            return
        x = entry.job.candidate.values["x"]
        if x == 0.5:
            raise RuntimeError("the pipette jammed")
        self.finish(entry, value=3.0 * x, uncertainty=0.1, station_log=[("bench", start, self.book.now())])

    async def describe(self) -> dict:
        return {"stations": {"bench": 1}, "property": "x3"}

    async def diagnose(self) -> dict:
        return {"is_ok": not self.runs or self.runs[-1] != "broken", "n_runs": len(self.runs)}


class RemoteDriver(BaseDriver):
    """An instrument that runs jobs itself: ``start`` hands it over, every ``poll`` moves it one state on."""

    name = "remote"

    def __init__(self, fail_starts: int = 0, is_faulty: bool = False) -> None:
        super().__init__(envelope={"name": "remote bench", "forbidden_hazards": ["explosive"]})
        self.fail_starts, self.is_faulty = fail_starts, is_faulty
        self.n_started = 0
        self.stopped: list[str] = []

    async def start(self, entry: BookEntry) -> None:
        if self.fail_starts:
            self.fail_starts -= 1
            raise InstrumentFault("the remote bench did not answer; try again")
        self.n_started += 1
        entry.remote = {"polls": 0}

    async def poll(self, entry: BookEntry) -> None:
        entry.remote["polls"] += 1
        if entry.remote["polls"] == 1:
            self.mark_running(entry)
        elif entry.remote["polls"] >= 3 and self.is_faulty:
            self.finish(entry, reason="bad reading: the remote detector saturated")
        elif entry.remote["polls"] >= 3:
            self.finish(entry, value=float(entry.job.candidate.values["x"]), station_log=[("remote", 0.0, 0.0)])

    async def stop(self, entry: BookEntry) -> None:
        self.stopped.append(entry.job.job_key)


async def until_terminal(driver, handle, n_polls: int = 200) -> str:
    for _ in range(n_polls):
        state = await driver.status(handle)
        if state in ("done", "failed", "cancelled"):
            return state
        await asyncio.sleep(0)
    raise AssertionError(f"job {handle.job_key} still {state}")


def test_submit_is_idempotent_on_the_job_key_and_runs_once():
    async def scenario():
        lab = BenchDriver()
        first = await lab.submit(job("k1"))
        again = await lab.submit(job("k1"))
        assert again == first == JobHandle(job_key="k1", driver="bench")
        assert await until_terminal(lab, first) == "done"
        assert await lab.submit(job("k1")) == first  # after it finished, too
        await asyncio.sleep(0)
        await lab.aclose()
        return lab.runs, await lab.result(first)

    runs, result = asyncio.run(scenario())
    assert runs == ["k1"]
    assert (result.value, result.uncertainty, result.candidate_id) == (6.0, 0.1, "c-k1")
    assert [station for station, _, _ in result.station_log] == ["bench"]


def test_a_key_reused_for_a_different_job_is_refused():
    async def scenario():
        lab = BenchDriver()
        await lab.submit(job("k1", x=1.0))
        with pytest.raises(SetupError, match="'k1' was already submitted with a different job"):
            await lab.submit(job("k1", x=2.0))
        await lab.aclose()

    asyncio.run(scenario())


def test_status_moves_queued_running_done_and_result_only_when_done():
    async def scenario():
        lab = BenchDriver(gated=True)
        handle = await lab.submit(job("k1"))
        states = [await lab.status(handle)]
        await asyncio.sleep(0)  # the worker takes the job and waits at the gate
        states.append(await lab.status(handle))
        with pytest.raises(InstrumentFault, match="'k1' is running .* no result yet"):
            await lab.result(handle)
        lab.gate.set()
        states.append(await until_terminal(lab, handle))
        await lab.aclose()
        return states

    assert asyncio.run(scenario()) == ["queued", "running", "done"]


def test_jobs_run_one_at_a_time_by_priority_then_submission():
    async def scenario():
        lab = BenchDriver()
        handles = [await lab.submit(job("late", priority=5)), await lab.submit(job("a")),
                   await lab.submit(job("b")), await lab.submit(job("urgent", priority=-1))]
        for handle in handles:
            await until_terminal(lab, handle)
        await lab.aclose()
        return lab.runs

    assert asyncio.run(scenario()) == ["urgent", "a", "b", "late"]


def test_cancel_queued_running_and_finished_jobs():
    async def scenario():
        lab = BenchDriver(gated=True)
        running = await lab.submit(job("running"))
        queued = await lab.submit(job("queued"))
        await asyncio.sleep(0)
        assert (await lab.status(running), await lab.status(queued)) == ("running", "queued")
        await lab.cancel(queued)
        await lab.cancel(running)
        assert (await lab.status(running), await lab.status(queued)) == ("cancelled", "cancelled")
        lab.gate.set()
        done = await lab.submit(job("done"))
        assert await until_terminal(lab, done) == "done"
        before = await lab.result(done)
        await lab.cancel(done)
        await lab.cancel(done)  # twice is safe
        with pytest.raises(InstrumentFault, match="'running' was cancelled"):
            await lab.result(running)
        assert await lab.submit(job("queued")) == queued  # not revived
        state = await lab.status(queued)
        await lab.aclose()
        return lab.runs, before, await lab.status(done), await lab.result(done), state

    runs, before, state, after, queued_state = asyncio.run(scenario())
    assert runs == ["running", "done"]  # the cancelled queued job never ran
    assert state == "done" and after == before and queued_state == "cancelled"


def test_unknown_and_foreign_handles_raise_instrument_fault():
    async def scenario():
        lab = BenchDriver()
        for verb in (lab.status, lab.result, lab.cancel):
            with pytest.raises(InstrumentFault, match="'ghost' is unknown to this bench lab.*resubmit it"):
                await verb(JobHandle(job_key="ghost", driver="bench"))
        handle = await lab.submit(job("k1"))
        with pytest.raises(InstrumentFault, match="belongs to driver 'other', not 'bench'"):
            await lab.status(handle.model_copy(update={"driver": "other"}))
        await lab.aclose()

    asyncio.run(scenario())


def test_refused_jobs_are_never_queued():
    async def scenario():
        lab = BenchDriver()
        with pytest.raises(EnvelopeViolation, match="outside"):
            await lab.submit(job("too-much", x=500.0))
        with pytest.raises(SetupError, match="refuses x = 13"):
            await lab.submit(job("thirteen", x=13.0))
        for key in ("too-much", "thirteen"):
            with pytest.raises(InstrumentFault, match=key):
                await lab.status(JobHandle(job_key=key, driver="bench"))
        await lab.aclose()
        return lab.runs

    assert asyncio.run(scenario()) == []


def test_an_exception_in_run_fails_that_job_and_the_next_one_runs():
    async def scenario():
        lab = BenchDriver()
        jammed, fine = await lab.submit(job("jam", x=0.5)), await lab.submit(job("fine"))
        states = [await until_terminal(lab, jammed), await until_terminal(lab, fine)]
        result = await lab.result(jammed)
        await lab.aclose()
        return states, result

    states, result = asyncio.run(scenario())
    assert states == ["failed", "done"]
    assert result.status == "failed" and result.reason == "RuntimeError: the pipette jammed"


def test_capabilities_and_health_merge_the_backend_fields():
    async def scenario():
        lab = BenchDriver()
        return await lab.capabilities(), await lab.health()

    capabilities, health = asyncio.run(scenario())
    assert capabilities == {"driver": "bench", "version": "1.2.3", "stations": {"bench": 1}, "property": "x3"}
    assert health["is_ok"] is True and health["n_runs"] == 0 and health["driver"] == "bench"
    assert health["n_jobs"] == {"queued": 0, "running": 0, "done": 0, "failed": 0, "cancelled": 0}


def test_a_start_that_fails_leaves_no_job_behind_and_a_retry_submits_it():
    async def scenario():
        lab = RemoteDriver(fail_starts=1)
        with pytest.raises(InstrumentFault, match="did not answer"):
            await lab.submit(job("k1"))
        with pytest.raises(InstrumentFault, match="unknown"):
            await lab.status(JobHandle(job_key="k1", driver="remote"))
        handle = await lab.submit(job("k1"))
        assert await lab.submit(job("k1")) == handle
        states = [await lab.status(handle) for _ in range(4)]
        result = await lab.result(handle)
        return lab.n_started, states, lab.book.entries["k1"].remote["polls"], result

    n_started, states, n_polls, result = asyncio.run(scenario())
    assert n_started == 1
    assert states == ["running", "running", "done", "done"]
    assert n_polls == 3  # a terminal job is not polled again, by status or by result
    assert result.value == 2.0


def test_cancel_tells_the_instrument_through_stop():
    async def scenario():
        lab = RemoteDriver()
        handle = await lab.submit(job("k1"))
        await lab.cancel(handle)
        await lab.cancel(handle)
        return lab.stopped, await lab.status(handle)

    assert asyncio.run(scenario()) == (["k1"], "cancelled")


def test_a_driver_without_a_name_or_instrument_logic_is_a_setup_error():
    class Nameless(BaseDriver):
        async def run(self, entry):
            pass

    class Empty(BaseDriver):
        name = "empty"

    with pytest.raises(SetupError, match="needs a class attribute name"):
        Nameless()
    with pytest.raises(SetupError, match="override run\\(entry\\).*or start\\(entry\\) and poll\\(entry\\)"):
        Empty()


def test_kit_drivers_are_instrument_drivers_without_a_clock():
    for lab in (BenchDriver(), RemoteDriver()):
        assert isinstance(lab, InstrumentDriver)
        assert not isinstance(lab, LabClock) and not isinstance(lab, SimulatedClock)


def test_clock_capabilities_are_declared_by_protocol():
    sim = SimLabDriver(oracle=lambda c: 1.0)
    assert isinstance(sim, SimulatedClock) and isinstance(sim, LabClock)

    class ReportsTime:
        now = 12.0

    class HalfSimulated:  # run_until alone does not make a simulated clock
        now = 0.0

        def run_until(self, time_s):
            return time_s

    assert isinstance(ReportsTime(), LabClock) and not isinstance(ReportsTime(), SimulatedClock)
    assert not isinstance(HalfSimulated(), SimulatedClock)


def test_http_driver_reports_a_clock_but_is_not_simulated():
    from instruments import HttpDriver

    lab = HttpDriver("http://127.0.0.1:9")
    assert isinstance(lab, LabClock) and not isinstance(lab, SimulatedClock)


def test_the_lab_service_reads_the_clock_capabilities_once():
    simulated = LabService(SimLabDriver(oracle=lambda c: 1.0))
    assert simulated.is_simulated and simulated.now_s == 0.0
    bench = LabService(BenchDriver())
    assert not bench.is_simulated and bench.now_s is None


class TestBenchDriverContract(DriverContract):
    poll_interval_s = 0.001

    def driver_factory(self):
        return BenchDriver()

    def faulty_driver_factory(self):
        return BenchDriver()

    def make_job(self, key):
        return job(key, x=0.5 if key == "faulty" else float(len(key)))


class TestRemoteDriverContract(DriverContract):
    poll_interval_s = 0.001

    def driver_factory(self):
        return RemoteDriver()

    def faulty_driver_factory(self):
        return RemoteDriver(is_faulty=True)
