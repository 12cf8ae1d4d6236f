"""The simulation cache: hits never recompute, keys change with version and parameters, what is (not) cached."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from simulators.base import BaseSimulator
from simulators.cache import CacheStats, SimulationCache, parameters_sha256
from simulators.executor import SerialExecutor
from simulators.executor_process import LocalProcessExecutor
from simulators.table import TableSimulator
from vocabulary.domain import (
    ConditionSpace,
    Material,
    Observation,
    Parameter,
    SetupError,
    SimulationFailed,
)

SPACE = ConditionSpace(parameters=(Parameter(name="x", kind="integer", low=0, high=5000),))
INVALID = 404


def conditions(*xs: int):
    return [SPACE.parse({"x": x}) for x in xs]


class CountingSimulator(BaseSimulator):
    """x times ``scale``; appends each candidate it calculates to a log file, so calls count across processes."""

    name, fidelity = "counting", 0
    implemented_properties = ("value",)
    applies_to = frozenset({"conditions"})

    def __init__(self, log: Path, scale: float = 2.0, version: str = "1") -> None:
        self.log = str(log)  # an attribute, not a parameter: it must not change the cache key
        self.version = version
        super().__init__({"scale": scale})

    def cost_model(self, candidate):
        return 1.5

    def calculate(self, candidate):
        with open(self.log, "a") as log:
            log.write(f"{candidate.values['x']}\n")
        if candidate.values["x"] == INVALID:
            raise SimulationFailed("invalid geometry")
        return {"value": self.parameters["scale"] * candidate.values["x"]}

    def calls(self) -> list[int]:
        path = Path(self.log)
        return [int(line) for line in path.read_text().split()] if path.exists() else []


class ScriptedExecutor:
    """Returns a fixed failure for every candidate: what a timeout or a lost worker looks like to the cache."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.n_calls = 0

    def map_evaluate(self, simulator, candidates, *, timeout_s):
        self.n_calls += 1
        return [
            Observation(
                candidate_id=c.id,
                source=simulator.name,
                source_version=simulator.version,
                status="failed",
                reason=self.reason,
                cost_s=timeout_s or 0.0,
            )
            for c in candidates
        ]

    def close(self):
        pass


@pytest.fixture
def cache(tmp_path):
    with SimulationCache(tmp_path / "ledger.db") as store:
        yield store


def test_a_hit_is_never_recomputed(tmp_path, cache):
    sim = CountingSimulator(tmp_path / "calls")
    first, first_flags = cache.evaluate(sim, conditions(1, 2))
    second, second_flags = cache.evaluate(sim, conditions(1, 2))
    assert (first_flags, second_flags) == ([False, False], [True, True])
    assert second == first == sim.evaluate(conditions(1, 2))
    assert sorted(sim.calls()) == [1, 1, 2, 2]  # once through the cache, once directly just above


def test_only_misses_are_computed_each_distinct_candidate_once(tmp_path, cache):
    sim = CountingSimulator(tmp_path / "calls")
    cache.evaluate(sim, conditions(1))
    observations, is_cached = cache.evaluate(sim, conditions(1, 2, 1, 3, 2))
    assert is_cached == [True, False, True, False, False]
    assert [o.properties["value"] for o in observations] == [2.0, 4.0, 2.0, 6.0, 4.0]
    assert sim.calls() == [1, 2, 3]


def test_hits_are_not_recomputed_through_a_process_executor(tmp_path, cache):
    sim = CountingSimulator(tmp_path / "calls")
    with LocalProcessExecutor(max_workers=2) as executor:
        first, _ = cache.evaluate(sim, conditions(1, 2, 3), executor, timeout_s=60)
        second, is_cached = cache.evaluate(sim, conditions(3, 2, 1, 4), executor, timeout_s=60)
    assert is_cached == [True, True, True, False]
    assert second[:3] == first[::-1]
    assert sorted(sim.calls()) == [1, 2, 3, 4]


