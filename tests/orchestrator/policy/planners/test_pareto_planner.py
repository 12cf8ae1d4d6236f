"""The bo arm on several objectives: log EHVI over the front, pending- and batch-aware, constraint-weighted."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from orchestrator.policy.planners import BOPlanner, PlanningContext, fit_surrogate_state
from orchestrator.policy.planners.pareto import ParetoPlanner
from orchestrator.space.pool import load_pool
from orchestrator.spec import (
    CampaignSpec,
    validate_spec,
)
from vocabulary.pareto import hypervolume, non_dominated

pytestmark = pytest.mark.skipif(
    "objectives" not in CampaignSpec.model_fields or "objective_values" not in PlanningContext.__dataclass_fields__,
    reason="needs contract 1 (several [[objective]], orchestrator/spec.py) and contract 3 (PlanningContext."
           "objective_values) to have landed")


def _frame(n: int = 240, seed: int = 0) -> pd.DataFrame:
    """Two conflicting objectives on a quarter circle: angle ``a`` trades f1 for f2, radius ``b`` improves both."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"a": rng.random(n), "b": rng.random(n)})
    theta, radius = frame["a"] * np.pi / 2, 0.5 + 0.5 * frame["b"]
    frame["f1"], frame["f2"] = radius * np.cos(theta), radius * np.sin(theta)
    frame["cost"] = frame["a"]  # an outcome the constraint reads: it forbids the high angles
    return frame


def _spec(tmp_path, frame: pd.DataFrame, *, tradeoff: dict | None = None, constraints: list | None = None,
          directions=("maximize", "maximize"), seed: int = 0, bounds=None):
    frame.to_csv(tmp_path / "pool.csv", index=False)
    objectives = [{"property": p, "direction": d, "column": p} for p, d in zip(("f1", "f2"), directions, strict=True)]
    if bounds is not None:
        objectives = [{**o, "bounds": bounds} for o in objectives]
    data = {
        "campaign": {"name": "pareto", "kind": "conditions", "seed": seed},
        "objective": objectives,
        "space": {"pool": str(tmp_path / "pool.csv"), "columns": ["a", "b"]},
        "lab": {"driver": "simlab", "oracle_column": "f1", "noise_sd": 0.0},
        "budget": {"lab_experiments": 40},
        "planner": {"main": "bo", "control": None, "control_share": 0.0, "batch_size": 5},
    }
    if tradeoff is not None:
        data["tradeoff"] = tradeoff
    if constraints is not None:
        data["constraint"] = constraints
    return validate_spec(data, source="test")


def _context(spec, pool, frame, observed, *, pending=(), seed=0, iteration=3) -> PlanningContext:
    observed = np.asarray(observed, dtype=int)
    pending = np.asarray(pending, dtype=int)
    values = frame[["f1", "f2"]].to_numpy()[observed]
    state = fit_surrogate_state(pool.features[observed], values[:, 0], kernel="matern52", seed=0)
    constraint_values = frame[["cost"]].to_numpy()[observed] if spec.constraints else None
    from vocabulary.pareto import tradeoff_utilities

    return PlanningContext(spec=spec, pool=pool, iteration=iteration,
                           available=np.setdiff1d(np.arange(len(pool)), np.concatenate([observed, pending])),
                           observed=observed, utilities=tradeoff_utilities(spec, values), pending=pending,
                           surrogate_state=state, seed=seed, objective_values=values,
                           constraint_values=constraint_values)


@pytest.fixture
def problem(tmp_path):
    frame = _frame()
    spec = _spec(tmp_path, frame)
    pool = load_pool(spec)
    observed = np.random.default_rng(1).choice(len(frame), 12, replace=False)
    return spec, pool, frame, observed


def _rows(pool, proposals) -> list[int]:
    return [pool.index[p.candidate.id] for p in proposals]


def test_the_bo_arm_hands_several_objectives_to_the_pareto_planner(problem):
    spec, pool, frame, observed = problem
    context = _context(spec, pool, frame, observed)
    proposals = BOPlanner().propose(context, 3)
    assert _rows(pool, proposals) == _rows(pool, ParetoPlanner(cold_start=BOPlanner()).propose(context, 3))
    assert "hypervolume" in proposals[0].rationale and "f1" in proposals[0].hypothesis and "f2" in proposals[0].hypothesis
    # expected / expected_sd are the first objective's, in its unit
    row = pool.index[proposals[0].candidate.id]
    assert proposals[0].expected == pytest.approx(frame["f1"][row], abs=4 * proposals[0].expected_sd + 0.05)


def test_a_batch_spreads_along_the_front_instead_of_piling_onto_one_end(problem):
    spec, pool, frame, observed = problem
    rows = _rows(pool, BOPlanner().propose(_context(spec, pool, frame, observed), 5))
    angles = frame["a"].to_numpy()[rows]
    assert len(set(np.digitize(angles, [0.2, 0.4, 0.6, 0.8]))) >= 3, angles
    # and the batch is worth its lab time: it grows the true front's hypervolume more than a random batch
    truth = frame[["f1", "f2"]].to_numpy()
    reference = np.zeros(2)
    picked = hypervolume(truth[np.concatenate([observed, rows])], reference)
    rng = np.random.default_rng(5)
    untested = np.setdiff1d(np.arange(len(frame)), observed)
    random = np.median([hypervolume(truth[np.concatenate([observed, rng.choice(untested, 5, replace=False)])],
                                    reference) for _ in range(20)])
    assert picked > random


