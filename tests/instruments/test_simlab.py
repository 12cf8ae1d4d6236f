"""SimLabDriver: the driver contract plus queueing, noise, determinism, failures and metrics."""

from __future__ import annotations

import asyncio
import math
import time

import numpy as np
import pytest

from instruments import (
    FaultPlan,
    FunctionOracle,
    JobHandle,
    LabJob,
    SafetyEnvelope,
    SimLabDriver,
    TableOracle,
)
from instruments.simlab_records import TRANSFER_ROBOT
from instruments.testing import DriverContract
from vocabulary.domain import Conditions, InstrumentFault, SetupError

ONE_EACH = {"synthesis": 1, "workup": 1, "characterisation": 1}
FIXED_DURATIONS = {"synthesis": (1000.0, 0.0), "workup": (100.0, 0.0), "characterisation": (10.0, 0.0)}


def make_job(key: str, x: float = 1.0, candidate_id: str | None = None, **kwargs) -> LabJob:
    return LabJob(job_key=key, candidate=Conditions(values={"x": x}, id=candidate_id or f"c-{key}"), **kwargs)


def x_oracle() -> FunctionOracle:
    return FunctionOracle(lambda c: c.values["x"], property="x")


def run(coro):
    return asyncio.run(coro)


def submit_all(lab: SimLabDriver, jobs: list[LabJob]) -> list[JobHandle]:
    return [run(lab.submit(job)) for job in jobs]


def results(lab: SimLabDriver, handles: list[JobHandle]):
    return {h.job_key: run(lab.result(h)) for h in handles}


# ----------------------------------------------------------------------------------------------- contract
class TestSimLabDriver(DriverContract):
    def driver_factory(self) -> SimLabDriver:
        envelope = SafetyEnvelope(name="bench", parameters={"x": (0.0, 100.0)}, forbidden_hazards={"pyrophoric"})
        return SimLabDriver(oracle=x_oracle(), noise_sd=0.1, seed=7, envelope=envelope)

    def faulty_driver_factory(self) -> SimLabDriver:
        return SimLabDriver(oracle=x_oracle(), seed=7, faults=FaultPlan(bad_reading_probability=1.0))


class TestSimLabDriverResumedSingleSlots(DriverContract):
    def driver_factory(self) -> SimLabDriver:
        envelope = SafetyEnvelope(allowed_reagents={"CCO"}, max_job_duration_s=86_400.0)
        return SimLabDriver(
            oracle=x_oracle(), stations=ONE_EACH, transfer_s=0.0, start_time_s=1.0e6, envelope=envelope
        )

    def faulty_driver_factory(self) -> SimLabDriver:
        # the single synthesis slot is timed out by its watchdog
        return SimLabDriver(
            oracle=x_oracle(), stations=ONE_EACH, start_time_s=1.0e6,
            faults=FaultPlan(station_timeout_probability=1.0),
        )


# ----------------------------------------------------------------------------------------------- queueing
def test_capacity_one_makes_second_job_wait_for_the_first():
    lab = SimLabDriver(oracle=x_oracle(), stations=ONE_EACH, durations_s=FIXED_DURATIONS, transfer_s=5.0)
    first, second = submit_all(lab, [make_job("a"), make_job("b")])
    lab.run_until(1.0)
    assert run(lab.status(first)) == "running"
    assert run(lab.status(second)) == "queued"
    assert run(lab.health())["stations"]["synthesis"] == {"capacity": 1, "n_busy": 1, "n_waiting": 1}
    lab.run_until_complete([first, second])
    log_a, log_b = (run(lab.result(h)).station_log for h in (first, second))
    assert log_a[0] == ("synthesis", 0.0, 1000.0)
    assert log_b[0] == ("synthesis", 1000.0, 2000.0)
    for (station_a, _, end_a), (station_b, start_b, _) in zip(log_a, log_b, strict=True):
        assert station_a == station_b and start_b >= end_a
    assert log_a[1] == ("workup", 1005.0, 1105.0)  # transfer robot time between stations


def test_capacity_two_runs_two_jobs_side_by_side():
    lab = SimLabDriver(oracle=x_oracle(), durations_s=FIXED_DURATIONS)
    handles = submit_all(lab, [make_job("a"), make_job("b"), make_job("c")])
    lab.run_until_complete(handles)
    starts = [run(lab.result(h)).station_log[0][1] for h in handles]
    assert starts == [0.0, 0.0, 1000.0]


def test_durations_follow_the_configured_lognormal():
    lab = SimLabDriver(oracle=x_oracle(), stations={"synthesis": 50}, durations_s={"synthesis": (3600.0, 0.5)})
    handles = submit_all(lab, [make_job(f"j{i}", steps=("synthesis",)) for i in range(400)])
    lab.run_until_complete(handles)
    durations = np.array([end - start for r in results(lab, handles).values() for _, start, end in r.station_log])
    assert abs(np.median(durations) / 3600.0 - 1.0) < 0.1
    assert abs(np.std(np.log(durations)) - 0.5) < 0.05


