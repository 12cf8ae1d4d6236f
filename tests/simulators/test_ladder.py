"""evaluate_rung: the cache and an executor together, as the orchestrator calls them."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from simulators.base import BaseSimulator
from simulators.cache import SimulationCache
from simulators.executor_batch import TIMEOUT_REASON_PREFIX
from simulators.executor_process import LocalProcessExecutor
from simulators.ladder import evaluate_rung
from vocabulary.domain import ConditionSpace, Parameter, SetupError, SimulationFailed

SPACE = ConditionSpace(parameters=(Parameter(name="x", kind="integer", low=0, high=1000),))
HANG, INVALID = 999, 404


def conditions(*xs: int):
    return [SPACE.parse({"x": x}) for x in xs]


class LoggingSimulator(BaseSimulator):
    """x squared; hangs or fails on request; logs each calculation to a file."""

    name, version, fidelity = "square", "1", 0
    implemented_properties = ("square",)
    applies_to = frozenset({"conditions"})

    def __init__(self, log: Path) -> None:
        self.log = str(log)
        super().__init__({})

    def cost_model(self, candidate):
        return 0.1

    def calculate(self, candidate):
        x = candidate.values["x"]
        with open(self.log, "a") as log:
            log.write(f"{x}\n")
        if x == HANG:
            time.sleep(600)
        if x == INVALID:
            raise SimulationFailed("invalid geometry")
        return {"square": float(x * x)}

    def calls(self) -> list[int]:
        return sorted(int(line) for line in Path(self.log).read_text().split())


def test_without_a_cache_everything_is_computed(tmp_path):
    sim = LoggingSimulator(tmp_path / "calls")
    results = evaluate_rung(sim, conditions(2, 3))
    assert [(obs.properties, is_cached) for obs, is_cached in results] == [
        ({"square": 4.0}, False),
        ({"square": 9.0}, False),
    ]
    evaluate_rung(sim, conditions(2, 3))
    assert sim.calls() == [2, 2, 3, 3]


def test_cached_results_and_deterministic_failures_return_but_timeouts_rerun(tmp_path):
    sim = LoggingSimulator(tmp_path / "calls")
    batch = conditions(2, INVALID, HANG, 3)
    with SimulationCache(tmp_path / "ledger.db") as cache, LocalProcessExecutor(max_workers=2) as executor:
        first = evaluate_rung(sim, batch, cache=cache, executor=executor, timeout_s=0.5)
        second = evaluate_rung(sim, batch, cache=cache, executor=executor, timeout_s=0.5)
    assert [(obs.status, is_cached) for obs, is_cached in first] == [
        ("ok", False),
        ("failed", False),
        ("failed", False),
        ("ok", False),
    ]
    assert first[2][0].reason.startswith(TIMEOUT_REASON_PREFIX)
    assert [is_cached for _, is_cached in second] == [True, True, False, True]
    assert [obs for obs, _ in second] == [obs for obs, _ in first]
    assert sim.calls() == sorted([2, INVALID, HANG, 3, HANG])  # only the timed-out candidate ran again


def test_bad_input_is_a_setup_error_before_anything_runs(tmp_path):
    sim = LoggingSimulator(tmp_path / "calls")
    with SimulationCache(":memory:") as cache:
        with pytest.raises(SetupError, match="timeout_s"):
            evaluate_rung(sim, conditions(1), cache=cache, timeout_s=-1)
        with pytest.raises(SetupError, match="sequence"):
            evaluate_rung(sim, conditions(1)[0], cache=cache)
    with pytest.raises(SetupError, match="timeout_s"):
        evaluate_rung(sim, conditions(1), timeout_s=0)
    assert not Path(sim.log).exists()
