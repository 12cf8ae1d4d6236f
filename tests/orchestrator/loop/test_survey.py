"""The survey: an affordable proxy rung is read over the whole pool once, and the campaign plans with it."""

from __future__ import annotations

import pytest

from orchestrator.loop.campaign import Campaign
from tests.conftest import surveyed_freesolv
from vocabulary.events import expand_batches


@pytest.fixture
def small_freesolv(tmp_path):
    """40 FreeSolv molecules with the real ladder (descriptors, GFN2-xTB, GAFF table) and a survey allowed."""
    return surveyed_freesolv(tmp_path, n_molecules=40, lab_experiments=8)


def _run(spec, db, campaign_id):
    with Campaign.start(spec, db=db, campaign_id=campaign_id) as campaign:
        summary = campaign.run()
        return summary, list(expand_batches(campaign.ledger.events(campaign_id)))


def test_the_xtb_rung_is_surveyed_once_read_by_the_screen_and_charged(small_freesolv, tmp_path):
    summary, events = _run(small_freesolv, tmp_path / "a.db", "a")
    surveys = [e.payload for e in events if e.type == "RungSurveyed"]
    assert [s["rung"] for s in surveys] == ["xtb"]  # GAFF's pool-wide hour per molecule does not fit half the budget
    survey = surveys[0]
    assert survey["n_candidates"] == 40 and len(survey["values"]) == 40
    assert sum(v is not None for v in survey["values"].values()) >= 35 and survey["cost_s"] > 0
    simulated_xtb = [e.payload["observation"] for e in events if e.type == "Simulated" and e.payload["rung"] == "xtb"]
    assert simulated_xtb  # the screen records what it read for each candidate's trajectory ...
    assert all(o["parameters"] == {"read_from": "survey"} and o["cost_s"] == 0.0 for o in simulated_xtb)  # ... free
    for o in simulated_xtb:
        if o["status"] == "ok":
            assert o["properties"]["dg_solv_kcal_mol"] == survey["values"][o["candidate_id"]]
    assert summary["compute_s"] >= survey["cost_s"]  # the survey is charged to the compute budget
    fits = [e.payload["hyperparameters"] for e in events if e.type == "SurrogateUpdated" and e.payload["hyperparameters"]]
    assert fits and all(f.get("prior", {}).get("rung") in ("xtb", None) for f in fits)
    assert any(f.get("prior") for f in fits)  # the GP used the surveyed rung as its prior mean
    last = next(f["prior"] for f in reversed(fits) if f.get("prior"))
    reported = summary["ladder_prior"]  # what `closedloop run --json` says the GP last took from the ladder
    assert reported["rung"] == "xtb" and reported["form"] == "mean" and reported["slope"] == last["slope"]
    assert 0.0 <= reported["evidence"] <= 1.0 and reported["evidence"] == last["evidence"] and reported["n_train"] >= 2


def test_a_survey_replays_identically_under_a_new_id(small_freesolv, tmp_path):
    _, first = _run(small_freesolv, tmp_path / "b.db", "b1")
    _, second = _run(small_freesolv, tmp_path / "c.db", "b2")
    survey = lambda events: [e.payload for e in events if e.type == "RungSurveyed"]  # noqa: E731
    assert survey(first) == survey(second)
    order = lambda events: [e.payload["candidate_id"] for e in events if e.type == "Dispatched"]  # noqa: E731
    assert order(first) == order(second)


def test_no_survey_without_an_arm_that_uses_the_ladder(small_freesolv, tmp_path):
    spec = small_freesolv.with_overrides(planner="random", control_share=0.0)
    summary, events = _run(spec, tmp_path / "d.db", "d")
    assert not [e for e in events if e.type == "RungSurveyed"]
    assert not [e for e in events if e.type == "Simulated" and e.payload["rung"] in ("xtb", "gaff")]
    assert summary["n_lab"] == 8
