"""The ladder with several objectives: a rung screens on the objective it estimates, and the lab slots go to the
candidates its calibrated predictions put on the front."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from orchestrator.loop.campaign import Campaign
from orchestrator.loop.nodes.screen import _front_ranking
from orchestrator.spec import SpecError, validate_spec
from vocabulary.events import expand_batches


def _spec(tmp_path, **rung) -> dict:
    rng = np.random.default_rng(0)
    x1, x2 = np.meshgrid(np.linspace(0, 1, 9), np.linspace(0, 1, 9))
    pool = pd.DataFrame({"x1": x1.ravel(), "x2": x2.ravel()})
    pool["a"] = pool.x1 + 0.2 * pool.x2
    pool["b"] = (1 - pool.x1) + 0.3 * np.sin(6 * pool.x2)
    pool["b_calc"] = 2.0 * pool["b"] + 0.05 * rng.standard_normal(len(pool))  # another unit, nearly exact
    pool.to_csv(tmp_path / "pool.csv", index=False)
    return {"campaign": {"name": "two", "kind": "conditions", "seed": 3},
            "objective": [{"property": "a", "direction": "maximize", "column": "a"},
                          {"property": "b", "direction": "maximize", "column": "b"}],
            "space": {"pool": str(tmp_path / "pool.csv"), "columns": ["x1", "x2"]},
            "ladder": [{"name": "b_rung", "simulator": "table", "column": "b_calc", "property": "b_calc",
                        "proxy": "b_calc", "cost_s": 1.0, **rung}],
            "screening": {"executor": "serial", "min_pairs": 3},
            "lab": {"driver": "simlab", "noise_sd": 0.0},
            "budget": {"lab_experiments": 18},
            "planner": {"main": "bo", "control_share": 0, "batch_size": 3, "n_initial": 3, "proposals_per_slot": 3}}


def test_a_rung_names_the_objective_it_estimates(tmp_path):
    spec = validate_spec(_spec(tmp_path, estimates="b"))
    assert spec.estimated_objective(spec.ladder[0]).property == "b"
    default = validate_spec(_spec(tmp_path))
    assert default.estimated_objective(default.ladder[0]).property == "a"  # by default the first
    with pytest.raises(SpecError, match=r"ladder\[0\]\.estimates: 'c' is not an objective; give one of: a, b"):
        validate_spec(_spec(tmp_path, estimates="c"))
    with pytest.raises(SpecError, match=r"ladder\[0\]\.estimates: 'b' needs a proxy"):
        validate_spec(_spec(tmp_path, estimates="b", proxy=None))


def test_front_ranking_puts_the_non_dominated_first_and_keeps_planner_order_within_a_rank():
    predictions = {"a": {"p": 1.0, "q": 0.0, "r": 2.0, "s": 0.5}, "b": {"p": 1.0, "q": 0.0, "r": 0.5}}
    ranked, scores = _front_ranking(predictions, ["q", "s", "p", "r"])
    # s has no b: it is given the others' mean there (0.5); r dominates it, and p and r are the front
    assert ranked == ["p", "r", "s", "q"]
    assert scores == {"p": 1.0, "r": 1.0, "s": 2.0, "q": 3.0}
    assert _front_ranking({"a": {"x": 0.0, "y": 0.0}}, ["y", "x"]) == (["y", "x"], {"y": 1.0, "x": 1.0})


def test_the_lab_slots_go_to_what_the_rung_puts_on_the_front_of_the_objective_it_estimates(tmp_path):
    spec = validate_spec(_spec(tmp_path, estimates="b"))
    with Campaign.start(spec, db=tmp_path / "c.db", campaign_id="c") as campaign:
        campaign.run()
        events = list(expand_batches(campaign.ledger.events("c")))
    rounds: dict[int, list[dict]] = {}
    for e in events:
        if e.type == "Promoted" and e.payload["to_rung"] == "lab" and "rungs" not in e.payload["reason"] and "predictions of a (planner), b" in e.payload["reason"]:
            rounds.setdefault(e.payload["iteration"], []).append(e.payload)
    assert len(rounds) >= 3, "once calibrated on b's lab values, the rung ranks the lab candidates every round"
    planner_order = {}
    for e in events:
        if e.type == "Proposed":
            planner_order.setdefault(e.payload["iteration"], []).append(e.payload["candidate_id"])
    overruled = 0
    for iteration, steps in rounds.items():
        promoted = [s for s in steps if s["decision"] == "promote"]
        held = [s for s in steps if s["decision"] == "hold"]
        assert promoted and max(s["score"] for s in promoted) <= min((s["score"] for s in held), default=np.inf)
        first = planner_order[iteration][0]
        overruled += all(s["candidate_id"] != first for s in promoted)
    assert overruled >= 1, "the rung's prediction of b changed at least one of the planner's choices"