def test_pending_jobs_are_believed_like_earlier_picks_of_the_batch(problem):
    spec, pool, frame, observed = problem
    first, second = _rows(pool, BOPlanner().propose(_context(spec, pool, frame, observed), 2))
    # with the first pick already in the lab, the next plan of one is the batch's second pick
    after = BOPlanner().propose(_context(spec, pool, frame, observed, pending=[first]), 1)
    assert _rows(pool, after) == [second]


def test_a_plan_is_the_same_for_the_same_seed(problem):
    spec, pool, frame, observed = problem
    once = BOPlanner().propose(_context(spec, pool, frame, observed), 4)
    again = BOPlanner().propose(_context(spec, pool, frame, observed), 4)
    assert [p.model_dump() for p in once] == [p.model_dump() for p in again]


def test_before_every_objective_has_data_it_proposes_the_initial_design(problem):
    spec, pool, frame, observed = problem
    proposals = BOPlanner().propose(_context(spec, pool, frame, observed[:1]), 3)
    assert len(proposals) == 3 and all("initial design" in p.hypothesis for p in proposals)


def test_an_outcome_constraint_keeps_the_batch_where_it_is_likely_met(tmp_path):
    frame = _frame()
    spec = _spec(tmp_path, frame, constraints=[{"property": "cost", "upper": 0.5, "column": "cost"}])
    pool = load_pool(spec)
    observed = np.random.default_rng(1).choice(len(frame), 16, replace=False)
    proposals = BOPlanner().propose(_context(spec, pool, frame, observed), 4)
    assert all(frame["a"][pool.index[p.candidate.id]] < 0.55 for p in proposals)
    assert "P(constraints met)" in proposals[0].rationale
    # without the constraint the same state sends some of the batch to the forbidden high angles
    free = _spec(tmp_path, frame)
    unconstrained = BOPlanner().propose(_context(free, load_pool(free), frame, observed), 4)
    assert any(frame["a"][pool.index[p.candidate.id]] > 0.5 for p in unconstrained)


def test_a_spec_reference_point_and_a_minimised_objective(tmp_path):
    frame = _frame()
    frame["f2"] = -frame["f2"]  # now minimised: the same front, mirrored
    spec = _spec(tmp_path, frame, directions=("maximize", "minimize"),
                 tradeoff={"method": "pareto", "reference_point": [0.0, 0.0]})
    pool = load_pool(spec)
    observed = np.random.default_rng(1).choice(len(frame), 12, replace=False)
    proposals = BOPlanner().propose(_context(spec, pool, frame, observed), 3)
    rows = _rows(pool, proposals)
    truth = np.column_stack([frame["f1"], -frame["f2"]])
    assert len(set(rows)) == 3 and all(np.isfinite(p.acquisition) for p in proposals)
    # the picks lie near the true front (big radius), not among the dominated interior
    assert np.median(frame["b"].to_numpy()[rows]) > 0.6
    assert non_dominated(truth).any()


def test_a_desirability_runs_the_single_objective_path_on_its_scalar(tmp_path):
    frame = _frame()
    spec = _spec(tmp_path, frame, tradeoff={"method": "desirability"}, bounds=(0.0, 1.0))
    pool = load_pool(spec)
    observed = np.random.default_rng(1).choice(len(frame), 12, replace=False)
    context = _context(spec, pool, frame, observed)
    proposals = BOPlanner().propose(context, 2)
    assert all("f1" in p.hypothesis and "f2" in p.hypothesis for p in proposals)
    assert "expected improvement" in proposals[0].rationale  # log EI on the scalar, not EHVI
    rows = _rows(pool, proposals)
    # a desirability (geometric mean) favours the balanced middle of the front
    assert all(0.15 < frame["a"][r] < 0.85 for r in rows)
    # planning on the scalar changes nothing else: same plan twice
    assert _rows(pool, BOPlanner().propose(dataclasses.replace(context), 2)) == rows


def test_joint_draws_of_earlier_picks_leave_nothing_for_their_copy_and_reduce_to_log_ehvi_without_them():
    from orchestrator.policy.planners.pareto import (
        ObjectiveModel,
        joint_log_ehvi,
        log_ehvi,
    )
    from vocabulary.pareto import HypervolumeCells

    rng = np.random.default_rng(0)
    models = [ObjectiveModel(None, None, is_value=False) for _ in range(2)]
    front, reference = np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([-1.0, -1.0])
    cells = HypervolumeCells.from_front(front, reference)
    mean, sd = np.array([[0.8, 0.8], [0.5, 0.9], [-0.5, -0.5]]), np.array([[0.3, 0.3], [0.2, 0.2], [0.1, 0.1]])
    draws = rng.standard_normal((64, 2))
    alone = joint_log_ehvi(cells, front, np.zeros((64, 0, 2)), models, mean, sd, np.zeros((3, 64, 2)), draws)
    np.testing.assert_allclose(alone, log_ehvi(cells, models, mean, sd, draws))
    # the first candidate was picked: in each draw it took its value, and its copy (no sd left) has nothing to add
    picked = (mean[0] + sd[0] * draws)[:, None, :]
    shift = np.zeros((3, 64, 2))
    shift[0] = sd[0] * draws
    after = joint_log_ehvi(cells, front, picked, models, mean, np.array([[0.0, 0.0], *sd[1:]]), shift, draws)
    assert after[0] < -1e3 < alone[0]  # the floor: no draw improves on the front with the pick in it
    assert after[1] <= alone[1] + 1e-12 and after[2] <= alone[2] + 1e-12
