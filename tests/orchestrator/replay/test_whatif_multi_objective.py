"""What-if replay of a campaign with two objectives: the same decisions under another rubric reproduce the
measured front, another planner is compared by hypervolume, and recorded results answer every objective."""

from __future__ import annotations

import pytest

from orchestrator.ledger import Ledger, verify
from orchestrator.loop.campaign import Campaign
from orchestrator.loop.front import ledger_front
from orchestrator.replay.whatif import what_if
from tests.rewards.two_objectives import two_objective_spec

REFERENCE = [-1.0, 15.0]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    db = tmp_path_factory.mktemp("whatif2") / "recorded.db"
    with Campaign.start(two_objective_spec(tradeoff={"reference_point": REFERENCE}), db=db,
                        campaign_id="two") as campaign:
        campaign.run()
    return db


def test_another_rubric_reproduces_the_decisions_and_the_front(recorded, tmp_path):
    ledger = Ledger.open(recorded)
    result = what_if(ledger, "two", rubric="environment", out_db=tmp_path / "w.db")
    assert result["identical_decisions"] and result["lab"] == "the same simulated lab"
    hv = result["hypervolume"]
    assert hv["reference_point"] == REFERENCE and not hv["reference_inferred"]
    assert hv["what_if"] == pytest.approx(hv["original"]) and len(hv["original"]) == 8
    spec = two_objective_spec(tradeoff={"reference_point": REFERENCE})
    front = ledger_front(ledger, "two", spec)
    assert hv["original"] == pytest.approx(front.hypervolume_by_experiment)
    replayed = Ledger.open(result["what_if_db"])
    assert ledger_front(replayed, "two", spec).hypervolume == pytest.approx(front.hypervolume)
    assert verify(replayed, "two").is_identical
    steps = {e.payload["job_key"]: e.payload["values"] for e in replayed.events("two", types=["Observed"])}
    assert steps == {e.payload["job_key"]: e.payload["values"] for e in ledger.events("two", types=["Observed"])}


def test_another_planner_is_compared_by_hypervolume(recorded, tmp_path):
    ledger = Ledger.open(recorded)
    result = what_if(ledger, "two", planner="random", out_db=tmp_path / "w.db")
    hv = result["hypervolume"]
    assert len(hv["what_if"]) == result["lab_experiments"]["what_if"] == 8
    assert all(b >= a for a, b in zip(hv["what_if"], hv["what_if"][1:]))  # hypervolume never falls
    reached = hv["experiments_to_original_hypervolume"]
    assert reached["original"] == next(n for n, v in enumerate(hv["original"], 1) if v >= hv["original"][-1] - 1e-12)
    assert reached["what_if"] is None or hv["what_if"][reached["what_if"] - 1] >= hv["original"][-1] * (1 - 1e-9)


def test_recorded_results_answer_every_objective(recorded, tmp_path):
    ledger = Ledger.open(recorded)
    result = what_if(ledger, "two", rubric="environment", recorded_lab=True, out_db=tmp_path / "w.db")
    assert result["identical_decisions"] and result["lab"] == "recorded results; others unknown"
    replayed = Ledger.open(result["what_if_db"])
    original = {e.payload["candidate_id"]: e.payload["values"] for e in ledger.events("two", types=["Observed"])
                if e.payload["status"] == "ok"}
    answered = {e.payload["candidate_id"]: e.payload["values"] for e in replayed.events("two", types=["Observed"])
                if e.payload["status"] == "ok"}
    assert answered == original and all(answered.values())  # every objective beyond the first, as recorded
    assert result["hypervolume"]["what_if"] == pytest.approx(result["hypervolume"]["original"])
