"""SimLab for walk-away operation: consumables, priorities, injected faults, stations down, time-to-live, envelope."""

from __future__ import annotations

import asyncio

import pytest

from instruments import (
    EnvelopeViolation,
    FaultPlan,
    FunctionOracle,
    LabJob,
    SafetyEnvelope,
    SimLabDriver,
)
from instruments.simlab_records import TRANSFER_ROBOT
from vocabulary.domain import Conditions, SetupError

ONE_EACH = {"synthesis": 1, "workup": 1, "characterisation": 1}
FIXED = {"synthesis": (1000.0, 0.0), "workup": (100.0, 0.0), "characterisation": (10.0, 0.0)}


def run(coro):
    return asyncio.run(coro)


def make_job(key: str, x: float = 1.0, **parameters) -> LabJob:
    return LabJob(job_key=key, candidate=Conditions(values={"x": x}, id=f"c-{key}"), parameters=parameters)


def lab(**kwargs) -> SimLabDriver:
    defaults = dict(
        oracle=FunctionOracle(lambda c: c.values["x"], property="x"), stations=ONE_EACH, durations_s=FIXED,
        transfer_s=0.0,
    )
    return SimLabDriver(**{**defaults, **kwargs})


def submit(driver: SimLabDriver, *jobs: LabJob):
    return [run(driver.submit(job)) for job in jobs]


def outcome(driver: SimLabDriver, handle):
    return run(driver.status(handle)), run(driver.result(handle))


def synthesis_start(driver: SimLabDriver, handle) -> float:
    return run(driver.result(handle)).station_log[0][1]


# ----------------------------------------------------------------------------------------------- consumables
def test_a_consumable_runs_out_and_restock_brings_it_back():
    sim = lab(consumables={"pd_catalyst": 2}, consumable_use={"synthesis": {"pd_catalyst": 1}})
    handles = submit(sim, make_job("a"), make_job("b"), make_job("c"))
    sim.run_until_complete(handles)
    assert [run(sim.status(h)) for h in handles] == ["done", "done", "failed"]
    starved = run(sim.result(handles[2]))
    assert starved.reason.startswith(
        "consumable exhausted: 'pd_catalyst' has 0 units left and step 'synthesis' needs 1"
    )
    assert "restock()" in starved.reason
    assert starved.station_log == [] and starved.value is None
    assert sim.stock == {"pd_catalyst": 0.0}
    assert sim.metrics().n_faults["consumable_exhausted"] == 1

    again = submit(sim, make_job("c-after-restock"))  # a new key: the failed one stays failed
    sim.restock()
    sim.run_until_complete(again)
    assert run(sim.status(again[0])) == "done"
    assert sim.stock == {"pd_catalyst": 1.0}
    assert run(sim.health())["consumables"] == {"pd_catalyst": 1.0}


def test_a_job_can_declare_its_own_consumables():
    sim = lab(consumables={"ligand": 3.0})
    big, small = submit(sim, make_job("big", consumables={"ligand": 5}), make_job("small", consumables={"ligand": 2}))
    sim.run_until_complete([big, small])
    assert "'ligand' has 3 units left and step 'synthesis' needs 5" in run(sim.result(big)).reason
    assert run(sim.status(small)) == "done" and sim.stock == {"ligand": 1.0}
    assert sim.restock({"ligand": 4}) == {"ligand": 5.0}


def test_consumable_mistakes_are_setup_errors():
    with pytest.raises(SetupError, match="not stocked"):
        lab(consumable_use={"synthesis": {"pd_catalyst": 1}})
    with pytest.raises(SetupError, match="does not stock"):
        run(lab(consumables={"ligand": 1}).submit(make_job("j", consumables={"pd_catalyst": 1})))
    with pytest.raises(SetupError, match="not stocked by this lab"):
        lab(consumables={"ligand": 1}).restock({"pd_catalyst": 1})


# ----------------------------------------------------------------------------------------------- priorities
def test_a_high_priority_job_submitted_later_jumps_the_queue():
    sim = lab()
    first, second, third = submit(sim, make_job("a"), make_job("b"), make_job("c"))
    sim.run_until(10.0)
    (urgent,) = submit(sim, make_job("urgent", priority=-1))
    sim.run_until_complete([first, second, third, urgent])
    starts = {h.job_key: synthesis_start(sim, h) for h in (first, second, third, urgent)}
    assert starts == {"a": 0.0, "urgent": 1000.0, "b": 2000.0, "c": 3000.0}  # equal priorities stay first come


