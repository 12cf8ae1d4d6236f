"""The background runs behind the dashboard and MCP at the approval gate (issue 50): the pending batch read from the
ledger carries each job's prediction, an answer may carry reasons (contract 2), and a run waiting on a person says
``waiting_for_approval``."""

from __future__ import annotations

import pytest

from orchestrator.interfaces.background import (
    BackgroundRuns,
    NotAwaitingApproval,
    pending_approval,
)
from orchestrator.loop.campaign import Campaign
from tests.conftest import small_spec


@pytest.fixture
def waiting(tmp_path):
    db = tmp_path / "bg.db"
    spec = small_spec(lab_experiments=8, approval__policy="interrupt", planner__control_share=0.0)
    with Campaign.start(spec, db=db, campaign_id="bg") as campaign:
        campaign.run()
        campaign.run(approval=True)  # the second batch is the model's: it has predictions
        question = campaign.pending_interrupt
        pending = pending_approval(campaign.ledger, "bg")
    return db, question, pending


def test_the_pending_batch_from_the_ledger_carries_the_questions_predictions(waiting):
    _, question, pending = waiting
    assert pending["job_keys"] == question["job_keys"]
    assert pending["predictions"] == [{k: p[k] for k in ("job_key", "predicted", "sd")}
                                      for p in question["predictions"]]
    assert all(isinstance(p["predicted"], float) for p in pending["predictions"])


def test_an_answer_with_reasons_is_checked_and_recorded(waiting):
    db, question, _ = waiting
    keys = question["job_keys"]
    runs = BackgroundRuns(db)
    with pytest.raises(NotAwaitingApproval, match="reasons given for job keys"):
        runs.approve("bg", {"answer": keys[:2], "reasons": {"bg/NOT-IN-THE-BATCH": "x"}})
    run = runs.approve("bg", {"answer": keys[:2], "reasons": {keys[2]: "no stock"}, "reason": "later"}, by="ada")
    run.join(300)
    assert run.state in ("waiting_for_approval", "finished"), run.error
    with Campaign.resume("bg", db=db) as campaign:
        rejected = {e.payload["raw"]: e.payload["reason"] for e in campaign.ledger.events("bg", types=["Rejected"])}
        assert rejected == {keys[2]: "denied at approval by human:ada: no stock",
                            keys[3]: "denied at approval by human:ada: later"}
        if run.state == "waiting_for_approval":
            assert campaign.ledger.campaign("bg").status == "waiting_for_approval"
