"""Tests for log expected improvement and Kriging-believer batch selection."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from orchestrator.policy.planners.acquisition import (
    log_expected_improvement,
    log_window_improvement,
    select_batch,
)
from orchestrator.policy.planners.surrogate import GPSurrogate
from vocabulary.domain import SetupError


def closed_form_ei(mean, sd, best):
    z = (mean - best) / sd
    return sd * (z * stats.norm.cdf(z) + stats.norm.pdf(z))


# --------------------------------------------------------------------------------------------------- log-EI
def test_log_ei_equals_the_log_of_closed_form_ei():
    mean, sd = np.meshgrid(np.linspace(-5.0, 5.0, 81), np.array([0.01, 0.3, 1.0, 4.0]))
    ei = closed_form_ei(mean, sd, best=0.7)
    is_representable = ei > 1e-200
    assert is_representable.sum() > 250
    values = log_expected_improvement(mean, sd, 0.7)
    assert values.shape == mean.shape
    assert np.allclose(values[is_representable], np.log(ei[is_representable]), rtol=1e-10, atol=0)


@settings(max_examples=200, deadline=None)
@given(
    mean=st.floats(-20.0, 20.0),
    sd=st.floats(1e-3, 1e3),
    best=st.floats(-20.0, 20.0),
)
def test_log_ei_matches_closed_form_wherever_ei_is_not_tiny(mean, sd, best):
    ei = closed_form_ei(mean, sd, best)
    if ei > 1e-100:
        assert log_expected_improvement(np.array([mean]), np.array([sd]), best)[0] == pytest.approx(
            math.log(ei), rel=1e-9, abs=1e-12
        )


def test_log_ei_is_finite_and_increasing_for_very_negative_z():
    z = np.concatenate([-np.logspace(100, 0, 20001), np.linspace(-1.0, 8.0, 2001)[1:]])
    values = log_expected_improvement(z, np.ones_like(z), 0.0)
    assert np.all(np.isfinite(values))
    assert np.all(np.diff(values) > 0)


@pytest.mark.parametrize("boundary", [-1.0, -1 / math.sqrt(np.finfo(float).eps)])
def test_log_ei_is_continuous_across_its_branches(boundary):
    z = boundary * np.array([1 + 1e-9, 1.0, 1 - 1e-9])
    values = log_expected_improvement(z, np.ones(3), 0.0)
    assert np.all(np.diff(values) > 0)
    assert values[2] - values[0] < 1e-6 * max(1.0, abs(values[1]))


def test_log_ei_scales_with_the_units_of_y():
    mean, sd = np.array([-3.0, 0.5, 2.0]), np.array([0.5, 1.0, 2.0])
    scaled = log_expected_improvement(1000 * mean, 1000 * sd, 1000 * 0.2)
    assert np.allclose(scaled, log_expected_improvement(mean, sd, 0.2) + math.log(1000), rtol=1e-12)


def test_log_ei_with_zero_sd_is_the_log_of_the_plain_improvement():
    values = log_expected_improvement(np.array([2.0, 1.0, 0.5]), np.zeros(3), 1.0)
    assert values[0] == pytest.approx(0.0) and values[1] == -np.inf and values[2] == -np.inf


def test_log_ei_rejects_negative_sd():
    with pytest.raises(SetupError):
        log_expected_improvement(np.zeros(2), np.array([1.0, -1.0]), 0.0)


# --------------------------------------------------------------------------------------------------- batches
def sine_bump(x):
    return np.sin(2 * np.pi * x)  # maximum at x = 0.25 on [0, 1]


@pytest.fixture(scope="module")
def toy():
    X = np.array([[0.0], [0.2], [0.45], [0.7], [1.0]])
    y = sine_bump(X[:, 0])
    pool = np.linspace(0.0, 1.0, 101)[:, None]
    return GPSurrogate.fit(X, y), X, y, pool


@pytest.fixture(scope="module")
def toy_above_incumbent():
    """Sparse data around the peak, so the posterior mean at the first pick exceeds every observed value."""
    X = np.array([[0.0], [0.15], [0.35], [0.7], [1.0]])
    y = sine_bump(X[:, 0])
    return GPSurrogate.fit(X, y), X, y, np.linspace(0.0, 1.0, 101)[:, None]


def test_select_batch_returns_q_distinct_indices(toy):
    surrogate, X, y, pool = toy
    indices, values = select_batch(surrogate, X, y, pool, q=8)
    assert len(indices) == len(values) == 8
    assert len(set(indices)) == 8
    assert all(isinstance(i, int) and 0 <= i < len(pool) for i in indices)
    assert all(math.isfinite(v) for v in values)
    assert values == sorted(values, reverse=True)  # believing earlier picks can only lower the EI of later ones


def test_select_batch_can_take_the_whole_pool():
    surrogate = GPSurrogate.fit(np.array([[0.0], [1.0]]), np.array([0.0, 1.0]), n_steps=20)
    indices, _ = select_batch(surrogate, np.array([[0.0], [1.0]]), np.array([0.0, 1.0]), np.eye(4)[:, :1], q=4)
    assert sorted(indices) == [0, 1, 2, 3]


def test_first_pick_is_in_the_maximum_region(toy):
    surrogate, X, y, pool = toy
    indices, _ = select_batch(surrogate, X, y, pool, q=1)
    assert abs(pool[indices[0], 0] - 0.25) < 0.05


def test_a_pending_point_near_the_maximum_pushes_the_next_pick_away(toy):
    surrogate, X, y, pool = toy
    first, _ = select_batch(surrogate, X, y, pool, q=1)
    pending = pool[first]
    indices, _ = select_batch(surrogate, X, y, pool, q=1, pending=pending)
    assert abs(pool[indices[0], 0] - pending[0, 0]) > 0.1


@pytest.mark.parametrize("name", ["toy", "toy_above_incumbent"])
def test_pending_points_count_like_earlier_picks(name, request):
    surrogate, X, y, pool = request.getfixturevalue(name)
    indices, values = select_batch(surrogate, X, y, pool, q=3)
    after_pending, pending_values = select_batch(surrogate, X, y, pool, q=2, pending=pool[indices[:1]])
    assert after_pending == indices[1:]
    assert np.allclose(pending_values, values[1:], rtol=1e-8)


@pytest.mark.parametrize("name", ["toy", "toy_above_incumbent"])
def test_picks_equal_refitting_free_rebuilds_with_believed_values(name, request):
    surrogate, X, y, pool = request.getfixturevalue(name)
    indices, values = select_batch(surrogate, X, y, pool, q=4)
    if name == "toy_above_incumbent":
        assert surrogate.predict(pool[indices[:1]])[0][0] > y.max()  # so the incumbent must rise with the belief
    believed, best = surrogate, y.max()
    for step, (index, value) in enumerate(zip(indices, values, strict=True)):
        mean, sd = believed.predict(pool)
        scores = log_expected_improvement(mean, np.maximum(sd, 1e-6 * surrogate.hyperparameters["y_sd"]), best)
        scores[indices[:step]] = -np.inf
        assert int(np.argmax(scores)) == index
        assert scores[index] == pytest.approx(value, rel=1e-7)
        best = max(best, mean[index])
        believed = believed.fantasize(pool[index : index + 1])


def test_select_batch_reuses_hyperparameters_on_new_training_data(toy):
    surrogate, X, y, pool = toy
    X_more = np.vstack([X, [[0.3]]])
    y_more = np.append(y, sine_bump(0.3))
    expected = select_batch(GPSurrogate.from_hyperparameters(X_more, y_more, surrogate.hyperparameters),
                            X_more, y_more, pool, q=3)
    assert select_batch(surrogate, X_more, y_more, pool, q=3) == expected


@pytest.mark.parametrize("q", [0, 102])
def test_select_batch_rejects_impossible_batch_sizes(toy, q):
    surrogate, X, y, pool = toy
    with pytest.raises(SetupError, match="q="):
        select_batch(surrogate, X, y, pool, q=q)


def test_select_batch_rejects_a_pool_with_other_features(toy):
    surrogate, X, y, _ = toy
    with pytest.raises(SetupError, match="X_pool"):
        select_batch(surrogate, X, y, np.zeros((5, 2)), q=1)


def test_select_batch_on_a_fingerprint_pool():
    rng = np.random.default_rng(0)
    pool = (rng.random((300, 128)) < 0.1).astype(float)
    weights = rng.normal(size=128)
    observed = rng.choice(300, 30, replace=False)
    X, y = pool[observed], pool[observed] @ weights
    surrogate = GPSurrogate.fit(X, y, kernel="tanimoto", n_steps=50)
    indices, values = select_batch(surrogate, X, y, pool, q=5, pending=pool[:2])
    assert len(set(indices)) == 5 and all(math.isfinite(v) for v in values)


# --------------------------------------------------------------------------------------------------- usefulness
def two_peaks(x):
    return np.sin(3 * np.pi * x) * np.exp(-x) + 0.8 * np.exp(-(((x - 0.83) / 0.05) ** 2))


@pytest.mark.slow
def test_ei_batches_find_the_maximum_sooner_than_random_picks():
    pool = np.linspace(0.0, 1.0, 401)[:, None]
    values = two_peaks(pool[:, 0])
    is_good = values >= values.max() - 0.05  # the narrow global peak only, about 2.5% of the pool
    # Drawing without replacement, the expected number of draws until one of k good rows out of N is (N+1)/(k+1).
    random_expected = (len(pool) + 1) / (is_good.sum() + 1)
    evaluations = []
    for seed in range(4):
        chosen = list(np.random.default_rng(seed).choice(len(pool), 3, replace=False))
        while not is_good[chosen].any() and len(chosen) < 60:
            surrogate = GPSurrogate.fit(pool[chosen], values[chosen], seed=seed, n_steps=100)
            rest = np.setdiff1d(np.arange(len(pool)), chosen)
            picks, _ = select_batch(surrogate, pool[chosen], values[chosen], pool[rest], q=2)
            chosen += [int(i) for i in rest[picks]]
        evaluations.append(len(chosen))
    assert np.mean(evaluations) < 0.5 * random_expected


# --------------------------------------------------------------------------------------------------- target windows
def numerical_window_ei(mean, sd, target, distance):
    from scipy import integrate

    def integrand(v):
        return (distance - abs(v - target)) * stats.norm.pdf(v, mean, sd)

    return integrate.quad(integrand, target - distance, target + distance, points=[target], epsabs=0, limit=200)[0]


@pytest.mark.parametrize(("mean", "sd", "distance"), [(1.4, 0.1, 0.2), (1.6, 0.1, 0.2), (3.0, 0.5, 0.2),
                                                      (1.45, 2.0, 0.01), (-3.0, 1.0, 0.5), (6.0, 1.0, 2.0),
                                                      (-5.0, 1.0, 0.05)])
def test_window_improvement_is_the_expected_improvement_of_the_folded_utility(mean, sd, distance):
    expected = numerical_window_ei(mean, sd, 1.4, distance)
    value = log_window_improvement(np.array([mean]), np.array([sd]), 1.4, distance)[0]
    assert value == pytest.approx(math.log(expected), abs=2e-3)


def test_window_improvement_is_finite_and_falls_off_on_both_sides():
    z = np.linspace(-60.0, 60.0, 2001)
    values = log_window_improvement(z, np.ones_like(z), 0.0, 0.3)
    assert np.all(np.isfinite(values))
    assert np.all(np.diff(values[z < 0]) > 0) and np.all(np.diff(values[z > 0]) < 0)
    certain = log_window_improvement(np.array([0.1, 1.0]), np.zeros(2), 0.0, 0.3)
    assert certain[0] == pytest.approx(math.log(0.2)) and certain[1] == -np.inf


def test_select_batch_with_a_target_picks_where_the_value_crosses_it():
    X = np.linspace(0.0, 1.0, 9)[:, None]
    y = 3.0 * X[:, 0]  # the value rises through the target 1.5 at x = 0.5; the utility -|y - 1.5| folds there
    surrogate = GPSurrogate.fit(X[[0, 1, 7, 8]], y[[0, 1, 7, 8]])
    pool = np.linspace(0.0, 1.0, 101)[:, None]
    indices, values = select_batch(surrogate, X[[0, 1, 7, 8]], y[[0, 1, 7, 8]], pool, q=3, target=1.5)
    assert abs(pool[indices[0], 0] - 0.5) < 0.06
    assert len(set(indices)) == 3 and all(math.isfinite(v) for v in values)
