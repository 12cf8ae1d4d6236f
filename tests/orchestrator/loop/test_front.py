"""The measured Pareto front of a campaign with several objectives (issue 48, contract 5)."""

from __future__ import annotations

import json

import pytest

from orchestrator.ledger import Ledger
from orchestrator.loop.campaign import Campaign
from orchestrator.loop.front import campaign_front, hypervolume_unit, ledger_front
from orchestrator.loop.view.lab_jobs import LabHistory
from orchestrator.spec import CampaignSpec


def spec_of(*, objectives: int = 2, reference=None, constraint: dict | None = None, pool=None) -> CampaignSpec:
    objective = [{"property": "a", "direction": "maximize", "column": "a", "unit": "%"},
                 {"property": "b", "direction": "minimize", "column": "b", "unit": "nm"}]
    data = {
        "campaign": {"name": "f", "kind": "conditions", "seed": 1},
        "objective": objective if objectives > 1 else objective[0],
        "space": pool or {"inline": [{"x": 1.0, "a": 1.0, "b": 1.0, "c": 0.0}], "columns": ["x"]},
        "lab": {"driver": "simlab", "oracle_column": "a"},
        "budget": {"lab_experiments": 6},
    }
    if reference is not None:
        data["tradeoff"] = {"reference_point": reference}
    if constraint is not None:
        data["constraint"] = [constraint]
    return CampaignSpec.model_validate(data)


def history_of(*measured: dict[str, float]) -> LabHistory:
    ids = [f"c{k}" for k in range(len(measured))]
    return LabHistory(tested=frozenset(ids), pending=(), failures=(), n_dispatched=len(ids),
                      results=tuple((cid, "bo", m["a"], m["a"]) for cid, m in zip(ids, measured)),
                      measured=tuple(measured))


def test_front_points_hypervolume_and_curve_with_a_given_reference():
    history = history_of({"a": 2.0, "b": 5.0}, {"a": 1.0, "b": 6.0}, {"a": 3.0, "b": 8.0})
    front = campaign_front(spec_of(reference=[0.0, 10.0]), history, describe=lambda cid: f"label {cid}")
    assert [p.candidate_id for p in front.points] == ["c0", "c2"]
    assert [p.label for p in front.points] == ["label c0", "label c2"]
    assert front.points[1].values == {"a": 3.0, "b": 8.0}
    # boxes above (0, 10): 2 x 5 and 3 x 2, overlapping 2 x 2
    assert front.hypervolume == pytest.approx(12.0)
    assert front.hypervolume_by_experiment == pytest.approx([10.0, 10.0, 12.0])
    assert front.reference_point == [0.0, 10.0] and not front.reference_inferred
    assert front.properties == ["a", "b"] and front.directions == ["maximize", "minimize"]
    assert front.units == ["%", "nm"] and hypervolume_unit(front.units) == "% x nm"
    assert front.n_results == 3


def test_inferred_reference_is_the_nadir_less_a_tenth_of_the_range_in_units():
    history = history_of({"a": 2.0, "b": 5.0}, {"a": 4.0, "b": 9.0})
    front = campaign_front(spec_of(), history)
    assert front.reference_inferred
    # a (max): nadir 2, range 2 -> 1.8; b (min): nadir 9, range 4 -> 9.4
    assert front.reference_point == pytest.approx([1.8, 9.4])
    assert front.hypervolume > 0
    curve = front.hypervolume_by_experiment
    assert all(later >= earlier for earlier, later in zip(curve, curve[1:]))


def test_a_result_breaking_a_constraint_is_never_on_the_front():
    constraint = {"property": "c", "upper": 0.3, "column": "c"}
    history = history_of({"a": 5.0, "b": 1.0, "c": 0.9}, {"a": 2.0, "b": 5.0, "c": 0.1},
                         {"a": 1.0, "b": 4.0, "c": 0.2})
    front = campaign_front(spec_of(reference=[0.0, 10.0], constraint=constraint), history)
    assert [p.candidate_id for p in front.points] == ["c1", "c2"]
    assert all(p.meets_constraints for p in front.points)
    assert front.n_breaking_constraints == 1
    assert front.hypervolume_by_experiment[0] == 0.0  # the breaking result adds no volume


def test_a_result_missing_an_objective_adds_nothing():
    front = campaign_front(spec_of(reference=[0.0, 10.0]), history_of({"a": 2.0, "b": 5.0}, {"a": 9.0}))
    assert [p.candidate_id for p in front.points] == ["c0"]
    assert front.hypervolume == pytest.approx(10.0)


def test_one_objective_or_no_results_has_no_front():
    assert campaign_front(spec_of(objectives=1), history_of({"a": 1.0, "b": 2.0})) is None
    assert campaign_front(spec_of(), history_of()) is None


def test_a_campaign_reports_its_front_in_the_summary(tmp_path):
    lines = ["x,y,a,b"] + [f"{x},{y},{x + y},{x - y + 10}" for x in range(4) for y in range(4)]
    path = tmp_path / "pool.csv"
    path.write_text("\n".join(lines) + "\n")
    spec = spec_of(pool={"pool": str(path), "columns": ["x", "y"]}).model_copy(deep=True)
    spec = CampaignSpec.model_validate({**spec.model_dump(), "planner": {
        "main": "random", "control": None, "control_share": 0, "batch_size": 2, "n_initial": 2},
        "stop": {"on_target": False}})
    db = tmp_path / "f.db"
    with Campaign.start(spec, db=db, campaign_id="f") as campaign:
        summary = campaign.run()
    front = summary["front"]
    json.dumps(front)  # JSON-ready
    assert front["n_results"] == summary["n_lab"] == 6
    assert len(front["hypervolume_by_experiment"]) == 6
    assert front["points"] and all("x=" in p["label"] for p in front["points"])
    ledger = Ledger.open(db)
    try:
        again = ledger_front(ledger, "f", spec)
    finally:
        ledger.close()
    assert again.as_dict() == front
    # every measured point is dominated by, or is, a front point
    on = [tuple(p["values"][k] for k in ("a", "b")) for p in front["points"]]
    assert all(b == min(v[1] for v in on if v[0] == a) for a, b in on)