# ----------------------------------------------------------------------------------------------- noise
def test_noise_sd_is_respected():
    lab = SimLabDriver(oracle=lambda c: 10.0, noise_sd=0.5, seed=3, stations={"characterisation": 100})
    jobs = [make_job(f"n{i}", steps=("characterisation",), candidate_id="same") for i in range(1000)]
    handles = submit_all(lab, jobs)
    lab.run_until_complete(handles)
    values = np.array([r.value for r in results(lab, handles).values()])
    assert abs(values.mean() - 10.0) < 0.06  # ~4 standard errors
    assert 0.45 < values.std(ddof=1) < 0.55
    assert {r.uncertainty for r in results(lab, handles).values()} == {0.5}


def test_zero_noise_returns_the_truth_exactly(sim_lab):
    exact = SimLabDriver(oracle=x_oracle(), seed=sim_lab.seed)
    handle = run(exact.submit(make_job("exact", x=3.25)))
    exact.run_until_complete([handle])
    assert run(exact.result(handle)).value == 3.25


# ----------------------------------------------------------------------------------------------- determinism
def test_numbers_depend_on_job_key_not_submission_order():
    jobs = [make_job(f"k{i}", x=float(i)) for i in range(6)]
    forward = SimLabDriver(oracle=x_oracle(), noise_sd=1.0, seed=11)
    backward = SimLabDriver(oracle=x_oracle(), noise_sd=1.0, seed=11)
    handles_f = submit_all(forward, jobs)
    handles_b = submit_all(backward, list(reversed(jobs)))
    forward.run_until_complete(handles_f)
    backward.run_until_complete(handles_b)
    rf, rb = results(forward, handles_f), results(backward, handles_b)
    for key in rf:
        assert rf[key].value == rb[key].value
        assert [end - start for _, start, end in rf[key].station_log] == pytest.approx(
            [end - start for _, start, end in rb[key].station_log], abs=1e-6
        )
    assert rf["k0"].station_log != rb["k0"].station_log  # queueing did differ


def test_resubmission_to_a_fresh_driver_reproduces_the_result():
    def run_alone(seed: int) -> object:
        lab = SimLabDriver(oracle=x_oracle(), noise_sd=1.0, seed=seed, start_time_s=86_400.0)
        handle = run(lab.submit(make_job("resumed", x=2.0)))
        lab.run_until_complete([handle])
        return run(lab.result(handle))

    first, again, other_seed = run_alone(5), run_alone(5), run_alone(6)
    assert first == again
    assert first.submitted_s == 86_400.0 and first.completed_s > 86_400.0
    assert other_seed.value != first.value


def test_double_submit_runs_the_job_once(sim_lab):
    job = make_job("once")
    handle = run(sim_lab.submit(job))
    assert run(sim_lab.submit(job)) == handle
    sim_lab.run_until_complete([handle])
    run(sim_lab.submit(job))
    sim_lab.run_until_complete([handle])
    rows = [row for row in sim_lab.metrics().gantt if row[0] == "once" and row[1] != TRANSFER_ROBOT]
    assert [row[1] for row in rows] == ["synthesis", "workup", "characterisation"]
    assert run(sim_lab.health())["n_jobs"]["done"] == 1


def test_reusing_a_key_for_a_different_job_is_refused(sim_lab):
    run(sim_lab.submit(make_job("k", x=1.0)))
    with pytest.raises(SetupError, match="different job"):
        run(sim_lab.submit(make_job("k", x=2.0)))


# ----------------------------------------------------------------------------------------------- clock
def test_a_month_of_lab_time_runs_without_real_sleeping(monkeypatch):
    def no_sleep(*args, **kwargs):
        raise AssertionError("the simulated lab must not sleep")

    monkeypatch.setattr(time, "sleep", no_sleep)
    monkeypatch.setattr(asyncio, "sleep", no_sleep)
    lab = SimLabDriver(oracle=x_oracle(), noise_sd=0.1)
    handles = submit_all(lab, [make_job(f"m{i}") for i in range(360)])  # 360 x ~4 h synthesis on 2 slots
    now = lab.run_until_complete(handles)
    assert now > 28 * 86_400.0
    assert now == lab.now == max(r.completed_s for r in results(lab, handles).values())
    assert run(lab.health())["n_jobs"]["done"] == 360


