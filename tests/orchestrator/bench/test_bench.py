"""closedloop bench: the report's schema, the yardsticks' behaviour, and flag errors that name the flag."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from orchestrator.bench import (
    BenchConfig,
    BenchError,
    arm_spec,
    experiments_to_hit,
    load_problem,
    parse_objective,
    parse_rung,
    run_arm,
)
from orchestrator.interfaces.cli import app
from orchestrator.loop.summary import measured_order
from orchestrator.policy.planners.bo import campaign_kernel

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
    # random and botorch plan without the ladder: no survey, and the screen runs no proxy rung for them
    assert report["arms"]["random"]["rung_cost_s"] == 0 and report["arms"]["botorch"]["rung_cost_s"] == 0
    assert report["arms"]["bo"]["rung_cost_s"] >= 60 * 2.5
    assert sorted({(r["arm"], r["seed"]) for r in report["runs"]}) == sorted(
        (arm, seed) for arm in report["arms"] for seed in (0, 1))


def _rows(path):
    return pd.read_csv(path).to_dict("records")


def _problem(config, tmp_path):
    return load_problem(config, tmp_path / "work")


def test_runs_are_deterministic_and_never_repeat_a_candidate(tiny_pool, tmp_path):
    config = BenchConfig(pool=str(tiny_pool), id_cols=("a", "b"), objective="target:y:1.0:0.2",
                         rungs=(parse_rung("cheap=noise:1"),), lab_budget=15, seeds=1, arms=("bo", "random"), batch=5)
    problem = _problem(config, tmp_path)
    for arm in ("bo", "bo-sf", "random"):
        first, again = run_arm(problem, arm, 3), run_arm(problem, arm, 3)
        assert first.measured == again.measured and first.order == again.order
        assert len(first.order) == 15 and len(set(first.order)) == 15
    assert run_arm(problem, "random", 3).order != run_arm(problem, "random", 4).order


def test_each_run_is_a_campaign_with_its_ledger_events(tiny_categorical_pool, tmp_path):
    """The bench decides nothing itself: a run's ledger has the survey, the learn node's prior and the screen."""
    from orchestrator.loop.campaign import Campaign

    config = BenchConfig(pool=str(tiny_categorical_pool), id_cols=("a", "b"), objective="maximize:y",
                         rungs=(parse_rung("cheap=perfect:2"),), lab_budget=10, seeds=1, arms=("bo",), batch=5)
    problem = _problem(config, tmp_path)
    assert campaign_kernel(problem.spec, problem.pool) == "tanimoto" and problem.spec.space.features == "columns"
    spec = arm_spec(problem.spec, "bo", 0)
    assert spec.planner.main == "bo" and spec.planner.control is None
    with Campaign.start(spec, db=":memory:", campaign_id="c") as campaign:
        campaign.run()
        surveyed = campaign.ledger.events("c", types=["RungSurveyed"])
        fits = [e.payload for e in campaign.ledger.events("c", types=["SurrogateUpdated"]) if e.payload["hyperparameters"]]
        order = measured_order(campaign.ledger, "c")
    assert [e.payload["rung"] for e in surveyed] == ["cheap"] and surveyed[0].payload["cost_s"] == 60 * 2
    assert fits and fits[-1]["hyperparameters"]["prior"]["rung"] == "cheap"
    assert fits[-1]["hyperparameters"]["prior"]["is_calibrated"]
    assert run_arm(problem, "bo", 0).measured == order


def test_a_perfect_rung_makes_bo_start_from_the_rungs_best_and_bo_sf_ignores_it(tiny_categorical_pool, tmp_path):
    config = BenchConfig(pool=str(tiny_categorical_pool), id_cols=("a", "b"), objective="maximize:y",
                         rungs=(parse_rung("cheap=perfect"),), lab_budget=10, seeds=1, arms=("bo",), batch=5)
    problem = _problem(config, tmp_path)
    best = int(np.argmax(problem.values))
    record = run_arm(problem, "bo", 0)
    assert record.order[0] == best  # to maximise, the initial design follows the surveyed rung before any calibration
    single = run_arm(problem, "bo-sf", 0)
    assert single.order[0] != best and single.rung_cost_s == 0 and single.n_rung_evaluations == 0


def test_with_two_rungs_the_cold_start_and_first_prior_trust_the_dearer(tiny_categorical_pool, tmp_path):
    """Before the lab has said which rung tracks it, the ladder's premise decides: the dearer rung is the higher
    fidelity. A cheap noise column listed first does not steer the first batch; cheap-first keeps its name's rung."""
    from orchestrator.policy.planners.ladder_prior import choose_prior

    config = BenchConfig(pool=str(tiny_categorical_pool), id_cols=("a", "b"), objective="maximize:y",
                         rungs=(parse_rung("rough=noise:1"), parse_rung("fine=perfect:50")), lab_budget=5, seeds=1,
                         arms=("bo",), batch=5)
    problem = _problem(config, tmp_path)
    top5 = set(np.argsort(-problem.values)[:5].tolist())
    assert set(run_arm(problem, "bo", 0).order) == top5
    by_noise = np.argsort(-np.asarray(problem.pool.columns["noise"]))[:5].tolist()
    assert set(run_arm(problem, "cheap-first", 0).order) == set(by_noise)
    rungs = {"rough": np.asarray(problem.pool.columns["noise"]), "fine": np.asarray(problem.pool.columns["perfect"])}
    observed = np.array([0, 1])  # fewer pairs than screening.min_pairs: nothing to judge the rungs by yet
    prior = choose_prior(rungs, observed, problem.values[observed], problem.spec)
    assert prior["rung"] == "fine" and not prior["is_calibrated"]