def test_priority_also_orders_later_stations():
    sim = lab(stations={"synthesis": 2, "workup": 1, "characterisation": 1},
              durations_s={**FIXED, "workup": (5000.0, 0.0)})
    occupant = LabJob(job_key="occupant", candidate=Conditions(values={"x": 0.0}, id="o"), steps=("workup",))
    low, high, busy = submit(sim, make_job("low", priority=5), make_job("high", priority=1), occupant)
    sim.run_until_complete([low, high, busy])
    workup = {h.job_key: run(sim.result(h)).station_log[1][1] for h in (low, high)}
    assert workup == {"high": 5000.0, "low": 10000.0}  # low asked first (same instant) but waits


def test_priority_must_be_a_number():
    with pytest.raises(SetupError, match="priority='urgent'"):
        run(lab().submit(make_job("j", priority="urgent")))


# ----------------------------------------------------------------------------------------------- faults
def test_a_robot_jam_delays_the_job_but_it_completes():
    sim = lab(transfer_s=5.0, faults=FaultPlan(robot_jam_probability=1.0, robot_jam_s=500.0))
    (handle,) = submit(sim, make_job("jammed"))
    sim.run_until_complete([handle])
    state, result = outcome(sim, handle)
    assert state == "done" and result.status == "ok"
    assert result.station_log[1] == ("workup", 1505.0, 1605.0)
    metrics = sim.metrics()
    assert metrics.n_faults["robot_jam"] == 2
    assert ("robot_jam", "jammed", TRANSFER_ROBOT, 1000.0) in metrics.faults


def test_a_station_timeout_fails_the_job_and_frees_the_station():
    sim = lab(faults=FaultPlan(forced={"hung": "station_timeout"}, station_timeout_factor=3.0))
    hung, behind = submit(sim, make_job("hung"), make_job("behind"))
    sim.run_until_complete([hung, behind])
    state, result = outcome(sim, hung)
    assert state == "failed"
    assert result.reason.startswith("station timeout: 'synthesis' did not finish its step within 3000 s")
    assert result.station_log == [("synthesis", 0.0, 3000.0)]
    assert synthesis_start(sim, behind) == 3000.0 and run(sim.status(behind)) == "done"
    assert sim.metrics().n_faults["station_timeout"] == 1


def test_a_bad_reading_fails_the_job_after_it_went_through_the_lab():
    sim = lab(faults=FaultPlan(forced={"noisy": "bad_reading"}))
    noisy, fine = submit(sim, make_job("noisy"), make_job("fine"))
    sim.run_until_complete([noisy, fine])
    state, result = outcome(sim, noisy)
    assert state == "failed" and result.value is None
    assert result.reason.startswith("bad reading: the detector on 'characterisation'")
    assert [row[0] for row in result.station_log] == ["synthesis", "workup", "characterisation"]
    assert outcome(sim, fine)[1].status == "ok"
    assert result.to_observation("simlab").status == "failed"


def test_faults_are_drawn_per_job_key_and_seed():
    def failed_keys(seed: int, reverse: bool) -> set[str]:
        sim = SimLabDriver(oracle=lambda c: 1.0, seed=seed, stations={"characterisation": 500}, transfer_s=0.0,
                           faults=FaultPlan(bad_reading_probability=0.3))
        jobs = [LabJob(job_key=f"k{i}", candidate=Conditions(values={}, id="c"), steps=("characterisation",))
                for i in range(400)]
        handles = submit(sim, *(reversed(jobs) if reverse else jobs))
        sim.run_until_complete(handles)
        return {h.job_key for h in handles if run(sim.status(h)) == "failed"}

    forward = failed_keys(3, reverse=False)
    assert forward == failed_keys(3, reverse=True)
    assert forward != failed_keys(4, reverse=False)
    assert 0.22 < len(forward) / 400 < 0.38


def test_a_station_down_window_pauses_work_and_delays_queued_jobs():
    sim = lab(stations={"synthesis": 2, "workup": 1, "characterisation": 1},
              faults=FaultPlan(station_down=[("synthesis", 500.0, 2000.0)]))
    (early,) = submit(sim, make_job("early"))
    sim.run_until(600.0)
    (late,) = submit(sim, make_job("late"))  # a free slot, but the station is down
    sim.run_until(1000.0)
    assert run(sim.health())["stations_down"] == ["synthesis"]
    assert run(sim.status(early)) == "running" and run(sim.status(late)) == "queued"
    sim.run_until_complete([early, late])
    early_result, late_result = run(sim.result(early)), run(sim.result(late))
    assert early_result.status == late_result.status == "ok"
    assert early_result.station_log[:2] == [("synthesis", 0.0, 500.0), ("synthesis", 2000.0, 2500.0)]
    assert late_result.station_log[0] == ("synthesis", 2000.0, 3000.0)
    assert run(sim.health())["stations_down"] == []
    metrics = sim.metrics()
    assert metrics.n_faults["station_down"] == 2
    assert metrics.queue_wait_s["synthesis"] == pytest.approx((0.0 + 1400.0) / 2)
    # utilisation counts work only, not the paused time
    assert sum(e - s for k, r, s, e in metrics.gantt if r == "synthesis") == 500.0 + 500.0 + 1000.0


