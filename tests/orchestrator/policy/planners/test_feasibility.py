"""Failed runs that teach: the success classifier, and the bo arm weighing its acquisition by it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from orchestrator.policy.planners import BOPlanner, PlanningContext, fit_surrogate_state
from orchestrator.policy.planners.acquisition import select_batch
from orchestrator.policy.planners.feasibility import (
    outcome_log_weight,
    success_probability,
)
from orchestrator.policy.planners.surrogate import GPSurrogate
from orchestrator.space.pool import load_pool
from orchestrator.spec import validate_spec

FAILS_ABOVE = 0.6

needs_contract = pytest.mark.skipif(
    "failed" not in PlanningContext.__dataclass_fields__,
    reason="needs contract 3 (PlanningContext.failed) and lab.failure_policy = 'learn' (contract 1) to have landed")


@pytest.fixture
def line(tmp_path):
    """A 1-D conditions pool: the yield rises with x, but every run above x = 0.6 fails."""
    frame = pd.DataFrame({"x": np.linspace(0.0, 1.0, 81)})
    frame["y"] = frame["x"] + 0.1 * np.sin(9 * frame["x"])
    frame.to_csv(tmp_path / "pool.csv", index=False)
    spec = validate_spec({
        "campaign": {"name": "failures", "kind": "conditions", "seed": 0},
        "objective": {"property": "y", "direction": "maximize"},
        "space": {"pool": str(tmp_path / "pool.csv"), "columns": ["x"]},
        "lab": {"driver": "simlab", "oracle_column": "y", "noise_sd": 0.0, "failure_policy": "learn"},
        "budget": {"lab_experiments": 30},
        "planner": {"main": "bo", "control": None, "control_share": 0.0, "batch_size": 1},
    }, source="test")
    return spec, load_pool(spec), frame


def _context(spec, pool, frame, observed, failed, iteration=0, *, is_learned=True) -> PlanningContext:
    """``is_learned`` False: the failed candidates are only left out, as under a policy that does not learn."""
    observed, failed = np.asarray(observed, dtype=int), np.asarray(failed, dtype=int)
    values = frame["y"].to_numpy()[observed]
    state = fit_surrogate_state(pool.features[observed], values, kernel="matern52", seed=0)
    return PlanningContext(spec=spec, pool=pool, iteration=iteration,
                           available=np.setdiff1d(np.arange(len(pool)), np.concatenate([observed, failed])),
                           observed=observed, utilities=values, values=values, pending=np.zeros(0, dtype=int),
                           surrogate_state=state, seed=0, failed=failed if is_learned else np.zeros(0, dtype=int))


@needs_contract
def test_no_learned_failure_changes_nothing(line):
    spec, pool, frame = line
    context = _context(spec, pool, frame, [0, 20, 40], [])
    assert success_probability(context, context.available) is None
    assert outcome_log_weight(context, context.available) is None


@needs_contract
def test_the_classifier_puts_failures_where_they_happened(line):
    spec, pool, frame = line
    x = frame["x"].to_numpy()
    context = _context(spec, pool, frame, [0, 10, 20, 30, 40, 48], [56, 64, 72, 80])
    p = success_probability(context, np.arange(len(pool)))
    assert p.shape == (len(pool),) and np.all((0 < p) & (p < 1))
    assert p[x <= 0.5].min() > 0.6 and p[x >= 0.75].max() < 0.4


@needs_contract
def test_a_failed_region_stops_being_proposed(line):
    """A small closed loop: each proposal above x = 0.6 fails and is learned; after a few the arm stays below."""
    spec, pool, frame = line
    x = frame["x"].to_numpy()
    observed, failed, picks = [0, 40], [], []
    for iteration in range(18):
        [proposal] = BOPlanner().propose(_context(spec, pool, frame, observed, failed, iteration), 1)
        row = pool.index[proposal.candidate.id]
        picks.append(x[row])
        (failed if x[row] > FAILS_ABOVE else observed).append(row)
    assert len(failed) <= 5, picks
    assert all(p <= FAILS_ABOVE for p in picks[-6:]), picks
    # the contrast: with the same failures only left out, not learned, the arm goes straight back above 0.6
    blind = BOPlanner().propose(_context(spec, pool, frame, observed, failed, is_learned=False), 3)
    assert all(x[pool.index[p.candidate.id]] > FAILS_ABOVE for p in blind)


def test_a_zero_weight_gives_the_unweighted_batch():
    X = np.linspace(0, 1, 7)[:, None]
    y = np.sin(5 * X[:, 0])
    gp = GPSurrogate.fit(X, y, n_steps=30)
    pool = np.linspace(0, 1, 41)[:, None]
    pending = np.array([[0.3]])
    plain = select_batch(gp, X, y, pool, 4, pending=pending)
    weighted = select_batch(gp, X, y, pool, 4, pending=pending, log_weight=np.zeros(len(pool)))
    assert weighted[0] == plain[0]
    np.testing.assert_allclose(weighted[1], plain[1])
    target = select_batch(gp, X, y, pool, 3, target=0.2)
    assert select_batch(gp, X, y, pool, 3, target=0.2, log_weight=np.zeros(len(pool)))[0] == target[0]