def test_run_until_any_complete_stops_at_the_first_finish():
    lab = SimLabDriver(oracle=x_oracle(), stations=ONE_EACH, durations_s=FIXED_DURATIONS, transfer_s=0.0)
    first, second = submit_all(lab, [make_job("a"), make_job("b")])
    assert lab.run_until_any_complete([first, second]) == 1110.0
    assert run(lab.status(first)) == "done"
    assert run(lab.status(second)) == "running"
    assert lab.run_until_complete([first]) == 1110.0  # already finished: the clock stays


def test_cancel_running_job_frees_its_station():
    lab = SimLabDriver(oracle=x_oracle(), stations=ONE_EACH, durations_s=FIXED_DURATIONS)
    first, second = submit_all(lab, [make_job("a"), make_job("b")])
    lab.run_until(10.0)
    run(lab.cancel(first))
    lab.run_until_complete([first, second])
    assert run(lab.status(first)) == "cancelled"
    assert run(lab.result(second)).station_log[0] == ("synthesis", 10.0, 1010.0)
    assert ("a", "synthesis", 0.0, 10.0) in lab.metrics().gantt


# ----------------------------------------------------------------------------------------------- failures
def test_oracle_failures_become_failed_results_with_the_reason():
    table = TableOracle({"c-known": 1.0, "c-blank": math.nan}, property="yield")
    lab = SimLabDriver(oracle=table)
    handles = submit_all(lab, [make_job("known"), make_job("missing"), make_job("blank")])
    lab.run_until_complete(handles)
    assert [run(lab.status(h)) for h in handles] == ["done", "failed", "failed"]
    out = results(lab, handles)
    assert out["known"].value == 1.0
    assert out["missing"].status == "failed" and out["missing"].value is None
    assert "no row for candidate id 'c-missing'" in out["missing"].reason
    assert "NaN" in out["blank"].reason
    assert out["missing"].station_log  # it went through the lab before the measurement failed


@pytest.mark.parametrize(
    ("oracle", "expected"),
    [
        (lambda c: {}[c.id], "no value for candidate id 'c-j'"),
        (lambda c: 1 / 0, "ZeroDivisionError"),
        (lambda c: math.inf, "returned inf"),
    ],
)
def test_any_oracle_error_fails_the_job_without_stopping_the_lab(oracle, expected):
    lab = SimLabDriver(oracle=oracle)
    handle = run(lab.submit(make_job("j")))
    lab.run_until_complete([handle])
    result = run(lab.result(handle))
    assert result.status == "failed" and expected in result.reason
    assert result.to_observation("simlab").status == "failed"


def test_result_of_an_unfinished_job_says_how_to_get_one(sim_lab):
    handle = run(sim_lab.submit(make_job("wip")))
    with pytest.raises(InstrumentFault, match="run_until_complete"):
        run(sim_lab.result(handle))


def test_handle_of_another_driver_is_refused(sim_lab):
    with pytest.raises(InstrumentFault, match="belongs to driver 'other'"):
        run(sim_lab.status(JobHandle(job_key="x", driver="other")))


# ----------------------------------------------------------------------------------------------- setup
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"stations": {"synthesis": 0}}, "capacity"),
        ({"stations": {"xrd": 1}}, "no duration"),
        ({"stations": {TRANSFER_ROBOT: 1}}, "reserved"),
        ({"durations_s": {"synthesis": (-1.0, 0.1)}}, "median_s > 0"),
        ({"noise_sd": -1.0}, "noise_sd"),
        ({"transfer_s": math.nan}, "transfer_s"),
        ({"oracle": 3.0}, "callable"),
    ],
)
def test_bad_configuration_is_a_setup_error(kwargs, match):
    with pytest.raises(SetupError, match=match):
        SimLabDriver(**{"oracle": x_oracle(), **kwargs})


def test_step_without_station_is_a_setup_error(sim_lab):
    with pytest.raises(SetupError, match="not stations"):
        run(sim_lab.submit(make_job("j", steps=("synthesis", "xrd"))))


def test_capabilities_describe_the_lab(sim_lab):
    caps = run(sim_lab.capabilities())
    assert caps["stations"] == {"synthesis": 2, "workup": 1, "characterisation": 1}
    assert caps["property"] == "x" and caps["noise_sd"] == 0.1 and caps["is_simulated"] is True