def test_a_version_bump_or_a_parameter_change_is_a_miss(tmp_path, cache):
    log = tmp_path / "calls"
    cache.evaluate(CountingSimulator(log), conditions(1))
    [[bumped], [is_cached]] = cache.evaluate(CountingSimulator(log, version="2"), conditions(1))
    assert not is_cached and bumped.source_version == "2"
    [[rescaled], [is_cached]] = cache.evaluate(CountingSimulator(log, scale=3.0), conditions(1))
    assert not is_cached and rescaled.properties == {"value": 3.0}
    [[original], [is_cached]] = cache.evaluate(CountingSimulator(log), conditions(1))
    assert is_cached and original.properties == {"value": 2.0}
    assert CountingSimulator(log).calls() == [1, 1, 1]
    assert cache.stats().n_rows == 3


def test_a_deterministic_failure_is_cached(tmp_path, cache):
    sim = CountingSimulator(tmp_path / "calls")
    [[failed], _] = cache.evaluate(sim, conditions(INVALID))
    [[again], [is_cached]] = cache.evaluate(sim, conditions(INVALID))
    assert is_cached and again == failed and failed.reason == "invalid geometry"
    assert sim.calls() == [INVALID]


@pytest.mark.parametrize("reason", ["timeout after 0.5 s (the worker was killed)", "worker lost: exit code 3"])
def test_timeouts_and_lost_workers_are_not_cached(tmp_path, cache, reason):
    sim = CountingSimulator(tmp_path / "calls")
    executor = ScriptedExecutor(reason)
    [[failed], [is_cached]] = cache.evaluate(sim, conditions(7), executor, timeout_s=0.5)
    assert not is_cached and failed.reason == reason
    assert cache.stats().n_rows == 0
    [[retried], [is_cached]] = cache.evaluate(sim, conditions(7), SerialExecutor())
    assert not is_cached and retried.status == "ok"
    assert executor.n_calls == 1 and sim.calls() == [7]


def test_results_persist_across_reopening_the_file(tmp_path):
    path = tmp_path / "ledger.db"
    sim = CountingSimulator(tmp_path / "calls")
    with SimulationCache(path) as cache:
        first, _ = cache.evaluate(sim, conditions(1, INVALID))
    with SimulationCache(str(path)) as reopened:
        second, is_cached = reopened.evaluate(sim, conditions(1, INVALID))
    with SimulationCache(f"sqlite:///{path}") as by_url:
        assert by_url.get_many(sim, conditions(1, INVALID)) == {o.candidate_id: o for o in first}
    assert is_cached == [True, True] and second == first
    assert sim.calls() == [1, INVALID]


def test_stats_count_hits_misses_and_rows(tmp_path, cache):
    sim = CountingSimulator(tmp_path / "calls")
    assert cache.stats() == CacheStats(n_hits=0, n_misses=0, n_rows=0)
    cache.evaluate(sim, conditions(1, 2))
    cache.evaluate(sim, conditions(1, 2, 3))
    assert cache.stats() == CacheStats(n_hits=2, n_misses=3, n_rows=3)
    assert cache.get_many(sim, conditions(3, 9)).keys() == {conditions(3)[0].id}
    assert cache.stats() == CacheStats(n_hits=3, n_misses=4, n_rows=3)


def test_the_cache_lives_in_the_ledger_database(tmp_path):
    from sqlalchemy import inspect

    from orchestrator.ledger import Ledger

    ledger = Ledger.open(tmp_path / "ledger.db")
    try:
        cache = SimulationCache(ledger.engine)
        sim = CountingSimulator(tmp_path / "calls")
        cache.evaluate(sim, conditions(1))
        assert cache.evaluate(sim, conditions(1))[1] == [True]
        cache.close()  # the ledger's engine is not the cache's to dispose of
        tables = set(inspect(ledger.engine).get_table_names())
        assert {"simulation_cache", "event"} <= tables
        with SimulationCache(tmp_path / "ledger.db") as by_path:
            assert by_path.evaluate(sim, conditions(1))[1] == [True]
    finally:
        ledger.close()
    assert sim.calls() == [1]


def test_memory_database_and_large_batches(tmp_path):
    ids = conditions(*range(1200))
    table = TableSimulator("big", {c.id: float(i) for i, c in enumerate(ids)}, "value", applies_to="conditions")
    with SimulationCache(":memory:") as cache:
        cache.evaluate(table, ids)
        observations, is_cached = cache.evaluate(table, ids)
    assert all(is_cached) and [o.properties["value"] for o in observations] == [float(i) for i in range(1200)]


