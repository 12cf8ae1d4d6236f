"""The bench's BoTorch reference: ``botorch-onehot`` runs beside ``botorch``, and ratios are against the better."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from orchestrator.bench import (
    BOTORCH_ARMS,
    BenchConfig,
    botorch_reference,
    paired_geomean_ratio,
    versus_botorch,
)
from orchestrator.interfaces.cli import app
from orchestrator.planner_registry import planner_names

runner = CliRunner()


def _arm(per_seed: list[float], seeds: list[int] | None = None) -> dict:
    return {"experiments_to_top1": {"median": float(np.median(per_seed))},
            "per_seed": {"seeds": seeds or list(range(len(per_seed))), "experiments_to_top1": per_seed}}


def test_ratios_are_against_the_better_botorch_arm_and_keep_each_arm():
    arms = {"bo": _arm([4, 6, 8]), "botorch": _arm([10, 12, 14]), "botorch-onehot": _arm([8, 8, 9]),
            "random": _arm([20, 30, 40])}
    vs = versus_botorch(arms)
    assert vs["reference"] == "botorch-onehot" and vs["label"] == "best of botorch, botorch-onehot"
    assert vs["median_ratio"] == {"bo": 6 / 8, "botorch": 12 / 8, "random": 30 / 8}
    assert vs["paired_geomean_ratio"]["bo"] == pytest.approx((4 / 8 * 6 / 8 * 8 / 9) ** (1 / 3))
    assert "botorch-onehot" not in vs["median_ratio"]
    # with botorch alone the reference is botorch, whatever it measured
    only = versus_botorch({"bo": arms["bo"], "botorch": arms["botorch"]})
    assert only["reference"] == only["label"] == "botorch" and only["median_ratio"] == {"bo": 0.5}
    assert versus_botorch({"bo": arms["bo"], "random": arms["random"]}) == {}


def test_paired_ratios_use_only_the_seeds_both_arms_ran():
    arms = {"bo": _arm([5, 10, 40], seeds=[0, 1, 2]), "botorch": _arm([10, 10], seeds=[0, 1])}
    assert versus_botorch(arms)["paired_geomean_ratio"]["bo"] == pytest.approx(paired_geomean_ratio([5, 10], [10, 10]))


def test_a_tie_goes_to_botorch():
    assert botorch_reference({"botorch": 9.0, "botorch-onehot": 9.0}) == "botorch"
    assert botorch_reference({"botorch-onehot": 9.0}) == "botorch-onehot"


def test_botorch_onehot_is_a_bench_arm():
    assert set(BOTORCH_ARMS) <= set(planner_names())
    config = BenchConfig(pool="p.csv", id_cols=("x",), objective="maximize:y", lab_budget=10, seeds=1,
                         arms=("bo", "botorch", "botorch-onehot"))
    assert config.arms[-1] == "botorch-onehot"


@pytest.fixture
def reaction_pool(tmp_path):
    """24 reactions: an amine and an acid as SMILES beside a temperature."""
    amines, acids = ["CCN", "NCc1ccccc1"], ["CC(=O)O", "O=C(O)c1ccccc1", "O=C(O)CCl"]
    rows = [{"amine": a, "acid": c, "T": t} for a in amines for c in acids for t in (20.0, 40.0, 60.0, 80.0)]
    frame = pd.DataFrame(rows)
    frame["yield"] = [10 * amines.index(r["amine"]) + 5 * acids.index(r["acid"]) - abs(r["T"] - 60) / 4 for r in rows]
    path = tmp_path / "reactions.csv"
    frame.to_csv(path, index=False)
    return path


def test_bench_pool_runs_both_botorch_arms_and_names_the_reference(reaction_pool, tmp_path):
    out = tmp_path / "out.json"
    result = runner.invoke(app, ["bench", "--pool", str(reaction_pool), "--id-cols", "amine,acid,T",
                                 "--objective", "maximize:yield", "--lab-budget", "6", "--seeds", "1",
                                 "--arms", "botorch,botorch-onehot,random", "--batch", "3", "--workers", "1",
                                 "--json", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert set(report["arms"]) == {"botorch", "botorch-onehot", "random"}
    vs = report["vs_botorch"]
    medians = {arm: report["arms"][arm]["experiments_to_top1"]["median"] for arm in BOTORCH_ARMS}
    assert vs["reference"] == min(BOTORCH_ARMS, key=lambda arm: (medians[arm], BOTORCH_ARMS.index(arm)))
    assert vs["label"] == "best of botorch, botorch-onehot" and "random" in vs["median_ratio"]
    onehot = next(r for r in report["runs"] if r["arm"] == "botorch-onehot")
    assert len(onehot["order"]) == 6 == len(set(onehot["order"]))


def test_bench_spec_runs_botorch_onehot(reaction_pool, tmp_path):
    spec = tmp_path / "campaign.toml"
    spec.write_text(f"""
[campaign]
name = "reactions"
kind = "conditions"
seed = 0

[objective]
property = "yield"
direction = "maximize"

[space]
pool = "{reaction_pool.name}"
columns = ["amine", "acid", "T"]

[lab]
oracle_column = "yield"

[budget]
lab_experiments = 6

[planner]
main = "bo"
batch_size = 3
""")
    out = tmp_path / "spec.json"
    result = runner.invoke(app, ["bench", "--spec", str(spec), "--arms", "botorch-onehot", "--seeds", "1",
                                 "--workers", "1", "--json", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["arms"]["botorch-onehot"]["lab_experiments"] == 6
    assert report["vs_botorch"]["reference"] == "botorch-onehot"