# ----------------------------------------------------------------------------------------------- metrics
def test_metrics_utilisation_waits_and_gantt():
    lab = SimLabDriver(oracle=x_oracle(), durations_s=FIXED_DURATIONS, transfer_s=5.0, start_time_s=100.0)
    single = run(lab.submit(make_job("solo")))
    lab.run_until_complete([single])
    metrics = lab.metrics()
    assert metrics.elapsed_s == 1120.0
    assert metrics.utilisation["synthesis"] == pytest.approx(1000.0 / (2 * 1120.0))
    assert metrics.utilisation["workup"] == pytest.approx(100.0 / 1120.0)
    assert metrics.mean_queue_wait_s == 0.0
    assert len(metrics.gantt) == 5  # three stations and two transfers

    handles = submit_all(lab, [make_job(f"busy{i}") for i in range(8)])
    lab.run_until_complete(handles)
    metrics = lab.metrics()
    assert all(0.0 < u <= 1.0 for u in metrics.utilisation.values())
    assert metrics.mean_queue_wait_s > 0.0 and metrics.queue_wait_s["synthesis"] > 0.0
    assert len(metrics.gantt) == 9 * 5
    assert metrics.n_jobs["done"] == 9
    assert [row[2] for row in metrics.gantt] == sorted(row[2] for row in metrics.gantt)


def test_cancel_job_waiting_in_a_station_queue():
    lab = SimLabDriver(oracle=x_oracle(), stations=ONE_EACH, durations_s=FIXED_DURATIONS, transfer_s=0.0)
    first, waiting, last = submit_all(lab, [make_job("a"), make_job("b"), make_job("c")])
    lab.run_until(10.0)
    assert run(lab.status(waiting)) == "queued"
    run(lab.cancel(waiting))
    lab.run_until_complete([first, waiting, last])
    assert run(lab.status(waiting)) == "cancelled"
    assert run(lab.result(last)).station_log[0] == ("synthesis", 1000.0, 2000.0)  # c moved up
    assert not [row for row in lab.metrics().gantt if row[0] == "b"]
    assert lab.metrics().n_jobs == {"queued": 0, "running": 0, "done": 2, "failed": 0, "cancelled": 1}


# ----------------------------------------------------------------------------------------------- bounded memory
def _plates(lab: SimLabDriver, n_plates: int, plate: int, *, collect: bool = True) -> list[JobHandle]:
    """Run ``n_plates`` plates of jobs one after another, collecting each plate's results as a campaign does."""
    handles = []
    for p in range(n_plates):
        batch = submit_all(lab, [make_job(f"run/p{p}-{i}", x=float(i)) for i in range(plate)])
        lab.run_until_complete(batch)
        if collect:
            results(lab, batch)
        handles += batch
    return handles


def test_a_long_run_keeps_only_the_latest_collected_records():
    lab = SimLabDriver(oracle=x_oracle(), noise_sd=0.1, n_results_kept=10)
    handles = _plates(lab, 12, 5)
    kept = {row[0] for row in lab.metrics().gantt}
    assert kept == {h.job_key for h in handles[-10:]}  # 60 jobs run, the records of 10 kept
    assert lab.metrics().n_jobs["done"] == 60 and run(lab.health())["n_jobs"]["done"] == 60
    assert "n_jobs=60" in repr(lab)


def test_a_retired_job_still_answers_submit_and_status_but_not_result():
    lab = SimLabDriver(oracle=x_oracle(), n_results_kept=2)
    first, *_ = _plates(lab, 3, 2)
    clock = lab.now
    assert run(lab.submit(make_job("run/p0-0", x=0.0))) == first  # idempotent: the same handle, nothing runs
    assert lab.run_until_complete([first]) == clock and lab.metrics().n_jobs["done"] == 6
    assert run(lab.status(first)) == "done"
    with pytest.raises(InstrumentFault, match="n_results_kept"):
        run(lab.result(first))
    with pytest.raises(SetupError, match="different job"):
        run(lab.submit(make_job("run/p0-0", x=5.0)))


def test_results_nobody_collected_are_never_retired():
    lab = SimLabDriver(oracle=x_oracle(), n_results_kept=1)
    handles = _plates(lab, 4, 3, collect=False)
    assert [r.value for r in results(lab, handles).values()] == [0.0, 1.0, 2.0] * 4


def test_retiring_records_changes_no_figure_but_the_gantt():
    everything = SimLabDriver(oracle=x_oracle(), noise_sd=0.1, seed=3, n_results_kept=10_000)
    bounded = SimLabDriver(oracle=x_oracle(), noise_sd=0.1, seed=3, n_results_kept=3)
    for lab in (everything, bounded):
        _plates(lab, 8, 4)
    full, kept = everything.metrics(), bounded.metrics()
    assert kept.elapsed_s == full.elapsed_s and kept.n_jobs == full.n_jobs
    assert kept.utilisation == pytest.approx(full.utilisation)
    assert kept.queue_wait_s == pytest.approx(full.queue_wait_s)
    assert kept.mean_queue_wait_s == pytest.approx(full.mean_queue_wait_s)
    assert set(kept.gantt) < set(full.gantt)


def test_n_results_kept_must_be_a_count():
    with pytest.raises(SetupError, match="n_results_kept"):
        SimLabDriver(oracle=x_oracle(), n_results_kept=-1)
