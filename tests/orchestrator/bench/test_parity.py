"""The bench is the campaign: ``bench --spec`` measures, seed for seed, the lab order ``closedloop run`` produces."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from orchestrator.interfaces.cli import app

runner = CliRunner()


@pytest.fixture
def ladder_spec(tmp_path):
    """A 48-candidate conditions campaign with a noisy table rung, a target window, and a control arm."""
    rng = np.random.default_rng(11)
    a, b = np.meshgrid(np.linspace(0, 1, 8), np.linspace(0, 1, 6))
    y = np.sin(3 * a.ravel()) + np.cos(2 * b.ravel())
    frame = pd.DataFrame({"a": a.ravel(), "b": b.ravel(), "y": y, "proxy": y + 0.2 * rng.normal(size=y.size)})
    frame.to_csv(tmp_path / "pool.csv", index=False)
    (tmp_path / "campaign.toml").write_text("""
[campaign]
name = "parity"
kind = "conditions"
seed = 0

[objective]
property = "y"
direction = "target"
target = 1.5
tolerance = 0.05

[space]
pool = "pool.csv"
columns = ["a", "b"]

[[ladder]]
name = "cheap"
simulator = "table"
column = "proxy"
property = "y_proxy"
proxy = "y_proxy"
cost_s = 1.0

[lab]
oracle_column = "y"
noise_sd = 0.05

[budget]
lab_experiments = 12

[planner]
main = "bo"
control = "random"
control_share = 0.25
batch_size = 3
n_initial = 3
""")
    return tmp_path / "campaign.toml"


@pytest.mark.parametrize("arm", ["bo", "random"])
def test_bench_spec_gives_the_lab_order_of_run_with_no_control(ladder_spec, tmp_path, arm):
    seed = 2
    out = tmp_path / f"bench-{arm}.json"
    bench = runner.invoke(app, ["bench", "--spec", str(ladder_spec), "--arms", arm, "--seeds", "1",
                                "--first-seed", str(seed), "--workers", "1", "--json", str(out)],
                          catch_exceptions=False)
    assert bench.exit_code == 0, bench.output
    report = json.loads(out.read_text())
    assert report["arms"][arm]["per_seed"]["seeds"] == [seed]
    [bench_measured] = report["arms"][arm]["per_seed"]["measured"]

    run = runner.invoke(app, ["run", str(ladder_spec), "--planner", arm, "--control-share", "0", "--seed", str(seed),
                              "--db", str(tmp_path / f"run-{arm}.db"), "--json"], catch_exceptions=False)
    assert run.exit_code == 0, run.output
    summary = json.loads(run.stdout)
    assert summary["control_arm"] is None
    assert len(bench_measured) == 12 and bench_measured == summary["measured"]


def test_bench_spec_and_bench_pool_share_the_arm_planners(ladder_spec, tmp_path):
    """A seed's order differs between arms, and another seed changes it: the runs are not one fixed list."""
    out = tmp_path / "bench.json"
    result = runner.invoke(app, ["bench", "--spec", str(ladder_spec), "--arms", "bo,bo-sf,cheap-first", "--seeds", "2",
                                 "--workers", "1", "--json", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    arms = json.loads(out.read_text())["arms"]
    assert arms["cheap-first"]["rung_cost_s"] == 48.0 and arms["bo-sf"]["rung_cost_s"] == 0.0
    for arm in arms:
        first, second = arms[arm]["per_seed"]["measured"]
        assert len(set(first)) == 12
    assert arms["bo"]["per_seed"]["measured"][0] != arms["bo-sf"]["per_seed"]["measured"][0]
