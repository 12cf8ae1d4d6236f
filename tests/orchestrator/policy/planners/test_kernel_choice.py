"""The surrogate's kernel is decided once, on the whole pool's features, for the campaign and the bench alike."""

import numpy as np
import pandas as pd

from orchestrator.bench.config import BenchConfig
from orchestrator.bench.problem import load_problem
from orchestrator.policy.planners.bo import campaign_kernel, choose_kernel
from orchestrator.space.pool import load_pool
from orchestrator.spec import load_spec
from tests.conftest import BUCHWALD_SPEC


def test_the_buchwald_hartwig_campaign_uses_the_kernel_its_bench_measured(tmp_path):
    spec = load_spec(BUCHWALD_SPEC)
    pool = load_pool(spec)
    assert spec.campaign.kind == "conditions" and spec.planner.kernel == "auto"
    assert campaign_kernel(spec, pool) == "tanimoto", "Morgan bits of the reagents: a set similarity"
    config = BenchConfig(pool=str(BUCHWALD_SPEC.parent / spec.space.pool), id_cols=tuple(spec.space.columns), objective="maximize:yield",
                         lab_budget=10, seeds=1, arms=("bo",))
    problem = load_problem(config, tmp_path)
    assert campaign_kernel(problem.spec, problem.pool) == "tanimoto"


def test_a_number_column_is_judged_on_every_row_not_the_first_ones(tmp_path):
    # the first rows hold only the temperature column's two extremes, which scale to 0 and 1 like bits
    frame = pd.DataFrame({"solvent": ["CCO", "CC#N"] * 1200, "temperature": [20.0] * 1000 + [80.0] * 1000 + [50.0] * 400,
                          "y": np.arange(2400.0)})
    frame = frame.drop_duplicates(["solvent", "temperature"]).reset_index(drop=True)
    path = tmp_path / "pool.csv"
    frame.to_csv(path, index=False)
    config = BenchConfig(pool=str(path), id_cols=("solvent", "temperature"), objective="maximize:y", lab_budget=3, batch=2,
                         seeds=1, arms=("bo",))
    problem = load_problem(config, tmp_path / "work")
    assert campaign_kernel(problem.spec, problem.pool) == "matern52"
    assert choose_kernel("conditions", "auto", problem.pool.features[:4]) == "tanimoto", "rows alone can mislead"


def test_a_requested_kernel_is_kept():
    assert choose_kernel("molecule", "matern52") == "matern52"
    assert choose_kernel("conditions", "tanimoto", np.array([[0.5]])) == "tanimoto"
