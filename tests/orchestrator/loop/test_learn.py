"""The learn node's refit schedule: when the GP's hyperparameters are refitted and when they are kept."""

from __future__ import annotations

import pytest

from orchestrator.loop.campaign import Campaign
from orchestrator.loop.nodes.learn import MIN_NEW_RESULTS, is_refit_due
from tests.conftest import BUCHWALD_SPEC, small_spec
from vocabulary.events import SurrogateUpdated


def _schedule(batch_size: int, n_max: int, first: int = 2) -> list[int]:
    """The lab-result counts at which a campaign of ``batch_size`` refits, its first fit at ``first`` results."""
    fits = [first]
    for n in range(first + 1, n_max + 1):
        if is_refit_due(n, fits[-1], batch_size):
            fits.append(n)
    return fits


def test_the_first_fit_is_always_due():
    assert is_refit_due(2, None, 1) and is_refit_due(5, None, 5)


def test_a_batch_of_one_refits_every_min_new_results_then_every_quarter():
    assert MIN_NEW_RESULTS == 3
    assert _schedule(1, 30) == [2, 5, 8, 11, 14, 18, 23, 29]  # +3 until a quarter is more (from 12 results)


@pytest.mark.parametrize("batch_size", [3, 5, 8])
def test_a_batch_of_min_new_results_or_more_refits_as_before(batch_size):
    """The floor changes nothing once a batch is at least ``MIN_NEW_RESULTS``: every batch, then every quarter."""
    def before(n: int, last: int) -> bool:
        return n >= max(last + batch_size, 1.25 * last)

    for last in range(2, 60):
        for n in range(last + 1, 120):
            assert is_refit_due(n, last, batch_size) == before(n, last), (n, last)


def test_a_batch_one_campaign_records_refits_on_the_schedule_and_keeps_them_between(tmp_path):
    spec = small_spec(BUCHWALD_SPEC, lab_experiments=9, planner__control=None, planner__control_share=0.0,
                      planner__batch_size=1)
    with Campaign.start(spec, db=":memory:", campaign_id="b1", durability="exit") as campaign:
        campaign.run()
        updates = [e.payload for e in campaign.ledger.events("b1", types=[SurrogateUpdated.type])]
    refits = [u["n_train"] for u in updates if u["model"].endswith(":refit")]
    kept = [u["n_train"] for u in updates if u["model"].endswith(":kept")]
    assert refits == [2, 5, 8]
    assert kept == [3, 4, 6, 7, 9]
    by_n = {u["n_train"]: u["hyperparameters"] for u in updates}
    assert by_n[4] == by_n[2] and by_n[7] == by_n[5]  # kept: the last fit's hyperparameters, unchanged


def test_a_rung_the_lab_ranks_in_reverse_is_named_with_the_fix(tmp_path, caplog):
    """A proxy that measures the opposite sense (a docking score for an activity) is ruled out, and the user hears
    why and what to change, once."""
    import logging

    import numpy as np
    import pandas as pd

    from orchestrator.bench import BenchConfig, parse_rung
    from orchestrator.bench.problem import load_problem
    from orchestrator.bench.runner import run_arm

    rng = np.random.default_rng(0)
    X = rng.random((60, 2))
    y = np.sin(3 * X[:, 0]) + X[:, 1]
    pd.DataFrame({"x0": X[:, 0], "x1": X[:, 1], "y": y, "dock": -2.0 * y + 0.05 * rng.standard_normal(60)}).to_csv(
        tmp_path / "pool.csv", index=False)
    config = BenchConfig(pool=str(tmp_path / "pool.csv"), id_cols=("x0", "x1"), objective="maximize:y",
                         rungs=(parse_rung("dock=dock:1"),), lab_budget=25, seeds=1, arms=("bo",), batch=5)
    problem = load_problem(config, tmp_path / "work")
    with caplog.at_level(logging.WARNING, logger="orchestrator.loop.nodes.learn"):
        run_arm(problem, "bo", 0)
    warnings = [r.getMessage() for r in caplog.records if "ranks the lab results backwards" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "rung 'dock'" in warnings[0] and "negate its column" in warnings[0]


def test_a_rung_that_says_nothing_is_not_called_backwards(tmp_path, caplog):
    """The campaign's picks are no random sample: choosing by a noise rung and the descriptors together makes the
    rung correlate negatively with the lab among the picks (Berkson's bias; here ρ = −0.41 over 30 pairs, which a
    one-sided test at 5 % called backwards). That is no reason to tell the user to negate it."""
    import logging

    import numpy as np
    import pandas as pd

    from orchestrator.bench import BenchConfig, parse_rung
    from orchestrator.bench.problem import load_problem
    from orchestrator.bench.runner import run_arm
    from tests.conftest import ROOT

    frame = pd.read_csv(ROOT / "benchmarks/data/pvlab_benchmarking_liang/Crossed_barrel_dataset.csv")
    frame = frame.groupby(["n", "theta", "r", "t"], as_index=False)["toughness"].mean()
    frame["noise"] = np.random.default_rng(0).standard_normal(len(frame))
    frame.to_csv(tmp_path / "pool.csv", index=False)
    config = BenchConfig(pool=str(tmp_path / "pool.csv"), id_cols=("n", "theta", "r", "t"), objective="maximize:toughness",
                         rungs=(parse_rung("noise=noise:1"),), lab_budget=40, seeds=1, arms=("bo",), batch=5)
    problem = load_problem(config, tmp_path / "work")
    with caplog.at_level(logging.WARNING, logger="orchestrator.loop.nodes.learn"):
        run_arm(problem, "bo", 0)
    assert not [r for r in caplog.records if "ranks the lab results backwards" in r.getMessage()]