def test_cancel_during_a_down_window_frees_the_job():
    sim = lab(faults=FaultPlan(station_down=[("synthesis", 500.0, 2000.0)]))
    paused, waiting = submit(sim, make_job("paused"), make_job("waiting"))
    sim.run_until(800.0)
    run(sim.cancel(paused))
    sim.run_until_complete([paused, waiting])
    assert run(sim.status(paused)) == "cancelled"
    assert synthesis_start(sim, waiting) == 2000.0


def test_windows_that_touch_keep_the_station_down_throughout():
    sim = lab(faults=FaultPlan(station_down=[("synthesis", 100.0, 300.0), ("synthesis", 300.0, 900.0)]))
    (handle,) = submit(sim, make_job("a"))
    sim.run_until_complete([handle])
    assert run(sim.result(handle)).station_log[:2] == [("synthesis", 0.0, 100.0), ("synthesis", 900.0, 1800.0)]


def test_fault_windows_must_name_stations():
    with pytest.raises(SetupError, match="not stations"):
        lab(faults={"station_down": [("furnace", 0.0, 1.0)]})


# ----------------------------------------------------------------------------------------------- time-to-live
def test_ttl_fails_a_stuck_job_and_frees_its_station():
    sim = lab()
    first, short, third = submit(sim, make_job("first"), make_job("short", ttl_s=1500), make_job("third"))
    sim.run_until_complete([first, short, third])
    state, result = outcome(sim, short)
    assert state == "failed"
    assert result.reason.startswith(
        "ttl exceeded: job 'short' was not finished 1500 s after submission "
        "(submitted at t=0 s, stopped at t=1500 s on 'synthesis')"
    )
    assert result.station_log == [("synthesis", 1000.0, 1500.0)]
    assert synthesis_start(sim, third) == 1500.0
    assert sim.metrics().n_faults["ttl_exceeded"] == 1


def test_default_ttl_applies_to_jobs_without_their_own():
    sim = lab(default_ttl_s=500.0)
    running, waiting, patient = submit(sim, make_job("running", ttl_s=5000), make_job("waiting"),
                                       make_job("patient", ttl_s=1e6))
    sim.run_until_complete([running, waiting, patient])
    assert "stopped at t=500 s waiting for 'synthesis'" in run(sim.result(waiting)).reason
    assert run(sim.status(running)) == run(sim.status(patient)) == "done"
    sim.run_until(1e7)  # the watchdogs of finished jobs change nothing
    assert run(sim.status(running)) == "done"


def test_bad_ttl_is_a_setup_error():
    with pytest.raises(SetupError, match="ttl_s=0"):
        run(lab().submit(make_job("j", ttl_s=0)))
    with pytest.raises(SetupError, match="default_ttl_s"):
        lab(default_ttl_s=-1.0)


# ----------------------------------------------------------------------------------------------- envelope
def test_submit_refuses_an_out_of_envelope_job_and_queues_nothing():
    sim = lab(envelope={"name": "bench", "parameters": {"x": (0, 10)}})
    with pytest.raises(EnvelopeViolation, match=r"x=50 is outside the bench envelope 0\.\.10"):
        run(sim.submit(make_job("hot", x=50.0)))
    assert sum(run(sim.health())["n_jobs"].values()) == 0
    assert run(sim.capabilities())["envelope"]["parameters"]["x"]["high"] == 10.0
    assert isinstance(sim.envelope, SafetyEnvelope)


def test_bad_envelope_or_fault_plan_is_a_setup_error():
    with pytest.raises(SetupError, match="envelope="):
        lab(envelope={"parameters": {"x": (10, 0)}})
    with pytest.raises(SetupError, match="faults="):
        lab(faults={"bad_reading_probability": 2.0})


def test_replaying_a_faulty_job_on_a_fresh_lab_reproduces_it():
    def replay():
        sim = lab(transfer_s=30.0, faults=FaultPlan(robot_jam_probability=0.5, bad_reading_probability=0.5), seed=9)
        handles = submit(sim, *(make_job(f"r{i}") for i in range(6)))
        sim.run_until_complete(handles)
        return [run(sim.result(h)) for h in handles], sim.metrics().n_faults

    assert replay() == replay()
