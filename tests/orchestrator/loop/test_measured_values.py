"""Measured values beyond the first objective travel from the simulated lab to the planning context; failures the
campaign learns from are never retried and never proposed again (issue 48, contracts 2 and 3)."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrator.loop.campaign import Campaign
from orchestrator.loop.view.lab_jobs import LabJobs
from orchestrator.policy.planners.random_arm import RandomPlanner
from orchestrator.spec import CampaignSpec
from vocabulary.events import Dispatched, Observed


def pool_csv(tmp_path) -> str:
    """A 5 x 5 grid of conditions with three truth columns: a (maximised), b (minimised) and pdi (constrained)."""
    lines = ["x,y,a,b,pdi"]
    for x in range(5):
        for y in range(5):
            lines.append(f"{x},{y},{x * 10 + y - 20},{100 + 3 * x - y},{0.1 * (y + 1)}")
    path = tmp_path / "pool.csv"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def spec_for(tmp_path, *, objectives: int = 2, constraint: bool = True, budget: int = 8, **lab) -> CampaignSpec:
    objective = [{"property": "a", "direction": "maximize", "column": "a"},
                 {"property": "b", "direction": "minimize", "column": "b", "noise_sd": 0.5, "unit": "nm"}]
    data = {
        "campaign": {"name": "grid", "kind": "conditions", "seed": 2},
        "objective": objective[:objectives] if objectives > 1 else objective[0],
        "space": {"pool": pool_csv(tmp_path), "columns": ["x", "y"]},
        "lab": {"driver": "simlab", "oracle_column": "a", "noise_sd": 0.1, **lab},
        "budget": {"lab_experiments": budget},
        "planner": {"main": "random", "control": None, "control_share": 0, "batch_size": 2, "n_initial": 2},
        "stop": {"on_target": False},
    }
    if constraint:
        data["constraint"] = [{"property": "pdi", "upper": 0.3, "column": "pdi", "noise_sd": 0.01}]
    return CampaignSpec.model_validate(data)


@pytest.fixture
def contexts(monkeypatch):
    """Every PlanningContext the random arm plans on."""
    seen = []
    propose = RandomPlanner.propose

    def recording(self, context, n):
        seen.append(context)
        return propose(self, context, n)

    monkeypatch.setattr(RandomPlanner, "propose", recording)
    return seen


def run(spec, tmp_path, cid="grid"):
    with Campaign.start(spec, db=tmp_path / f"{cid}.db", campaign_id=cid) as campaign:
        campaign.run()
        return campaign.ledger.events(cid), campaign.ctx.view.history()


def test_a_two_objective_campaign_observes_every_property_and_plans_on_them(tmp_path, contexts):
    events, history = run(spec_for(tmp_path), tmp_path)
    observed = [e.payload for e in events if e.type == Observed.type]
    assert len(observed) == 8 and all(set(p["values"]) == {"b", "pdi"} for p in observed)
    assert len(history.measured) == len(history.results) == 8
    for (cid, _, value, _), measured in zip(history.results, history.measured, strict=True):
        assert measured["a"] == value and set(measured) == {"a", "b", "pdi"}
    last = contexts[-1]
    n = len(last.observed)
    assert n > 0 and last.objective_values.shape == (n, 2) and last.constraint_values.shape == (n, 1)
    assert last.values is None and last.utilities.shape == (n,) and np.isfinite(last.utilities).all()
    assert last.failed.dtype.kind == "i" and last.failed.size == 0


def test_one_objective_plans_as_before(tmp_path, contexts):
    run(spec_for(tmp_path, objectives=1, constraint=False, budget=4), tmp_path)
    last = contexts[-1]
    assert last.objective_values is None and last.constraint_values is None and last.values is not None
    np.testing.assert_allclose(last.values, last.utilities)  # maximize: utility is the value


def test_under_learn_a_failed_candidate_is_never_retried_nor_proposed_again(tmp_path, contexts):
    # a <= -10 fails: the grid rows with x = 0 or (x = 1 and y = 0); about a quarter of the pool
    spec = spec_for(tmp_path, objectives=1, constraint=False, budget=14, failure_policy="learn",
                    fails_at_or_below=-10.0, tolerated_failure_rate=1.0)
    events, history = run(spec, tmp_path)
    failed = [e.payload for e in events if e.type == Observed.type and e.payload["status"] == "failed"]
    assert failed and all(p["reason"] == "no product: true a <= -10" for p in failed)
    handled = {e.payload["job_key"]: e.payload["action"] for e in events if e.type == "FailureHandled"}
    assert {handled[p["job_key"]] for p in failed} == {"skip"}, "a learned failure is never retried"
    dispatched = [e.payload["candidate_id"] for e in events if e.type == Dispatched.type]
    assert len(dispatched) == len(set(dispatched)), "no candidate is dispatched twice"
    learned = [p["candidate_id"] for p in failed]
    assert list(history.learned_failures) == learned
    assert any(c.failed.size for c in contexts), "the planners saw the learned failures"
    later = contexts[-1]
    pool_ids = {int(i) for i in later.failed}
    assert len(pool_ids) == len(later.failed) and not pool_ids & {int(i) for i in later.available}


def test_without_learn_the_same_failures_are_not_learned(tmp_path):
    spec = spec_for(tmp_path, objectives=1, constraint=False, budget=10, failure_policy="skip",
                    fails_at_or_below=-10.0, tolerated_failure_rate=1.0)
    events, history = run(spec, tmp_path)
    assert any(e.type == Observed.type and e.payload["status"] == "failed" for e in events)
    assert history.learned_failures == ()


def _event(type_, seq, **payload):
    from types import SimpleNamespace

    return SimpleNamespace(type=type_, seq=seq, payload=payload)


def test_lab_history_folds_measured_values_and_learned_failures_in_order():
    jobs = LabJobs(lambda v: v, property="a")
    common = dict(arm="bo", iteration=0, driver="simlab", sim_time_s=0.0)
    for seq, cid in enumerate(["c1", "c2", "c3", "c4"]):
        jobs.on(_event(Dispatched.type, seq, job_key=f"k/{cid}", candidate_id=cid, **common))
    jobs.on(_event(Observed.type, 10, job_key="k/c1", candidate_id="c1", value=1.0, status="ok",
                   values={"b": 2.0}, **common))
    jobs.on(_event(Observed.type, 11, job_key="k/c2", candidate_id="c2", value=None, status="failed",
                   reason="phase separated", infeasible=True, **common))
    jobs.on(_event(Observed.type, 12, job_key="k/c3", candidate_id="c3", value=None, status="failed",
                   reason="robot jam", **common))
    jobs.on(_event(Observed.type, 13, job_key="k/c4", candidate_id="c4", value=3.0, status="ok", **common))
    history = jobs.history()
    assert history.measured == ({"a": 1.0, "b": 2.0}, {"a": 3.0})
    assert history.learned_failures == ("c2",), "only the infeasible one, outside failure policy 'learn'"
    learning = LabJobs(lambda v: v, property="a", learns_failures=True)
    for event in [_event(Dispatched.type, 0, job_key="k/c3", candidate_id="c3", **common),
                  _event(Observed.type, 1, job_key="k/c3", candidate_id="c3", value=None, status="failed",
                         reason="robot jam", **common),
                  _event(Observed.type, 2, job_key="k/off", candidate_id="c9", value=None, status="failed",
                         reason="no product", provenance="imported", **common)]:
        learning.on(event)
    assert learning.history().learned_failures == ("c3", "c9")
