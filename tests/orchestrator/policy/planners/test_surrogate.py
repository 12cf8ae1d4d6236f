"""Tests for the pyro GP surrogate of the bo planner arm."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from orchestrator.policy.planners.surrogate import GPSurrogate
from vocabulary.domain import SetupError

REPO = Path(__file__).resolve().parents[4]


@pytest.fixture(scope="module")
def sine():
    X = np.linspace(0.0, 2 * np.pi, 12)[:, None]
    return X, np.sin(X[:, 0])


@pytest.fixture(scope="module")
def sine_surrogate(sine):
    return GPSurrogate.fit(*sine, seed=0)


@pytest.fixture(scope="module")
def fingerprints():
    rng = np.random.default_rng(3)
    X = (rng.random((25, 64)) < 0.2).astype(float)
    X[:, -3:] = 0.0  # bits no training row has, for queries the data says nothing about
    y = X[:, :8].sum(1) - X[:, 8:16].sum(1) + 0.1 * rng.normal(size=25)
    return X, y


# --------------------------------------------------------------------------------------------------- fit quality
def test_sine_fit_predicts_held_out_points(sine, sine_surrogate):
    X, _ = sine
    midpoints = (X[:-1] + X[1:]) / 2
    mean, sd = sine_surrogate.predict(midpoints)
    assert mean.shape == sd.shape == (11,)
    assert np.max(np.abs(mean - np.sin(midpoints[:, 0]))) < 0.05
    assert np.all(sd < 0.1)
    assert sine_surrogate.hyperparameters["is_fitted"] is True


def test_sd_grows_away_from_the_data(sine, sine_surrogate):
    X, _ = sine
    far = X[-1, 0] + np.array([0.5, 1.5, 3.0, 6.0])[:, None]
    _, sd_far = sine_surrogate.predict(far)
    _, sd_near = sine_surrogate.predict(X)
    assert np.all(np.diff(sd_far) > 0)
    assert sd_far[0] > sd_near.max()


def test_sd_is_of_the_latent_function_without_noise(fingerprints):
    surrogate = GPSurrogate.fit(*fingerprints, kernel="tanimoto")
    h = surrogate.hyperparameters
    far = np.zeros((1, 64))
    far[0, -3:] = 1.0  # bits no training row shares: similarity 0, so the posterior is the prior
    _, sd = surrogate.predict(far)
    assert sd[0] == pytest.approx(math.sqrt(h["variance"]) * h["y_sd"], rel=1e-9)


# --------------------------------------------------------------------------------------------------- serialisation
@pytest.mark.parametrize("kernel", ["matern52", "tanimoto"])
def test_hyperparameters_round_trip_through_json_gives_identical_predictions(kernel, fingerprints):
    X, y = fingerprints
    fitted = GPSurrogate.fit(X, y, kernel=kernel, n_steps=60)
    stored = json.loads(json.dumps(fitted.hyperparameters))
    assert stored == fitted.hyperparameters
    rebuilt = GPSurrogate.from_hyperparameters(X, y, stored)
    queries = np.vstack([X[:5], (np.random.default_rng(0).random((7, 64)) < 0.3).astype(float)])
    for a, b in zip(fitted.predict(queries), rebuilt.predict(queries), strict=True):
        assert np.array_equal(a, b)


def test_hyperparameters_are_plain_json_values(sine_surrogate):
    h = sine_surrogate.hyperparameters
    assert h["type"] == "gp_surrogate" and h["schema_version"] == 2 and h["kernel"] == "matern52"
    for name in ("variance", "lengthscale", "noise", "y_mean", "y_sd"):
        assert type(h[name]) is float
    assert "lengthscale" not in GPSurrogate.fit(np.eye(3), np.arange(3.0), kernel="tanimoto", n_steps=5).hyperparameters


def test_from_hyperparameters_rejects_tampered_values(sine, sine_surrogate):
    for change in ({"type": "other"}, {"schema_version": 99}, {"kernel": "periodic"}, {"noise": -1.0}, {"variance": "1"}):
        with pytest.raises(SetupError):
            GPSurrogate.from_hyperparameters(*sine, {**sine_surrogate.hyperparameters, **change})


# --------------------------------------------------------------------------------------------------- ARD and priors
@pytest.fixture(scope="module")
def one_relevant_feature():
    """y depends on the first of three features only."""
    X = np.random.default_rng(5).random((30, 3))
    return X, np.sin(6 * X[:, 0])


@pytest.mark.parametrize("priors", [False, True])
def test_ard_gives_irrelevant_features_long_lengthscales(one_relevant_feature, priors):
    X, y = one_relevant_feature
    surrogate = GPSurrogate.fit(X, y, ard=True, priors=priors, optimizer="lbfgs")
    lengthscale = surrogate.hyperparameters["lengthscale"]
    assert isinstance(lengthscale, list) and len(lengthscale) == 3 and all(type(v) is float for v in lengthscale)
    assert min(lengthscale[1:]) > 5 * lengthscale[0]
    queries = np.random.default_rng(6).random((200, 3))
    ard_error = np.abs(surrogate.predict(queries)[0] - np.sin(6 * queries[:, 0])).mean()
    isotropic_error = np.abs(GPSurrogate.fit(X, y).predict(queries)[0] - np.sin(6 * queries[:, 0])).mean()
    assert ard_error < 0.5 * isotropic_error


def test_ard_hyperparameters_round_trip_and_need_as_many_features(one_relevant_feature):
    X, y = one_relevant_feature
    fitted = GPSurrogate.fit(X, y, ard=True, priors=True, optimizer="lbfgs")
    stored = json.loads(json.dumps(fitted.hyperparameters))
    rebuilt = GPSurrogate.from_hyperparameters(X, y, stored)
    assert all(np.array_equal(a, b) for a, b in zip(fitted.predict(X[:7] + 0.01), rebuilt.predict(X[:7] + 0.01),
                                                      strict=True))
    posterior = rebuilt.pool_posterior(X[:9] + 0.02)
    posterior.add_fantasy(3)
    assert np.allclose(posterior.sd, rebuilt.fantasize(X[3:4] + 0.02).predict(X[:9] + 0.02)[1], atol=1e-6)
    with pytest.raises(SetupError, match="3 lengthscales but X has 2 features"):
        GPSurrogate.from_hyperparameters(X[:, :2], y, stored)
    with pytest.raises(SetupError, match="positive"):
        GPSurrogate.from_hyperparameters(X, y, {**stored, "lengthscale": [1.0, -1.0, 1.0]})


def test_priors_keep_the_noise_off_the_floor_where_the_likelihood_alone_interpolates(one_relevant_feature):
    X, y = one_relevant_feature
    plain = GPSurrogate.fit(X, y, ard=True, optimizer="lbfgs").hyperparameters
    with_priors = GPSurrogate.fit(X, y, ard=True, priors=True, optimizer="lbfgs").hyperparameters
    assert with_priors["noise"] > plain["noise"]


def test_schema_version_1_states_still_load(sine, sine_surrogate):
    stored = {**sine_surrogate.hyperparameters, "schema_version": 1}
    rebuilt = GPSurrogate.from_hyperparameters(*sine, stored)
    assert np.array_equal(rebuilt.predict(sine[0])[0], sine_surrogate.predict(sine[0])[0])


# --------------------------------------------------------------------------------------------------- determinism
def test_same_seed_gives_identical_fit(sine):
    a = GPSurrogate.fit(*sine, seed=4, n_steps=80)
    b = GPSurrogate.fit(*sine, seed=4, n_steps=80)
    assert a.hyperparameters == b.hyperparameters
    grid = np.linspace(-1, 8, 50)[:, None]
    assert all(np.array_equal(u, v) for u, v in zip(a.predict(grid), b.predict(grid), strict=True))


def test_fit_leaves_the_global_random_generators_alone(sine):
    np.random.seed(123)
    expected = np.random.random(3)
    np.random.seed(123)
    GPSurrogate.fit(*sine, seed=0, n_steps=5)
    assert np.array_equal(np.random.random(3), expected)


_FIT_SCRIPT = """
import json, numpy as np
from orchestrator.policy.planners.surrogate import GPSurrogate
X = np.linspace(0.0, 2 * np.pi, 12)[:, None]
s = GPSurrogate.fit(X, np.sin(X[:, 0]), seed=0, n_steps=80)
mean, sd = s.predict(np.linspace(-1, 8, 9)[:, None])
print(json.dumps({"h": s.hyperparameters, "p": [v.hex() for v in np.concatenate([mean, sd]).tolist()]}))
"""


@pytest.mark.slow
def test_fit_is_bit_identical_in_fresh_processes(sine):
    runs = [
        json.loads(subprocess.run([sys.executable, "-c", _FIT_SCRIPT], cwd=REPO, check=True, capture_output=True,
                                  text=True).stdout)
        for _ in range(2)
    ]
    assert runs[0] == runs[1]
    here = GPSurrogate.fit(*sine, seed=0, n_steps=80)
    assert runs[0]["h"] == json.loads(json.dumps(here.hyperparameters))


# --------------------------------------------------------------------------------------------------- tanimoto
@pytest.fixture(scope="module")
def tanimoto_surrogate():
    hyperparameters = {"type": "gp_surrogate", "schema_version": 1, "kernel": "tanimoto", "variance": 2.5,
                       "noise": 0.01, "y_mean": 0.0, "y_sd": 1.0, "is_fitted": False}
    return GPSurrogate.from_hyperparameters(np.ones((1, 6)), np.zeros(1), hyperparameters)


@settings(max_examples=60, deadline=None)
@given(arrays(np.float64, (5, 6), elements=st.floats(0.0, 10.0)))
def test_tanimoto_is_variance_on_the_diagonal_and_within_bounds(tanimoto_surrogate, X):
    K = tanimoto_surrogate.kernel_matrix(X)
    assert np.allclose(np.diag(K), 2.5, rtol=1e-12)
    assert np.all(K >= 0) and np.all(K <= 2.5 * (1 + 1e-12))
    assert np.allclose(K, K.T)


def test_tanimoto_matches_the_jaccard_index_on_bits(tanimoto_surrogate):
    a = np.array([[1, 1, 1, 0, 0, 0]], dtype=float)
    b = np.array([[0, 1, 1, 1, 0, 0]], dtype=float)
    assert tanimoto_surrogate.kernel_matrix(a, b)[0, 0] == pytest.approx(2.5 * 2 / 4)
    assert tanimoto_surrogate.kernel_matrix(a, np.zeros((1, 6)))[0, 0] == 0.0


def test_tanimoto_rejects_negative_features():
    with pytest.raises(SetupError, match="non-negative"):
        GPSurrogate.fit(np.array([[1.0, -1.0], [0.0, 1.0]]), np.array([0.0, 1.0]), kernel="tanimoto")


# --------------------------------------------------------------------------------------------------- tiny data
def test_single_point_uses_default_hyperparameters():
    surrogate = GPSurrogate.fit(np.array([[0.3, 0.3]]), np.array([2.0]))
    assert surrogate.hyperparameters["is_fitted"] is False
    mean, sd = surrogate.predict(np.array([[0.3, 0.3], [5.0, 5.0]]))
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(sd))
    assert mean[0] == pytest.approx(2.0, abs=0.05)
    assert sd[0] < sd[1]


@pytest.mark.parametrize("kernel", ["matern52", "tanimoto"])
def test_constant_y_predicts_the_constant(kernel):
    X = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    surrogate = GPSurrogate.fit(X, np.full(3, 7.0), kernel=kernel)
    mean, sd = surrogate.predict(X)
    assert np.allclose(mean, 7.0) and np.all(np.isfinite(sd))
    assert surrogate.hyperparameters["y_sd"] == 1.0


def test_duplicate_rows_with_different_values_fit():
    X = np.array([[0.0], [0.0], [1.0], [1.0]])
    surrogate = GPSurrogate.fit(X, np.array([0.0, 1.0, 2.0, 3.0]))
    mean, _ = surrogate.predict(np.array([[0.0], [1.0]]))
    assert mean == pytest.approx([0.5, 2.5], abs=0.2)


@pytest.mark.parametrize(
    ("X", "y", "match"),
    [
        (np.zeros((0, 2)), np.zeros(0), "at least one"),
        (np.zeros(3), np.zeros(3), "2-D"),
        (np.zeros((3, 1)), np.zeros(2), "shape"),
        (np.zeros((2, 1)), np.array([0.0, np.nan]), "NaN"),
        (np.array([[np.inf], [0.0]]), np.zeros(2), "NaN or inf"),
    ],
)
def test_bad_training_data_raises_setup_error(X, y, match):
    with pytest.raises(SetupError, match=match):
        GPSurrogate.fit(X, y)


def test_predict_checks_the_feature_count(sine_surrogate):
    with pytest.raises(SetupError, match="1"):
        sine_surrogate.predict(np.zeros((2, 3)))


# --------------------------------------------------------------------------------------------------- fantasies
def test_fantasize_keeps_the_mean_and_shrinks_the_sd(sine_surrogate):
    x = np.array([[7.5]])
    grid = np.linspace(6.0, 9.0, 13)[:, None]
    believed = sine_surrogate.fantasize(x)
    mean_before, sd_before = sine_surrogate.predict(grid)
    mean_after, sd_after = believed.predict(grid)
    assert np.allclose(mean_after, mean_before, atol=1e-9)
    assert np.all(sd_after <= sd_before + 1e-12)
    assert believed.predict(x)[1][0] < 0.5 * sine_surrogate.predict(x)[1][0]
    assert believed.hyperparameters == sine_surrogate.hyperparameters


def test_pool_posterior_fantasies_equal_rebuilding_the_gp(sine_surrogate):
    pool = np.linspace(-2.0, 10.0, 61)[:, None]
    posterior = sine_surrogate.pool_posterior(pool)
    mean, sd = sine_surrogate.predict(pool)
    assert np.allclose(posterior.mean, mean, atol=1e-9) and np.allclose(posterior.sd, sd, atol=1e-9)
    rebuilt = sine_surrogate
    for index in (60, 2, 55):
        posterior.add_fantasy(index)
        rebuilt = rebuilt.fantasize(pool[index : index + 1])
    mean, sd = rebuilt.predict(pool)
    assert np.allclose(posterior.mean, mean, atol=1e-8)
    assert np.allclose(posterior.sd, sd, atol=1e-6)
    assert posterior.fantasies == [60, 2, 55]



def test_a_fantasys_shift_is_how_the_pool_mean_moves_when_its_observation_comes_back_off(sine_surrogate):
    """``shift`` with one draw per fantasy: the mean's move when that fantasy's observation lands away from its
    prediction (a second fantasy's with the first held at its believed value), up to the draw's scale."""
    pool = np.linspace(-2.0, 10.0, 61)[:, None]
    posterior = sine_surrogate.pool_posterior(pool)
    X, y, h = sine_surrogate.X_train, sine_surrogate.y_train, sine_surrogate.hyperparameters
    believed = list(y)
    for n, index in enumerate((60, 20)):
        posterior.add_fantasy(index)
        before = GPSurrogate.from_hyperparameters(np.vstack([X, pool[[60, 20][:n + 1]]]),
                                                  np.array(believed + [posterior.mean[index]]), h).predict(pool)[0]
        off = GPSurrogate.from_hyperparameters(np.vstack([X, pool[[60, 20][:n + 1]]]),
                                               np.array(believed + [posterior.mean[index] + 1.0]), h).predict(pool)[0]
        z = np.zeros((n + 1, 1))
        z[n] = 1.0
        shift = posterior.shift(z)[:, 0]
        assert shift.shape == (61,)
        assert np.allclose(shift / shift[index], (off - before) / (off - before)[index], atol=1e-6)
        believed.append(posterior.mean[index])
    assert np.allclose(posterior.shift(np.zeros((2, 3))), 0.0)
    assert sine_surrogate.pool_posterior(pool).shift(np.zeros((0, 4))).shape == (61, 4)

# --------------------------------------------------------------------------------------------------- imports
def test_importing_the_planner_modules_does_not_import_torch():
    code = (
        "import sys, orchestrator.policy.planners.surrogate, orchestrator.policy.planners.acquisition; "
        "print(sorted(m for m in ('torch', 'pyro') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"


def test_missing_pyro_gives_the_install_hint(monkeypatch, sine):
    monkeypatch.setitem(sys.modules, "pyro", None)
    with pytest.raises(SetupError, match=r'pip install "closedloop\[bayes\]"'):
        GPSurrogate.fit(*sine)


def test_rebuilds_on_the_same_data_share_one_posterior(sine, sine_surrogate):
    X, y = sine
    stored = json.loads(json.dumps(sine_surrogate.hyperparameters))
    first = GPSurrogate.from_hyperparameters(X, y, stored)
    assert GPSurrogate.from_hyperparameters(X.copy(), y.copy(), dict(stored)) is first
    other = GPSurrogate.from_hyperparameters(X, y + 1.0, stored)
    assert other is not first
    X_new = np.array([[0.25], [2.0]])
    fresh = GPSurrogate(X, y, stored)  # the uncached constructor
    for got, expected in zip(first.predict(X_new), fresh.predict(X_new), strict=True):
        np.testing.assert_array_equal(got, expected)
