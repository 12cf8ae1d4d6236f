"""The llm arm's bracket in ``closedloop bench``: the model's contribution between a coin and an oracle."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from orchestrator.bench.bracket import contribution
from orchestrator.interfaces.cli import app


def test_the_contribution_is_zero_for_a_coin_one_for_the_oracle_and_none_without_headroom():
    floor, ceiling = [20, 24, 18, 30], [6, 8, 5, 9]
    assert contribution(floor, floor, ceiling)["point"] == 0.0
    assert contribution(ceiling, floor, ceiling)["point"] == 1.0
    worse = contribution([30, 34, 28, 40], floor, ceiling)
    assert worse["point"] < 0 and worse["interval"][1] < 0, "worse than a coin on every seed"
    spread = contribution([12, 24, 6, 30], floor, ceiling)
    low, high = spread["interval"]
    assert low < spread["point"] < high and high - low > 0.2, "an interval over seeds, not a point"
    capped = contribution([10, 10], [10, 12], [10, 12])
    assert capped["point"] is None and capped["interval"] is None and capped["ceiling_experiments"] == 0.0
    noisy = contribution([19, 18, 30, 6], [18, 25, 12, 20], [17, 24, 14, 19])  # headroom 0.25 against a spread of 10
    assert noisy["capped"] and noisy["point"] is None and noisy["ceiling_interval"][0] <= 0
    with pytest.raises(ValueError, match="paired"):
        contribution([1, 2], [1], [1, 2])


@pytest.fixture
def pool(tmp_path):
    rng = np.random.default_rng(3)
    x1, x2 = np.meshgrid(np.linspace(0, 1, 10), np.linspace(0, 1, 8))
    y = np.sin(3 * x1.ravel()) + np.cos(2 * x2.ravel()) + 0.1 * rng.normal(size=x1.size)
    path = tmp_path / "pool.csv"
    pd.DataFrame({"a": x1.ravel(), "b": x2.ravel(), "y": y}).to_csv(path, index=False)
    return path


def test_bench_runs_the_bracket_and_reports_the_models_contribution(pool, tmp_path):
    out = tmp_path / "bracket.json"
    result = CliRunner().invoke(app, ["bench", "--pool", str(pool), "--id-cols", "a,b", "--objective", "maximize:y",
                                      "--arms", "llm-random,llm-oracle,llm", "--seeds", "2", "--lab-budget", "15",
                                      "--workers", "1", "--json", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    share = report["arms"]["llm"]["contribution"]
    assert share["metric"] == "experiments_to_top1" and share["n_seeds"] == 2
    assert set(share) >= {"point", "median", "interval", "ceiling_experiments", "ceiling_ratio"}
    runs = {(r["arm"], r["seed"]): r for r in report["runs"]}
    for seed in (0, 1):
        stats = {arm: runs[(arm, seed)]["notes"]["planner_stats"][arm] for arm in ("llm", "llm-random", "llm-oracle")}
        assert stats["llm"]["calls"] > 0 and stats["llm-random"]["calls"] == stats["llm-oracle"]["calls"] == 0
        assert len({s["n_model_picks"] for s in stats.values()}) == 1, "the same slots for the model and its bracket"
        assert all(runs[(arm, seed)]["rung_cost_s"] == 80 * 0.5 for arm in stats), "each surveyed its prior"
    truth = pd.read_csv(pool)["y"].to_numpy()
    best = int(np.argmax(truth))
    oracle_first = [runs[("llm-oracle", seed)]["order"][0] for seed in (0, 1)]
    assert oracle_first == [best, best], "the oracle's prior is the truth: its cold start opens on the best candidate"
    coin_first = {runs[("llm-random", seed)]["order"][0] for seed in (0, 1)}
    assert len(coin_first) == 2, "the coin's prior is drawn per seed"
    assert report["arms"]["llm-oracle"]["experiments_to_top1"]["median"] == 1
