"""Executors: order, equality with serial evaluation, per-candidate timeouts and crashes, on processes and Ray."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import pytest

from simulators.base import BaseSimulator
from simulators.executor import Executor, SerialExecutor, make_executor
from simulators.executor_batch import (
    TIMEOUT_REASON_PREFIX,
    WORKER_LOST_PREFIX,
    is_transient_failure,
)
from simulators.executor_process import LocalProcessExecutor
from simulators.executor_ray import RayExecutor
from vocabulary.domain import (
    ConditionSpace,
    Material,
    Observation,
    Parameter,
    SetupError,
    SimulationFailed,
)

SPACE = ConditionSpace(parameters=(Parameter(name="x", kind="integer", low=0, high=1000),))
HANG, CRASH, SEGFAULT, INVALID, SPAWN_AND_HANG = 999, 666, 111, 404, 777


def conditions(*xs: int):
    return [SPACE.parse({"x": x}) for x in xs]


class ProbeSimulator(BaseSimulator):
    """Doubles x. Special values hang, exit, segfault, fail, or start a child process and hang."""

    name, version, fidelity = "probe", "1", 0
    implemented_properties = ("double", "omp_num_threads")
    applies_to = frozenset({"conditions"})

    def __init__(self, pid_file: str | None = None) -> None:
        self.pid_file = pid_file
        super().__init__({"factor": 2})

    def cost_model(self, candidate):
        return 0.25

    def calculate(self, candidate):
        x = candidate.values["x"]
        if x == HANG:
            time.sleep(600)
        elif x == CRASH:
            os._exit(3)
        elif x == SEGFAULT:
            os.kill(os.getpid(), signal.SIGSEGV)
        elif x == INVALID:
            raise SimulationFailed("invalid geometry")
        elif x == SPAWN_AND_HANG:
            child = subprocess.Popen(["sleep", "600"])
            Path(self.pid_file).write_text(str(child.pid))
            time.sleep(600)
        return {"double": 2.0 * x, "omp_num_threads": float(os.environ.get("OMP_NUM_THREADS", "-1"))}


@pytest.fixture(scope="module")
def local_executor():
    with LocalProcessExecutor(max_workers=2) as executor:
        yield executor


def test_processes_return_in_order_and_equal_serial(local_executor):
    batch = conditions(5, 1, INVALID, 3, 8, 2, 5)
    expected = SerialExecutor().map_evaluate(ProbeSimulator(), batch)
    assert local_executor.map_evaluate(ProbeSimulator(), batch, timeout_s=None) == expected
    assert [o.candidate_id for o in expected] == [c.id for c in batch]
    assert expected[2].status == "failed" and expected[2].reason == "invalid geometry"


def test_chunks_return_in_order_and_equal_serial():
    batch = conditions(*range(10))
    with LocalProcessExecutor(max_workers=2, chunk_size=4) as executor:
        assert executor.map_evaluate(ProbeSimulator(), batch, timeout_s=30) == ProbeSimulator().evaluate(batch)


def test_a_hung_candidate_times_out_alone_and_its_worker_is_replaced(local_executor):
    batch = conditions(1, HANG, 2, 3)
    observations = local_executor.map_evaluate(ProbeSimulator(), batch, timeout_s=0.5)
    late = observations[1]
    assert late.status == "failed" and late.reason.startswith(f"{TIMEOUT_REASON_PREFIX} 0.5 s"), late.reason
    assert is_transient_failure(late) and late.cost_s == 0.5
    assert (late.source, late.source_version, late.parameters) == ("probe", "1", {"factor": 2})
    others = [observations[i] for i in (0, 2, 3)]
    assert others == ProbeSimulator().evaluate([batch[i] for i in (0, 2, 3)])
    assert local_executor.n_workers <= 2
    assert local_executor.map_evaluate(ProbeSimulator(), conditions(4), timeout_s=0.5)[0].status == "ok"


def test_a_timeout_in_a_chunk_fails_only_the_late_candidate():
    batch = conditions(1, 2, HANG, 3, 4, 5)
    with LocalProcessExecutor(max_workers=2, chunk_size=3) as executor:
        observations = executor.map_evaluate(ProbeSimulator(), batch, timeout_s=0.5)
    assert [o.status for o in observations] == ["ok", "ok", "failed", "ok", "ok", "ok"]
    assert observations[2].reason.startswith(TIMEOUT_REASON_PREFIX)


@pytest.mark.parametrize(("x", "death"), [(CRASH, "exited with code 3"), (SEGFAULT, "killed by SIGSEGV")])
def test_a_crashing_candidate_fails_alone_with_the_reason(local_executor, x, death):
    batch = conditions(1, x, 2)
    observations = local_executor.map_evaluate(ProbeSimulator(), batch, timeout_s=None)
    assert [o.status for o in observations] == ["ok", "failed", "ok"]
    reason = observations[1].reason
    assert reason.startswith(WORKER_LOST_PREFIX) and death in reason, reason
    assert is_transient_failure(observations[1]) and observations[1].cost_s == 0.25


def test_a_crash_in_a_chunk_fails_only_the_crashing_candidate():
    with LocalProcessExecutor(max_workers=1, chunk_size=4) as executor:
        observations = executor.map_evaluate(ProbeSimulator(), conditions(1, 2, CRASH, 3), timeout_s=None)
    assert [o.status for o in observations] == ["ok", "ok", "failed", "ok"]


def test_workers_run_single_threaded_whatever_the_parent_says(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    with LocalProcessExecutor(max_workers=1) as executor:
        [obs] = executor.map_evaluate(ProbeSimulator(), conditions(1), timeout_s=None)
    assert obs.properties["omp_num_threads"] == 1.0


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_a_timeout_also_kills_programs_the_simulator_started(tmp_path, local_executor):
    pid_file = tmp_path / "child.pid"
    [obs] = local_executor.map_evaluate(ProbeSimulator(str(pid_file)), conditions(SPAWN_AND_HANG), timeout_s=2.0)
    assert obs.reason.startswith(TIMEOUT_REASON_PREFIX)
    pid = int(pid_file.read_text())
    for _ in range(100):  # the orphan is reaped by init; a zombie counts as dead
        if _is_dead(pid):
            break
        time.sleep(0.05)
    assert _is_dead(pid), f"the simulator's child process {pid} outlived the timeout"


def _is_dead(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def test_setup_errors_are_raised_before_anything_runs(local_executor):
    for bad in (conditions(1)[0], "x=1"):
        with pytest.raises(SetupError, match="sequence of candidates"):
            local_executor.map_evaluate(ProbeSimulator(), bad, timeout_s=None)
    with pytest.raises(SetupError, match="applies to"):
        local_executor.map_evaluate(ProbeSimulator(), [Material.parse("NaCl")], timeout_s=None)
    for timeout_s in (0, -1.0, float("nan"), "5"):
        with pytest.raises(SetupError, match="timeout_s"):
            local_executor.map_evaluate(ProbeSimulator(), conditions(1), timeout_s=timeout_s)
    assert local_executor.map_evaluate(ProbeSimulator(), [], timeout_s=None) == []


def test_a_simulator_that_does_not_pickle_is_a_setup_error(local_executor):
    simulator = ProbeSimulator()
    simulator.lock = threading.Lock()
    with pytest.raises(SetupError, match="cannot be pickled"):
        local_executor.map_evaluate(simulator, conditions(1), timeout_s=None)


def test_a_simulator_the_worker_cannot_import_is_a_setup_error(local_executor):
    module = types.ModuleType("closedloop_test_phantom")  # exists in this process only
    phantom = type("PhantomSimulator", (ProbeSimulator,), {"__module__": module.__name__})
    module.PhantomSimulator = phantom
    sys.modules[module.__name__] = module
    try:
        with pytest.raises(SetupError, match="could not unpickle"):
            local_executor.map_evaluate(phantom(), conditions(1, 2), timeout_s=None)
    finally:
        del sys.modules[module.__name__]
    assert local_executor.map_evaluate(ProbeSimulator(), conditions(1), timeout_s=None)[0].status == "ok"


def test_serial_executor_is_simulator_evaluate():
    batch = conditions(1, INVALID, 2)
    assert SerialExecutor().map_evaluate(ProbeSimulator(), batch, timeout_s=10) == ProbeSimulator().evaluate(batch)


def test_make_executor_builds_each_kind_and_names_the_choices():
    assert isinstance(make_executor("serial"), SerialExecutor)
    process = make_executor("process", max_workers=3, chunk_size=2)
    assert isinstance(process, LocalProcessExecutor) and (process.max_workers, process.chunk_size) == (3, 2)
    assert isinstance(make_executor("process").max_workers, int)
    for executor in (make_executor("serial"), process):
        assert isinstance(executor, Executor)
    with pytest.raises(SetupError, match="'process', 'ray', 'serial'"):
        make_executor("dask")
    with pytest.raises(SetupError, match="do not fit"):
        make_executor("serial", max_workers=2)
    with pytest.raises(SetupError, match="max_workers"):
        make_executor("process", max_workers=0)


def test_close_stops_the_workers_and_the_executor_stays_usable():
    executor = LocalProcessExecutor(max_workers=2)
    executor.map_evaluate(ProbeSimulator(), conditions(1, 2), timeout_s=None)
    processes = [w.process for w in executor._workers]
    executor.close()
    executor.close()
    assert executor.n_workers == 0 and all(p.poll() is not None for p in processes)
    assert executor.map_evaluate(ProbeSimulator(), conditions(3), timeout_s=None)[0].properties["double"] == 6.0
    executor.close()


def test_the_executor_pickles_the_simulator_it_is_given(local_executor):
    # a changed simulator between calls must reach the workers, not a stale copy
    first, second = ProbeSimulator(), ProbeSimulator()
    second.version = "2"
    assert local_executor.map_evaluate(first, conditions(1), timeout_s=None)[0].source_version == "1"
    assert local_executor.map_evaluate(second, conditions(1), timeout_s=None)[0].source_version == "2"
    assert pickle.loads(pickle.dumps(second)).version == "2"


# ----------------------------------------------------------------------------------------------------- ray
@pytest.fixture(scope="module")
def ray_session():
    ray = pytest.importorskip("ray")
    import cloudpickle

    # Ray workers cannot import this test module by name, so its simulators travel by value
    cloudpickle.register_pickle_by_value(sys.modules[ProbeSimulator.__module__])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    yield ray
    ray.shutdown()
    cloudpickle.unregister_pickle_by_value(sys.modules[ProbeSimulator.__module__])


@pytest.mark.ray
def test_ray_returns_in_order_and_equals_serial(ray_session):
    batch = conditions(5, 1, INVALID, 3, 8, 2)
    expected = SerialExecutor().map_evaluate(ProbeSimulator(), batch)
    with RayExecutor() as executor:
        assert executor.map_evaluate(ProbeSimulator(), batch, timeout_s=None) == expected
    with RayExecutor(chunk_size=4) as executor:
        assert executor.map_evaluate(ProbeSimulator(), batch, timeout_s=60) == expected
    assert ray_session.is_initialized(), "an executor must not shut down a Ray it did not start"


@pytest.mark.ray
def test_ray_times_out_a_hung_candidate_and_fails_a_crash_alone(ray_session):
    batch = conditions(1, HANG, 2, CRASH, 3)
    with RayExecutor() as executor:
        observations = executor.map_evaluate(ProbeSimulator(), batch, timeout_s=3.0)
    assert [o.status for o in observations] == ["ok", "failed", "ok", "failed", "ok"], [o.reason for o in observations]
    assert observations[1].reason.startswith(f"{TIMEOUT_REASON_PREFIX} 3 s"), observations[1].reason
    assert observations[3].reason.startswith(WORKER_LOST_PREFIX), observations[3].reason
    assert all(is_transient_failure(observations[i]) for i in (1, 3))
    assert [observations[i] for i in (0, 2, 4)] == ProbeSimulator().evaluate(conditions(1, 2, 3))


def test_ray_executor_checks_its_options():
    pytest.importorskip("ray")
    with pytest.raises(SetupError, match="num_cpus"):
        RayExecutor(num_cpus=0)
    assert isinstance(make_executor("ray", num_cpus=1), RayExecutor)


def test_observation_reasons_written_by_executors_are_transient():
    def failed(reason):
        return Observation(candidate_id="c", source="s", status="failed", reason=reason)

    assert is_transient_failure(failed("timeout after 2 s (the worker was killed)"))
    assert is_transient_failure(failed("worker lost: it was killed by SIGKILL"))
    assert not is_transient_failure(failed("invalid geometry"))
    assert not is_transient_failure(Observation(candidate_id="c", source="s"))
