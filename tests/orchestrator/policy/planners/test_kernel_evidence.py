"""``[planner] kernel = "evidence"``: the kernel chosen at each refit by leave-one-out predictive density."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("pyro")

from orchestrator.policy.planners.bo import fit_surrogate_state  # noqa: E402
from orchestrator.policy.planners.kernel_evidence import (  # noqa: E402
    EVIDENCE_MIN_RESULTS,
    evidence_candidates,
    fit_by_evidence,
    loo_log_density,
    loo_terms,
)
from orchestrator.policy.planners.surrogate import GPSurrogate  # noqa: E402
from orchestrator.spec import PlannerSpec  # noqa: E402
from tests.conftest import FREESOLV_SPEC  # noqa: E402


def _tanimoto(A: np.ndarray) -> np.ndarray:
    ab = A @ A.T
    norms = (A * A).sum(1)
    return ab / (norms[:, None] + norms[None, :] - ab)


def _tanimoto_draw(seed: int, n: int = 40, d: int = 64):
    """Fingerprints of varied sizes and a draw from a Tanimoto GP on them (noise sd 0.1)."""
    rng = np.random.default_rng(seed)
    X = (rng.random((n, d)) < rng.uniform(0.05, 0.5, size=(n, 1))).astype(float)
    return X, rng.multivariate_normal(np.zeros(n), _tanimoto(X) + 1e-2 * np.eye(n))


def _smooth_draw(seed: int, n: int = 30):
    rng = np.random.default_rng(seed)
    X = rng.random((n, 3))
    return X, np.sin(3 * X[:, 0]) + np.cos(2 * X[:, 1]) + 0.01 * rng.normal(size=n)


@pytest.mark.parametrize("kernel", ["matern52", "rbf", "tanimoto", "tanimoto_matern52"])
def test_the_closed_form_loo_equals_refits_without_each_point(kernel):
    rng = np.random.default_rng(1)
    X = (rng.random((12, 6)) < 0.4).astype(float)
    X[:, 5] = rng.random(12)
    y = rng.normal(size=12)
    continuous = [5] if kernel == "tanimoto_matern52" else None
    state = fit_surrogate_state(X, y, kernel=kernel, seed=0, continuous=continuous)
    surrogate = GPSurrogate.from_hyperparameters(X, y, state)
    mean, var = surrogate.leave_one_out()
    terms = []
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        without = GPSurrogate.from_hyperparameters(X[keep], y[keep], state)  # the same hyperparameters, no refit
        m, sd = without.predict(X[i:i + 1])
        v = sd[0] ** 2 + (state["noise"] + without._model.jitter) * state["y_sd"] ** 2
        assert without._model.jitter == surrogate._model.jitter
        assert mean[i] == pytest.approx(m[0], abs=1e-8) and var[i] == pytest.approx(v, abs=1e-8)
        terms.append(-0.5 * np.log(2 * np.pi * v) - 0.5 * (y[i] - m[0]) ** 2 / v)
    np.testing.assert_allclose(loo_terms(surrogate), terms, atol=1e-8)
    assert loo_log_density(surrogate) == pytest.approx(sum(terms), abs=1e-8)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_draws_from_a_tanimoto_gp_choose_tanimoto(seed):
    X, y = _tanimoto_draw(seed)
    state = fit_by_evidence(X, y, kind="molecule", seed=0)
    record = state["kernel_evidence"]
    assert record["candidates"] == ["tanimoto", "matern52", "rbf"]
    assert state["kernel"] == record["chosen"] == "tanimoto" and record["rule"] == "crossfit_loo"
    assert record["crossfit_loo"]["tanimoto"] == max(record["crossfit_loo"].values())


@pytest.mark.parametrize("seed", [0, 1])
def test_smooth_numbers_choose_a_distance_kernel_over_tanimoto(seed):
    X, y = _smooth_draw(seed)  # non-negative, so tanimoto can be fitted and scored beside them
    state = fit_by_evidence(X, y, kind="conditions", seed=0, candidates=["tanimoto", "matern52", "rbf"])
    assert state["kernel"] in ("matern52", "rbf")
    scores = state["kernel_evidence"]["crossfit_loo"]
    assert scores["tanimoto"] < scores[state["kernel"]]
    assert isinstance(state["lengthscale"], list) and len(state["lengthscale"]) == 3, "ARD, as BoTorch"


def test_the_plain_loo_at_the_full_fit_is_recorded_but_does_not_choose():
    X, y = _tanimoto_draw(0)
    record = fit_by_evidence(X, y, kind="molecule", seed=0)["kernel_evidence"]
    full = record["loo_log_density"]
    assert set(full) == set(record["crossfit_loo"]) and all(np.isfinite(v) for v in full.values())
    # the optimism of scoring each point by hyperparameters it helped fit: one lengthscale per bit looks best
    assert max(full, key=full.get) in ("matern52", "rbf") and record["chosen"] == "tanimoto"


def test_too_few_results_keep_the_auto_choice():
    X, y = _smooth_draw(0, n=EVIDENCE_MIN_RESULTS - 1)
    state = fit_by_evidence(X, y, kind="conditions", feature_kinds=np.array(["numeric"] * 3), seed=0)
    assert state["kernel"] == "matern52" and state["kernel_evidence"]["rule"] == "fallback"
    bits = (X > 0.5).astype(float)
    assert fit_by_evidence(bits, y, kind="molecule", seed=0)["kernel"] == "tanimoto"


def test_the_candidates_follow_the_pools_columns():
    X = np.array([[1.0, 0.0, 0.3], [0.0, 1.0, 0.8]])
    assert evidence_candidates("conditions", X, np.array(["smiles", "smiles", "numeric"])) == [
        "tanimoto_matern52", "matern52", "rbf"]
    assert evidence_candidates("conditions", X[:, :2], np.array(["categorical", "categorical"])) == [
        "tanimoto", "matern52", "rbf"]
    # a number column at its two extremes is still a number: no tanimoto on it, a Matérn factor for it
    assert evidence_candidates("conditions", X[:, :2], np.array(["categorical", "numeric"])) == [
        "matern52", "tanimoto_matern52", "rbf"]
    assert evidence_candidates("conditions", X - 1.0) == ["matern52", "rbf"]


def test_the_choice_is_the_same_under_the_same_seed():
    X, y = _tanimoto_draw(3, n=20)
    first = fit_by_evidence(X, y, kind="molecule", seed=7)
    assert json.dumps(first, sort_keys=True) == json.dumps(fit_by_evidence(X, y, kind="molecule", seed=7),
                                                           sort_keys=True)


def test_auto_stays_the_default():
    assert PlannerSpec().kernel == "auto"


def _evidence_campaign(tmp_path, name: str) -> tuple[dict, list[dict]]:
    """The README's FreeSolv campaign with ``kernel = "evidence"``, run by the CLI with ``--planner bo`` and a lab
    budget of 10 (no survey, no early stop): its JSON summary and its refits' ``SurrogateUpdated`` payloads."""
    from typer.testing import CliRunner

    from orchestrator.interfaces.cli import app
    from orchestrator.ledger import Ledger

    text = FREESOLV_SPEC.read_text().replace('pool = "data/', f'pool = "{FREESOLV_SPEC.parent}/data/')
    text = text.replace("proposals_per_slot = 3", 'proposals_per_slot = 3\nkernel = "evidence"')
    text = text.replace("on_target = true", "on_target = false") + "\n[screening]\nsurvey_share = 0.0\n"
    spec = tmp_path / f"{name}.toml"
    spec.write_text(text)
    db = tmp_path / f"{name}.db"
    result = CliRunner().invoke(app, ["run", str(spec), "--db", str(db), "--lab-budget", "10", "--planner", "bo",
                                      "--control-share", "0", "--json", "--campaign-id", name],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    ledger = Ledger.open(db)
    try:
        fits = [e.payload for e in ledger.events(name, types=["SurrogateUpdated"]) if "refit" in e.payload["model"]]
    finally:
        ledger.close()
    return json.loads(result.stdout), fits


def test_an_evidence_campaign_runs_records_its_choice_in_the_ledger_and_repeats_under_its_seed(tmp_path):
    summary, fits = _evidence_campaign(tmp_path, "ev")
    assert summary["n_lab"] == 10
    chosen = [f for f in fits if f["hyperparameters"]["kernel_evidence"]["rule"] == "crossfit_loo"]
    assert chosen, [f["n_train"] for f in fits]
    for fit in chosen:
        record = fit["hyperparameters"]["kernel_evidence"]
        assert fit["n_train"] >= EVIDENCE_MIN_RESULTS and record["candidates"][0] == "tanimoto"
        assert fit["model"] == f"pyro-gp:{record['chosen']}:refit" == f"pyro-gp:{fit['hyperparameters']['kernel']}:refit"
        assert set(record["crossfit_loo"]) == {"tanimoto", "matern52", "rbf"}
    early = [f for f in fits if f["n_train"] < EVIDENCE_MIN_RESULTS]
    assert early and all(f["hyperparameters"]["kernel_evidence"]["rule"] == "fallback" for f in early)
    again, fits_again = _evidence_campaign(tmp_path, "ev2")
    assert again["measured"] == summary["measured"]
    assert [f["hyperparameters"] for f in fits_again] == [f["hyperparameters"] for f in fits]
