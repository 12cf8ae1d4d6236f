"""The llm arm end to end: the real embedded model plans inside a campaign, every call is in the ledger."""

from __future__ import annotations

import pytest

from orchestrator.campaign import Campaign
from orchestrator.ledger import verify
from tests.conftest import small_spec


@pytest.mark.slow
def test_a_campaign_with_the_embedded_model(tmp_path):
    spec = small_spec(lab_experiments=4, planner__main="llm", planner__control="bo")
    with Campaign.start(spec, db=tmp_path / "llm.db", campaign_id="llm") as campaign:
        summary = campaign.run()
        events = campaign.ledger.events("llm")
        report = verify(campaign.ledger, "llm")
    assert summary["status"] == "stopped" and summary["n_lab"] == 4 and report.is_identical
    calls = [e.payload for e in events if e.type == "LLMCall"]
    assert calls and all(c["response"] and c["messages"] and c["error"] is None for c in calls)
    assert all("api_key" not in str(c["parameters"]).lower() for c in calls)
    llm_proposals = [e.payload for e in events if e.type == "Proposed" and e.payload["arm"] == "llm"]
    assert llm_proposals and any(not p["is_fallback"] for p in llm_proposals), "the model's own picks are used"
    rejected = {e.payload["candidate_id"] for e in events if e.type == "Rejected" and e.payload["stage"] == "validate"}
    assert not rejected & {p["candidate_id"] for p in llm_proposals if not p["is_fallback"]}
    arms = {e.payload["arm"] for e in events if e.type == "Dispatched"}
    assert "llm" in arms
