"""closedloop bench: the report's schema, the yardsticks' behaviour, and flag errors that name the flag."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from orchestrator.bench import BenchConfig, BenchError, experiments_to_hit, load_problem, parse_objective, parse_rung
from orchestrator.bench.arms import run_arm
from orchestrator.cli import app

runner = CliRunner()


@pytest.fixture
def tiny_pool(tmp_path):
    """60 candidates on a 2-D grid, one replicate row each for the first 5; ``perfect`` is the lab value itself."""
    rng = np.random.default_rng(7)
    x1, x2 = np.meshgrid(np.linspace(0, 1, 10), np.linspace(0, 1, 6))
    x1, x2 = x1.ravel(), x2.ravel()
    y = np.sin(3 * x1) + np.cos(2 * x2) + 0.1 * rng.normal(size=x1.size)
    frame = pd.DataFrame({"a": x1, "b": x2, "y": y, "perfect": y, "noise": rng.normal(size=x1.size)})
    frame = pd.concat([frame, frame.iloc[:5]], ignore_index=True)  # replicates are merged, not new candidates
    path = tmp_path / "pool.csv"
    frame.to_csv(path, index=False)
    return path


@pytest.fixture
def tiny_categorical_pool(tiny_pool, tmp_path):
    """The same pool with the grid levels as category names: one-hot bits, so the bench picks the Tanimoto kernel."""
    frame = pd.read_csv(tiny_pool)
    frame["a"] = [f"a{round(9 * v)}" for v in frame["a"]]
    frame["b"] = [f"b{round(5 * v)}" for v in frame["b"]]
    path = tmp_path / "categorical.csv"
    frame.to_csv(path, index=False)
    return path


def _bench(*args: str):
    return runner.invoke(app, ["bench", *args], catch_exceptions=False)


def test_bench_writes_the_report_and_cheap_first_with_a_perfect_rung_hits_first(tiny_pool, tmp_path):
    out = tmp_path / "out.json"
    result = _bench("--pool", str(tiny_pool), "--id-cols", "a,b", "--objective", "maximize:y",
                    "--rung", "cheap=perfect:2.5", "--lab-budget", "10", "--seeds", "2",
                    "--arms", "random,cheap-first,bo,botorch", "--batch", "5", "--json", str(out))
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["pool_size"] == 60 and report["seeds"] == 2 and report["lab_budget"] == 10
    assert report["objective"] == "maximize:y"
    assert set(report["arms"]) == {"random", "cheap-first", "bo", "botorch"}
    for summary in report["arms"].values():
        for key in ("experiments_to_top1", "experiments_to_top5", "best_at_budget"):
            assert set(summary[key]) >= {"median", "iqr"} and len(summary[key]["iqr"]) == 2
            q1, q3 = summary[key]["iqr"]
            assert q1 <= summary[key]["median"] <= q3
        assert 1 <= summary["experiments_to_top1"]["median"] <= 11  # never hitting counts budget + 1
        assert summary["total_cost_s"] > 0 and summary["wall_s"] >= 0
    assert set(report["af_vs_random"]) == set(report["arms"]) and report["af_vs_random"]["random"] == 1.0
    cheap = report["arms"]["cheap-first"]
    assert cheap["experiments_to_top1"] == {"median": 1.0, "iqr": [1.0, 1.0]}
    assert cheap["best_at_budget"]["median"] == pytest.approx(max(r["y"] for r in _rows(tiny_pool)))
    assert cheap["rung_cost_s"] == 60 * 2.5 and cheap["total_cost_s"] == 60 * 2.5 + 10 * 3600
    assert report["arms"]["random"]["rung_cost_s"] == 0
    assert sorted({(r["arm"], r["seed"]) for r in report["runs"]}) == sorted(
        (arm, seed) for arm in report["arms"] for seed in (0, 1))


def _rows(path):
    return pd.read_csv(path).to_dict("records")


def test_runs_are_deterministic_and_never_repeat_a_candidate(tiny_pool):
    config = BenchConfig(pool=str(tiny_pool), id_cols=("a", "b"), objective="target:y:1.0:0.2",
                         rungs=(parse_rung("cheap=noise:1"),), lab_budget=15, seeds=1, arms=("bo", "random"), batch=5)
    problem = load_problem(config)
    for arm in ("bo", "bo-sf", "random"):
        first, again = run_arm(problem, arm, 3), run_arm(problem, arm, 3)
        assert first.order == again.order
        assert len(first.order) == 15 and len(set(first.order)) == 15
    assert run_arm(problem, "random", 3).order != run_arm(problem, "random", 4).order


def test_a_perfect_rung_prior_makes_bo_find_the_best_after_the_initial_design(tiny_categorical_pool):
    config = BenchConfig(pool=str(tiny_categorical_pool), id_cols=("a", "b"), objective="maximize:y",
                         rungs=(parse_rung("cheap=perfect"),), lab_budget=10, seeds=1, arms=("bo",), batch=5)
    problem = load_problem(config)
    assert problem.kernel == "tanimoto"
    record = run_arm(problem, "bo", 0)
    best = int(np.argmax(problem.values))
    assert record.order[0] == best  # half the initial design follows the rung before any calibration
    assert record.notes["prior_rung"] == "cheap"  # calibrated and informative after the first batch
    assert run_arm(problem, "bo-sf", 0).order[0] != best


def test_on_a_descriptor_pool_the_rungs_are_features_after_the_initial_design(tiny_pool):
    from orchestrator.bench.arms import _arm_pool

    config = BenchConfig(pool=str(tiny_pool), id_cols=("a", "b"), objective="maximize:y",
                         rungs=(parse_rung("cheap=perfect:2.5"),), lab_budget=10, seeds=1, arms=("bo",), batch=5)
    problem = load_problem(config)
    assert problem.kernel == "matern52"
    features = _arm_pool(problem, "bo").features
    assert features.shape == (60, 3) and np.array_equal(features[:, :2], problem.pool.features)
    assert np.allclose(features[:, 2], (problem.values - problem.values.min()) / np.ptp(problem.values))
    assert _arm_pool(problem, "bo-sf") is problem.pool
    record = run_arm(problem, "bo", 0)
    assert record.order[0] == int(np.argmax(problem.values))  # the initial design still follows the rung
    assert record.notes["rungs_as_features"] == ["cheap"] and record.rung_cost_s == 60 * 2.5


def test_a_target_objective_is_modelled_by_its_value_and_the_rung_prior_is_a_value(tiny_categorical_pool):
    from orchestrator.bench.arms import _context, _planner

    config = BenchConfig(pool=str(tiny_categorical_pool), id_cols=("a", "b"), objective="target:y:1.0:0.2",
                         rungs=(parse_rung("cheap=perfect"),), lab_budget=10, seeds=1, arms=("bo",), batch=5)
    problem = load_problem(config)
    context = _context(problem, 0, 1, list(range(0, 60, 6)), None)
    for arm in ("bo", "bo-sf"):
        planner = _planner(problem, arm, 0)
        assert planner.models_values(context)
        prior = planner.prior_mean(context) if planner.prior_mean is not None else np.zeros(len(problem))
        assert np.allclose(planner.training_targets(context) + prior[context.observed], problem.values[context.observed])
    prior = _planner(problem, "bo", 0).prior_mean(context)
    assert np.allclose(prior, problem.values, atol=1e-9)  # a perfect rung calibrates to the value itself
    record = run_arm(problem, "bo", 0)
    assert record.order[0] == int(np.argmax(problem.utilities))


def test_the_incumbent_is_the_best_posterior_mean_so_one_lucky_measurement_does_not_set_it(tiny_pool):
    from orchestrator.bench.arms import _context
    from orchestrator.planners import BOPlanner, fit_surrogate_state
    from orchestrator.planners.surrogate import GPSurrogate

    config = BenchConfig(pool=str(tiny_pool), id_cols=("a", "b"), objective="maximize:y", lab_budget=10, seeds=1,
                         arms=("bo",), batch=5)
    problem = load_problem(config)
    observed = list(range(0, 60, 3))
    lucky = observed[4]
    problem.utilities[lucky] = problem.utilities.max() + 3.0  # one measurement far above its neighbours
    X = problem.pool.features[observed]
    state = fit_surrogate_state(X, problem.utilities[observed], kernel=problem.kernel, seed=0)
    state = {**state, "noise": 0.3}  # a lab whose noise the GP knows about (standardised units)
    context = _context(problem, 0, 4, observed, state)
    surrogate = GPSurrogate.from_hyperparameters(X, problem.utilities[observed], state)
    planner = BOPlanner()
    posterior = planner._incumbent(context, surrogate, X, None, None)
    assert posterior == pytest.approx(float(np.max(surrogate.predict(X)[0])))
    assert posterior < problem.utilities[lucky] - 0.5
    planner.incumbent = "observed"
    assert planner._incumbent(context, surrogate, X, None, None) == problem.utilities[lucky]


def test_experiments_to_hit_counts_budget_plus_one_without_a_hit():
    assert experiments_to_hit([3, 1, 2], {2}, budget=3) == 3
    assert experiments_to_hit([3, 1, 2], {9}, budget=3) == 4


@pytest.mark.parametrize(("args", "flag"), [
    (["--objective", "maximise:y"], "--objective"),
    (["--objective", "target:y:1"], "--objective"),
    (["--arms", "random,gp"], "--arms"),
    (["--id-cols", "a,zz"], "--id-cols"),
    (["--rung", "cheap"], "--rung"),
    (["--rung", "cheap=nope:1"], "--rung"),
    (["--lab-budget", "0"], "--lab-budget"),
    (["--arms", "cheap-first"], "--arms"),
    (["--feature-cols", "y"], "--feature-cols"),
])
def test_bad_flags_fail_with_the_flag_and_a_fix(tiny_pool, tmp_path, args, flag):
    base = {"--pool": str(tiny_pool), "--id-cols": "a,b", "--objective": "maximize:y", "--lab-budget": "5",
            "--seeds": "1", "--arms": "random", "--json": str(tmp_path / "o.json")}
    extra = []
    for key, value in zip(args[::2], args[1::2], strict=True):
        if key in base:
            base[key] = value
        else:
            extra += [key, value]
    result = _bench(*[x for kv in base.items() for x in kv], *extra)
    assert result.exit_code == 2
    assert flag in result.output and "error" in result.output
    assert not (tmp_path / "o.json").exists()


def test_parsers():
    assert parse_objective("minimize:loss (a.u.)") == ("minimize", "loss (a.u.)", None, None)
    assert parse_rung("pbe=pbe_gap:3600").cost_s == 3600.0 and parse_rung("e=col").cost_s == 0.0
    with pytest.raises(BenchError, match="--objective"):
        parse_objective("target:y:a:b")