def test_the_cold_start_follows_the_rung_wholly_to_maximise_and_by_half_for_a_target(tiny_categorical_pool, tmp_path):
    for objective, n_by_rung in (("maximize:y", 5), ("target:y:1.0:0.2", 3)):
        config = BenchConfig(pool=str(tiny_categorical_pool), id_cols=("a", "b"), objective=objective,
                             rungs=(parse_rung("cheap=perfect"),), lab_budget=5, seeds=1, arms=("bo",), batch=5)
        problem = _problem(config, tmp_path / objective.split(":")[0])
        utility = np.asarray([problem.spec.objective.utility(v) for v in problem.values])
        by_rung = set(np.argsort(-utility, kind="stable")[:n_by_rung].tolist())
        first_batch = set(run_arm(problem, "bo", 0).order[:5])
        assert by_rung <= first_batch, objective
        if n_by_rung < 5:  # the rest are spread for the calibration, not the rung's next best
            next_best = set(np.argsort(-utility, kind="stable")[n_by_rung:5].tolist())
            assert first_batch - by_rung != next_best


def test_a_target_objective_fits_values_with_a_value_prior(tiny_categorical_pool, tmp_path):
    from orchestrator.loop.campaign import Campaign

    config = BenchConfig(pool=str(tiny_categorical_pool), id_cols=("a", "b"), objective="target:y:1.0:0.2",
                         rungs=(parse_rung("cheap=perfect"),), lab_budget=15, seeds=1, arms=("bo",), batch=5)
    problem = _problem(config, tmp_path)
    with Campaign.start(arm_spec(problem.spec, "bo", 0), db=":memory:", campaign_id="t") as campaign:
        campaign.run()
        states = [e.payload["hyperparameters"] for e in campaign.ledger.events("t", types=["SurrogateUpdated"])
                  if e.payload["hyperparameters"]]
    state = states[-1]
    assert state["fitted_on"] == "value"
    prior = state["prior"]
    assert prior["is_calibrated"] and prior["slope"] == pytest.approx(1.0) and prior["intercept"] == pytest.approx(0.0, abs=1e-9)
    assert run_arm(problem, "bo", 0).order[0] == int(np.argmax(problem.utilities))


