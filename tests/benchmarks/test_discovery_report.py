"""Rendering RESULTS.md from the discovery JSON (``benchmarks.discovery_report``)."""

from benchmarks.discovery_report import (
    _sections_not_in,
    arms_by_seed_count,
    seeds_caption,
)


def _report(seeds_by_arm: dict[str, int]) -> dict:
    return {"seeds": 5, "config": {"arms": list(seeds_by_arm)},
            "arms": {arm: {"per_seed": {"seeds": list(range(n))}} for arm, n in seeds_by_arm.items()}}


def test_arms_rerun_with_fewer_seeds_are_captioned_apart():
    report = _report({"bo": 20, "random": 20, "llm": 5, "llm-shuffled": 5})
    assert arms_by_seed_count(report) == {20: ["bo", "random"], 5: ["llm", "llm-shuffled"]}
    assert seeds_caption(report) == "20 seeds (llm, llm-shuffled: 5)"
    assert seeds_caption(_report({"bo": 20})) == "20 seeds"


def test_sections_other_benchmarks_wrote_survive_a_render():
    template = "# Results\n\n## Discovery efficiency\n\n{{TABLES}}\n"
    previous = ("# Results\n\n## Discovery efficiency\n\nold tables\n\n## Orchestration speed\n\nkept\n\n"
                "## Orchestration speed and scale\n\nalso kept\n")
    assert _sections_not_in(previous, template) == ("## Orchestration speed\n\nkept\n\n"
                                                    "## Orchestration speed and scale\n\nalso kept\n")
    assert _sections_not_in("## Discovery efficiency\n", template) == ""


def test_stored_runs_are_resummarised_with_the_window_and_keep_their_sources(tmp_path):
    import json

    import numpy as np
    import pandas as pd

    from benchmarks.discovery import resummarise
    from benchmarks.discovery_report import dataset_table
    from orchestrator.bench import BenchConfig, run_bench

    grid = np.linspace(0.0, 1.0, 12)
    pool = tmp_path / "pool.csv"
    pd.DataFrame({"x": grid, "y": grid}).to_csv(pool, index=False)
    config = BenchConfig(pool=str(pool), id_cols=("x",), objective="target:y:0.5:0.1", lab_budget=6, seeds=2,
                         arms=("random",), batch=3, workers=1)
    report = json.loads(json.dumps(run_bench(config, show_progress=False)))
    inside = int(np.sum(np.abs(grid - 0.5) <= 0.1))
    assert report["n_in_window"] == inside
    expected = report["arms"]["random"]["per_seed"]["experiments_to_window"]
    # a report written before the window was measured: the same runs, no window keys
    old = {**{k: v for k, v in report.items() if k != "n_in_window"},
           "arm_sources": {"random": {"code_commit": "abc1234", "date": "2026-11-01T00:00:00+00:00"}}}
    for key in ("experiments_to_window", "hit_rate_window"):
        old["arms"]["random"].pop(key)
    old["arms"]["random"]["per_seed"].pop("experiments_to_window")
    fresh = resummarise(old)
    assert fresh["n_in_window"] == inside
    assert fresh["arms"]["random"]["per_seed"]["experiments_to_window"] == expected
    assert fresh["arm_sources"] == old["arm_sources"] and fresh["runs"] == old["runs"]
    table = "\n".join(dataset_table(fresh))
    assert "| to the window |" in table and f"inside the window {inside}" in table
    assert "to the window" not in "\n".join(dataset_table({**old, "arms": old["arms"]}))