def test_concurrent_writers_keep_one_row_per_key(tmp_path):
    path = tmp_path / "ledger.db"
    SimulationCache(path).close()  # create the file and table first, as the ledger would
    sim = CountingSimulator(tmp_path / "calls")
    observations = sim.evaluate(conditions(*range(40)))
    errors: list[BaseException] = []

    def write(offset: int) -> None:
        try:
            with SimulationCache(path) as cache:
                for start in range(0, 40, 5):
                    cache.put_many(sim, observations[(start + offset) % 40 : (start + offset) % 40 + 5])
        except BaseException as exc:  # collected, asserted below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(offset,)) for offset in (0, 5, 10, 15, 20, 25)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    script = textwrap.dedent(
        f"""
        from vocabulary.domain import ConditionSpace, Parameter
        from simulators.cache import SimulationCache
        from simulators.table import TableSimulator
        space = ConditionSpace(parameters=(Parameter(name="x", kind="integer", low=0, high=5000),))
        batch = [space.parse({{"x": x}}) for x in range(100)]
        table = TableSimulator("shared", {{c.id: 1.0 for c in batch}}, "value", applies_to="conditions")
        with SimulationCache({str(path)!r}) as cache:
            for start in range(0, 100, 10):
                cache.evaluate(table, batch[start : start + 10])
        """
    )
    processes = [subprocess.Popen([sys.executable, "-c", script]) for _ in range(3)]
    assert [p.wait(timeout=120) for p in processes] == [0, 0, 0]
    assert errors == []
    with SimulationCache(path) as cache:
        assert cache.stats().n_rows == 40 + 100
        assert cache.get_many(sim, conditions(*range(40))) == {o.candidate_id: o for o in observations}


def test_put_many_refuses_another_simulators_observations(tmp_path, cache):
    sim = CountingSimulator(tmp_path / "calls")
    observations = sim.evaluate(conditions(1))
    with pytest.raises(SetupError, match="version '1'"):
        cache.put_many(CountingSimulator(tmp_path / "calls", version="2"), observations)


def test_setup_errors_come_before_any_lookup(tmp_path, cache):
    sim = CountingSimulator(tmp_path / "calls")
    with pytest.raises(SetupError, match="applies to"):
        cache.evaluate(sim, [Material.parse("NaCl")])
    with pytest.raises(SetupError, match="timeout_s"):
        cache.evaluate(sim, conditions(1), timeout_s=0)
    assert cache.stats() == CacheStats(n_hits=0, n_misses=0, n_rows=0) and sim.calls() == []


def test_parameter_digest_is_canonical():
    assert parameters_sha256({"a": 1, "b": [1, 2]}) == parameters_sha256({"b": [1, 2], "a": 1})
    assert parameters_sha256({"a": 1}) != parameters_sha256({"a": 1.5})
    with pytest.raises(SetupError):
        parameters_sha256({"a": float("nan")})


def test_losing_the_create_table_race_is_not_an_error(tmp_path, monkeypatch):
    """Two workers opening a fresh PostgreSQL ledger race on CREATE TABLE; the loser gets a unique violation on the
    catalogue (pg_type_typname_nsp_index). When the table exists afterwards, that is not an error."""
    from sqlalchemy.exc import IntegrityError
    from sqlmodel import SQLModel

    path = tmp_path / "ledger.db"
    SimulationCache(path).close()  # the winner created the table
    create_all = SQLModel.metadata.create_all

    def lose_the_race(*args, **kwargs):
        raise IntegrityError("CREATE TABLE simulation_cache", {}, Exception("duplicate key value violates unique "
                                                                         'constraint "pg_type_typname_nsp_index"'))

    monkeypatch.setattr(SQLModel.metadata, "create_all", lose_the_race)
    with SimulationCache(path) as cache:  # the loser
        assert cache.stats().n_rows == 0
    with pytest.raises(IntegrityError):  # with no table afterwards, the error stands
        SimulationCache(tmp_path / "empty.db")
    monkeypatch.setattr(SQLModel.metadata, "create_all", create_all)