def test_a_target_reports_lab_experiments_to_its_window(tiny_pool, tmp_path):
    """A target's own success is a lab value inside target ± tolerance; the report counts it beside the top sets."""
    out = tmp_path / "out.json"
    result = _bench("--pool", str(tiny_pool), "--id-cols", "a,b", "--objective", "target:y:1.0:0.05",
                    "--rung", "cheap=perfect:1", "--lab-budget", "10", "--seeds", "2", "--arms", "random,cheap-first",
                    "--batch", "5", "--json", str(out))
    assert result.exit_code == 0, result.output
    assert "window" in result.output, "the table has a column for it"
    report = json.loads(out.read_text())
    values = {(round(r["a"], 9), round(r["b"], 9)): r["y"] for r in _rows(tiny_pool)}
    inside = [v for v in values.values() if abs(v - 1.0) <= 0.05]
    assert report["n_in_window"] == len(inside) > 0
    cheap = report["arms"]["cheap-first"]
    assert cheap["per_seed"]["experiments_to_window"] == [1, 1], "a perfect rung's nearest value is inside"
    assert cheap["hit_rate_window"] == 1.0 and cheap["experiments_to_window"]["median"] == 1.0
    for summary in report["arms"].values():
        for to_window, to_top1 in zip(summary["per_seed"]["experiments_to_window"], summary["per_seed"]["experiments_to_top1"]):
            assert 1 <= to_window <= 11
    maximise = _bench("--pool", str(tiny_pool), "--id-cols", "a,b", "--objective", "maximize:y", "--lab-budget", "5",
                      "--seeds", "1", "--arms", "random", "--batch", "5", "--json", str(tmp_path / "max.json"))
    assert maximise.exit_code == 0 and "window" not in maximise.output
    assert "n_in_window" not in json.loads((tmp_path / "max.json").read_text())


def test_experiments_to_hit_counts_budget_plus_one_without_a_hit():
    assert experiments_to_hit([3, 1, 2], {2}, budget=3) == 3
    assert experiments_to_hit([3, 1, 2], {9}, budget=3) == 4


