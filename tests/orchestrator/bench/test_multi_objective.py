"""closedloop bench with several objectives (hypervolume metrics, BoTorch's qLogNEHVI) and with failing runs."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from orchestrator.bench import BenchConfig, load_problem
from orchestrator.bench.metrics import (
    NO_RESULT,
    experiments_to_hv,
    hypervolume_at_budget,
    hypervolume_by_experiment,
)
from orchestrator.interfaces.cli import app
from vocabulary.pareto import hypervolume, infer_reference_point, utility_matrix

runner = CliRunner()


@pytest.fixture
def two_objective_pool(tmp_path):
    """48 candidates on a 2-D grid; ``a`` peaks at x=1 and ``b`` (minimised) is lowest at x=0: a trade-off."""
    x1, x2 = np.meshgrid(np.linspace(0, 1, 8), np.linspace(0, 1, 6))
    x1, x2 = x1.ravel(), x2.ravel()
    frame = pd.DataFrame({"x1": x1, "x2": x2, "a": x1 + 0.3 * np.sin(3 * x2), "b": (1 - x1) ** 2 + 0.2 * x2,
                          "y": np.round(np.sin(3 * x1) * 10 + 2 * x2, 3)})
    path = tmp_path / "pool.csv"
    frame.to_csv(path, index=False)
    return path


def _bench(*args: str):
    return runner.invoke(app, ["bench", *args], catch_exceptions=False)


def test_one_objective_flag_stays_as_today_and_a_repeated_flag_lists_them():
    one = BenchConfig(pool="p.csv", id_cols=("x",), objective="maximize:y", lab_budget=8, seeds=1, arms=("random",))
    assert one.objective == "maximize:y" and one.objectives == () and not one.is_multi_objective
    several = BenchConfig(pool="p.csv", id_cols=("x",), objectives=("maximize:a", "minimize:b"), lab_budget=8,
                          seeds=1, arms=("random",))
    assert several.objective == "maximize:a" and several.objective_columns == ["a", "b"]
    assert several.is_multi_objective


def test_an_objective_given_twice_is_refused_in_one_line(two_objective_pool):
    result = runner.invoke(app, ["bench", "--pool", str(two_objective_pool), "--id-cols", "x1,x2",
                                 "--objective", "maximize:a", "--objective", "minimize:a", "--lab-budget", "8",
                                 "--seeds", "1", "--arms", "random"])
    assert result.exit_code != 0
    assert "--objective" in result.output and "'a'" in result.output and "twice" in result.output
    assert "Traceback" not in result.output


def test_hypervolume_metrics_on_a_hand_made_order():
    Y = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5], [np.nan, 2.0]])
    reference = np.array([-1.0, -1.0])
    order = [2, NO_RESULT, 3, 0, 1]  # a failed run and a row without every value add nothing
    assert hypervolume_by_experiment(order, Y, reference) == [2.25, 2.25, 2.25, 2.75, 3.25]
    true_hv = hypervolume(Y[:3], reference)
    assert true_hv == pytest.approx(3.25)
    assert experiments_to_hv(order, Y, reference, 0.5, true_hypervolume=true_hv, budget=5) == 1
    assert experiments_to_hv(order, Y, reference, 0.8, true_hypervolume=true_hv, budget=5) == 4
    assert experiments_to_hv(order, Y, reference, 0.95, true_hypervolume=true_hv, budget=5) == 5
    assert experiments_to_hv(order, Y, reference, 0.95, true_hypervolume=true_hv, budget=4) == 5  # never: budget + 1
    assert hypervolume_at_budget(order, Y, reference, 4) == 2.75
    assert hypervolume_at_budget([], Y, reference, 4) == 0.0


def test_the_problem_states_the_reference_point_and_the_true_hypervolume(two_objective_pool, tmp_path):
    config = BenchConfig(pool=str(two_objective_pool), id_cols=("x1", "x2"), objectives=("maximize:a", "minimize:b"),
                         lab_budget=8, seeds=1, arms=("random",), batch=4)
    problem = load_problem(config, tmp_path / "work")
    frame = pd.read_csv(two_objective_pool)
    assert problem.spec.is_multi_objective
    assert [o.property for o in problem.spec.objective_list] == ["a", "b"]
    truth = np.column_stack([frame["a"], frame["b"]])
    # the truth per pool row is that row's own columns
    np.testing.assert_allclose(problem.objective_values[:, 0], problem.pool.columns["a"])
    np.testing.assert_allclose(problem.objective_values[:, 1], problem.pool.columns["b"])
    np.testing.assert_allclose(np.sort(problem.objective_values[:, 1]), np.sort(frame["b"]))
    Y = utility_matrix(problem.spec.objective_list, truth)
    reference_u = infer_reference_point(Y)
    assert problem.reference_point == pytest.approx([reference_u[0], -reference_u[1]])  # b is minimised
    assert problem.spec.tradeoff.reference_point == pytest.approx(problem.reference_point)
    assert problem.true_hypervolume == pytest.approx(hypervolume(Y, reference_u))
    assert problem.true_hypervolume > 0


def test_a_short_run_reports_hypervolume_per_arm_against_botorch(two_objective_pool, tmp_path):
    out = tmp_path / "out.json"
    result = _bench("--pool", str(two_objective_pool), "--id-cols", "x1,x2", "--objective", "maximize:a",
                    "--objective", "minimize:b", "--lab-budget", "8", "--batch", "4", "--seeds", "1",
                    "--arms", "random,botorch", "--workers", "1", "--json", str(out))
    assert result.exit_code == 0, result.output
    assert "HV90" in result.output
    report = json.loads(out.read_text())
    assert report["objectives"] == ["maximize:a", "minimize:b"] and report["objective"] == "maximize:a"
    assert len(report["reference_point"]) == 2 and report["true_hypervolume"] > 0
    problem = load_problem(BenchConfig.model_validate(report["config"]), tmp_path / "again")
    Y, reference = problem.objective_utilities, problem.reference_utility
    for arm in ("random", "botorch"):
        s = report["arms"][arm]
        for key in ("experiments_to_hv90", "experiments_to_hv95", "hypervolume_at_budget"):
            assert set(s[key]) >= {"median", "iqr"}
        run = next(r for r in report["runs"] if r["arm"] == arm)
        assert len(run["lab_order"]) == 8 and len(set(run["order"])) == 8
        hv = hypervolume_at_budget(run["lab_order"], Y, reference, 8)
        assert s["hypervolume_at_budget"]["median"] == pytest.approx(hv)
        assert 0 < hv <= report["true_hypervolume"] * (1 + 1e-9)
        assert s["experiments_to_hv90"]["median"] == experiments_to_hv(
            run["lab_order"], Y, reference, 0.9, true_hypervolume=report["true_hypervolume"], budget=8)
    assert report["vs_botorch"]["metric"] == "experiments_to_hv90"
    assert report["vs_botorch"]["reference"] == "botorch" and "random" in report["vs_botorch"]["median_ratio"]


def test_botorch_hypervolume_picks_are_distinct_deterministic_and_avoid_pending():
    pytest.importorskip("botorch")
    from orchestrator.policy.planners.botorch_acquisition import (
        propose_botorch_hypervolume,
    )

    rng = np.random.default_rng(0)
    X = rng.uniform(size=(40, 2))
    Y = np.column_stack([X[:, 0], 1 - X[:, 0] ** 2 + 0.1 * X[:, 1]])
    train, rest = np.arange(8), np.arange(8, 40)
    reference = infer_reference_point(Y[train])
    first = propose_botorch_hypervolume(X[train], Y[train], X[rest], 3, reference=reference, seed=3)
    again = propose_botorch_hypervolume(X[train], Y[train], X[rest], 3, reference=reference, seed=3)
    assert first == again and len(set(first)) == 3 and all(0 <= r < len(rest) for r in first)
    # a pending job where the first pick was changes what comes first
    pending = X[rest][first[:1]]
    with_pending = propose_botorch_hypervolume(X[train], Y[train], X[rest], 1, reference=reference, seed=3,
                                               X_pending=pending)
    assert with_pending != first[:1]


def test_failing_runs_are_counted_per_arm(two_objective_pool, tmp_path):
    out = tmp_path / "failures.json"
    frame = pd.read_csv(two_objective_pool)
    threshold = float(np.quantile(frame["y"], 0.3))
    result = _bench("--pool", str(two_objective_pool), "--id-cols", "x1,x2", "--objective", "maximize:y",
                    "--fail-at-or-below", str(threshold), "--failure-policy", "learn", "--lab-budget", "12", "--batch", "4",
                    "--seeds", "1", "--arms", "random", "--workers", "1", "--json", str(out))
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["fail_at_or_below"] == threshold and report["failure_policy"] == "learn"
    run = report["runs"][0]
    n_failed = sum(index == NO_RESULT for index in run["lab_order"])
    assert report["arms"]["random"]["failed_runs"]["median"] == n_failed == run["n_failed"]
    # under 'learn' a failed candidate is never run again: every lab experiment is a candidate of its own
    assert len(run["lab_order"]) == len(run["order"]) == 12
    problem = load_problem(BenchConfig.model_validate(report["config"]), tmp_path / "again")
    assert n_failed == sum(problem.values[index] <= threshold for index in run["order"]) > 0
