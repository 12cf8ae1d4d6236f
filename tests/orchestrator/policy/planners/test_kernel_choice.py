"""The surrogate's kernel is decided once, on the whole pool's features, for the campaign and the bench alike."""

import numpy as np
import pandas as pd
import pytest

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


def _problem_of(frame: pd.DataFrame, id_cols: tuple[str, ...], tmp_path, **config):
    """The bench problem of ``frame`` (a CSV pool) with objective maximize:y and the bo arm."""
    path = tmp_path / "pool.csv"
    frame.to_csv(path, index=False)
    settings = {"lab_budget": 4, "batch": 2, **config}
    return load_problem(BenchConfig(pool=str(path), id_cols=id_cols, objective="maximize:y", seeds=1, arms=("bo",),
                                    **settings), tmp_path / "work")


def _named(spec, kernel: str):
    return spec.model_copy(update={"planner": spec.planner.model_copy(update={"kernel": kernel})})


def test_a_number_column_is_judged_on_every_row_not_the_first_ones(tmp_path):
    # the first rows hold only the temperature column's two extremes, which scale to 0 and 1 like bits
    frame = pd.DataFrame({"solvent": ["water", "ethanol"] * 1200, "temperature": [20.0] * 1000 + [80.0] * 1000 + [50.0] * 400,
                          "y": np.arange(2400.0)})
    frame = frame.drop_duplicates(["solvent", "temperature"]).reset_index(drop=True)
    problem = _problem_of(frame, ("solvent", "temperature"), tmp_path, lab_budget=3)
    assert campaign_kernel(problem.spec, problem.pool) == "matern52"
    assert choose_kernel("conditions", "auto", problem.pool.features[:4]) == "tanimoto", "rows alone can mislead"


def test_a_requested_kernel_is_kept():
    assert choose_kernel("molecule", "matern52") == "matern52"
    assert choose_kernel("conditions", "tanimoto", np.array([[0.5]])) == "tanimoto"


def _mixed_pool(tmp_path):
    """Eight solvents at three temperatures: molecules and a number in one conditions pool."""
    solvents = ["CCO", "CC#N", "c1ccccc1", "CS(C)=O", "ClCCl", "CC(C)=O", "C1CCOC1", "O"]
    frame = pd.DataFrame([{"solvent": s, "temperature": t, "y": i - 0.02 * (t - 50) ** 2}
                          for i, s in enumerate(solvents) for t in (20.0, 50.0, 80.0)])
    path = tmp_path / "mixed.csv"
    frame.to_csv(path, index=False)
    config = BenchConfig(pool=str(path), id_cols=("solvent", "temperature"), objective="maximize:y", lab_budget=12,
                         seeds=1, arms=("bo",), batch=4)
    return load_problem(config, tmp_path / "work")


def test_molecules_and_numbers_get_tanimoto_times_matern(tmp_path):
    problem = _mixed_pool(tmp_path)
    kinds = problem.pool.feature_kinds
    assert set(kinds) == {"smiles", "numeric"} and list(kinds).count("numeric") == 1
    assert campaign_kernel(problem.spec, problem.pool) == "tanimoto_matern52"


def test_a_mixed_campaign_fits_one_lengthscale_per_number_and_replays_its_posterior(tmp_path):
    from orchestrator.bench.runner import arm_spec
    from orchestrator.loop.campaign import Campaign
    from orchestrator.policy.planners.surrogate import GPSurrogate

    problem = _mixed_pool(tmp_path)
    with Campaign.start(arm_spec(problem.spec, "bo", 0), db=":memory:", campaign_id="mixed") as campaign:
        summary = campaign.run()
        fits = [e.payload for e in campaign.ledger.events("mixed", types=["SurrogateUpdated"])
                if e.payload["hyperparameters"] and "refit" in e.payload["model"]]
    assert len(summary["measured"]) == 12
    assert fits and {f["model"] for f in fits} == {"pyro-gp:tanimoto_matern52:refit"}
    state = fits[-1]["hyperparameters"]
    numbers = [i for i, kind in enumerate(problem.pool.feature_kinds) if kind == "numeric"]
    assert state["continuous"] == numbers and len(state["lengthscale"]) == len(numbers)
    rows = [problem.pool.index[c] for c in summary["measured"][:8]]
    X, y = problem.pool.features[rows], problem.values[rows]
    rebuilt = GPSurrogate.from_hyperparameters(X, y, state)
    mean, sd = rebuilt.predict(problem.pool.features)
    assert np.all(np.isfinite(mean)) and np.all(sd >= 0)
    same_molecule = GPSurrogate.from_hyperparameters(X, y, state).kernel_matrix(problem.pool.features[:3])
    assert same_molecule[0, 1] < same_molecule[0, 0], "the temperature moves the covariance within one solvent"


def test_the_product_kernel_needs_its_number_columns():
    from orchestrator.policy.planners.surrogate import GPSurrogate
    from vocabulary.domain import SetupError

    X = np.array([[1.0, 0.0, 0.2], [0.0, 1.0, 0.9], [1.0, 1.0, 0.5]])
    fitted = GPSurrogate.fit(X, np.array([0.0, 1.0, 0.5]), kernel="tanimoto_matern52", continuous=[2], n_steps=20)
    assert fitted.hyperparameters["continuous"] == [2] and len(fitted.hyperparameters["lengthscale"]) == 1
    for bad in (None, [0, 1, 2], [5]):
        with pytest.raises(SetupError, match="tanimoto_matern52 kernel needs continuous columns"):
            GPSurrogate.fit(X, np.array([0.0, 1.0, 0.5]), kernel="tanimoto_matern52", continuous=bad)


def test_a_spec_may_name_the_product_kernel_for_categories_and_numbers(tmp_path):
    # auto gives one-hot categories and a number Matérn-5/2; a user may ask for the set similarity on the codes
    frame = pd.DataFrame([{"base": b, "temperature": t, "y": i + t / 100} for i, b in enumerate(["DBU", "TEA", "K2CO3"])
                          for t in (20.0, 50.0, 80.0)])
    problem = _problem_of(frame, ("base", "temperature"), tmp_path)
    assert campaign_kernel(problem.spec, problem.pool) == "matern52"
    assert campaign_kernel(_named(problem.spec, "tanimoto_matern52"), problem.pool) == "tanimoto_matern52"


def test_a_product_kernel_the_pool_cannot_split_is_refused_before_the_ledger_opens(tmp_path):
    from orchestrator.loop.campaign import Campaign
    from vocabulary.domain import SetupError

    frame = pd.DataFrame([{"x1": a, "x2": b, "y": a - b} for a in range(4) for b in range(3)])
    problem = _problem_of(frame, ("x1", "x2"), tmp_path)
    db = tmp_path / "ledger.db"
    with pytest.raises(SetupError, match="needs a conditions pool whose columns hold bits.*this pool has numeric.*auto"):
        Campaign.start(_named(problem.spec, "tanimoto_matern52"), db=str(db), campaign_id="numbers")
    assert not db.exists(), "nothing was written"