@pytest.mark.parametrize(("args", "flag"), [
    (["--objective", "upward:y"], "--objective"),
    (["--objective", "target:y:1"], "--objective"),
    (["--arms", "random,gp"], "--arms"),
    (["--id-cols", "a,zz"], "--id-cols"),
    (["--id-cols", "a,b,y"], "--id-cols"),
    (["--rung", "cheap"], "--rung"),
    (["--rung", "cheap=nope:1"], "--rung"),
    (["--lab-budget", "0"], "--lab-budget"),
    (["--arms", "cheap-first"], "--arms"),
    (["--feature-cols", "y"], "--feature-cols"),
    (["--spec", "campaigns/freesolv/campaign.toml"], "--spec"),
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


def test_a_label_column_is_refused_with_the_columns_to_give_instead(tiny_pool, tmp_path):
    """A sample id per row one-hot encodes to nothing a surrogate can learn from: the bench names the column and
    the id columns to give instead, and the same pool with only its descriptive columns runs."""
    frame = pd.read_csv(tiny_pool)
    frame.insert(0, "sample", [f"s{k % 60}" for k in range(len(frame))])  # the 5 replicate rows share their label
    labelled = tmp_path / "labelled.csv"
    frame.to_csv(labelled, index=False)
    common = ["--pool", str(labelled), "--objective", "maximize:y", "--lab-budget", "5", "--seeds", "1",
              "--arms", "random"]
    refused = _bench(*common, "--id-cols", "sample,a,b", "--json", str(tmp_path / "refused.json"))
    assert refused.exit_code == 2 and "--id-cols" in refused.output and "'sample'" in refused.output
    assert "--id-cols a,b" in refused.output and not (tmp_path / "refused.json").exists()
    ran = _bench(*common, "--id-cols", "a,b", "--json", str(tmp_path / "ran.json"))
    assert ran.exit_code == 0, ran.output
    assert json.loads((tmp_path / "ran.json").read_text())["pool_size"] == 60


def test_a_missing_number_in_an_id_column_leaves_its_row_out_and_keeps_the_column_numeric(tiny_pool, tmp_path,
                                                                                        caplog):
    """An empty cell of a numeric id column is a condition not recorded: that row is left out and named, and the
    column stays one scaled number (not 60 one-hot categories, as reading it as text would make it)."""
    frame = pd.read_csv(tiny_pool)
    frame.loc[7, "a"] = np.nan  # CSV line 9
    path = tmp_path / "gap.csv"
    frame.to_csv(path, index=False)
    config = BenchConfig(pool=str(path), id_cols=("a", "b"), objective="maximize:y", lab_budget=5, seeds=1,
                         arms=("random",), batch=5)
    with caplog.at_level("WARNING"):
        problem = load_problem(config, tmp_path / "work")
    assert len(problem) == 59 and problem.pool.features.shape[1] == 2
    assert any("numeric id column 'a'" in r.getMessage() and "lines 9" in r.getMessage() for r in caplog.records)


def test_parsers():
    assert parse_objective("minimize:loss (a.u.)") == ("minimize", "loss (a.u.)", None, None)
    assert parse_objective("Maximise:y") == parse_objective("max:y") == ("maximize", "y", None, None)
    assert parse_objective("minimise:y")[0] == parse_objective("MIN:y")[0] == "minimize"
    assert parse_rung("pbe=pbe_gap:3600").cost_s == 3600.0 and parse_rung("e=col").cost_s == 0.0
    with pytest.raises(BenchError, match="--objective"):
        parse_objective("target:y:a:b")


def test_on_descriptors_the_rung_is_a_gp_input_that_every_reader_rebuilds(tiny_pool, tmp_path):
    """A Matérn pool takes the chosen rung as one more input (``ladder_prior.prior_form``), not as the prior mean:
    the state records the form, has one lengthscale more than the descriptors, and the fit finds a perfect rung the
    most relevant input; the plan, the screen and the bench all read it the same way (the run completes, and the
    bench's lab order is the campaign's)."""
    from orchestrator.loop.campaign import Campaign
    from orchestrator.policy.planners.ladder_prior import prior_rows, surrogate_features

    config = BenchConfig(pool=str(tiny_pool), id_cols=("a", "b"), objective="target:y:1.0:0.2",
                         rungs=(parse_rung("cheap=perfect:2"),), lab_budget=20, seeds=1, arms=("bo",), batch=5)
    problem = _problem(config, tmp_path)
    assert campaign_kernel(problem.spec, problem.pool) == "matern52"
    with Campaign.start(arm_spec(problem.spec, "bo", 0), db=":memory:", campaign_id="d") as campaign:
        campaign.run()
        states = [e.payload["hyperparameters"] for e in campaign.ledger.events("d", types=["SurrogateUpdated"])
                  if e.payload["hyperparameters"]]
        order = measured_order(campaign.ledger, "d")
    state = states[-1]
    prior = state["prior"]
    assert prior["rung"] == "cheap" and prior["form"] == "feature"
    n_features = problem.pool.features.shape[1]
    assert len(state["lengthscale"]) == n_features + 1
    assert state["lengthscale"][-1] < min(state["lengthscale"][:-1])  # the perfect rung says the most
    rung = {"cheap": np.asarray(problem.pool.columns["perfect"], dtype=float)}
    assert prior_rows(prior, rung, problem.spec, fitted_on="value") is None  # no prior mean in this form
    X = surrogate_features(problem.pool.features, prior, rung)
    assert X.shape == (len(problem.pool), n_features + 1) and X[:, -1].min() == 0.0 and X[:, -1].max() == 1.0
    assert run_arm(problem, "bo", 0).measured == order
    hits = problem.utilities[run_arm(problem, "bo", 0).order] >= -problem.spec.objective.tolerance
    assert hits.any()  # a perfect rung as an input finds the window
    # the llm arm's tools read the same GP on the same inputs as bo and the screen
    from orchestrator.loop.ladder_view import LadderView
    from orchestrator.policy.planners import PlanningContext
    from orchestrator.policy.planners.bo import campaign_utility_model
    from orchestrator.policy.planners.llm_tools import PlanningTools, select_shortlist

    observed = np.asarray(run_arm(problem, "bo", 0).order[:10], dtype=int)
    lab = np.asarray(problem.pool.columns["y"], dtype=float)
    context = PlanningContext(spec=problem.spec, pool=problem.pool, iteration=3, observed=observed,
                              available=np.setdiff1d(np.arange(len(problem.pool)), observed),
                              utilities=problem.utilities[observed], values=lab[observed],
                              pending=np.zeros(0, dtype=int), surrogate_state=state, seed=0,
                              ladder=LadderView(values=rung, cost_s={"cheap": 2.0}))
    tools = PlanningTools(context)
    assert tools.surrogate.pool_features.shape[1] == n_features + 1
    rows = context.available[:7]
    assert np.allclose(tools.predict_utilities(rows), campaign_utility_model(context).predict_rows(rows))
    shortlist, log_ei = select_shortlist(tools, 5)
    expected = campaign_utility_model(context).log_improvement_rows(context.available, float(np.max(context.utilities)))
    assert np.allclose(log_ei, np.sort(expected)[::-1][:5])
