"""The approval gate as a person at the bench meets it (issue 50): a waiting status, one question per planned batch
with each candidate's prediction, a reason recorded with a denial, and a denied candidate allowed back later."""

from __future__ import annotations

from orchestrator.ledger import verify
from orchestrator.loop.campaign import Campaign
from orchestrator.loop.nodes.approve import lab_wait
from orchestrator.loop.predictions import Prediction, predictions
from orchestrator.loop.ruled_out import DENIAL_HOLD_ITERATIONS, held_after_denial
from tests.conftest import small_spec


def _gated_spec(lab_experiments=12, **overrides):
    return small_spec(lab_experiments=lab_experiments, approval__policy="interrupt", planner__control_share=0.0,
                      **overrides)


def test_the_ledger_says_waiting_for_approval_while_the_gate_waits(tmp_path):
    with Campaign.start(_gated_spec(8), db=tmp_path / "s.db", campaign_id="s") as campaign:
        summary = campaign.run()
        assert campaign.pending_interrupt is not None
        assert summary["status"] == "waiting_for_approval"
        assert campaign.ledger.campaign("s").status == "waiting_for_approval"
        campaign.run(approval=True, max_steps=1)  # the approve node records the answer, the campaign runs on
        assert campaign.ledger.campaign("s").status == "running"
        campaign.run()
        while campaign.pending_interrupt is not None:
            campaign.run(approval=True)
        assert campaign.ledger.campaign("s").status == "stopped"
        assert verify(campaign.ledger, "s").is_identical  # the status is a fold of the events: a replay agrees


def test_a_policy_approval_never_shows_the_campaign_waiting(tmp_path):
    with Campaign.start(small_spec(lab_experiments=4), db=tmp_path / "a.db", campaign_id="a") as campaign:
        campaign.run(max_steps=6)  # survey .. dispatch: the policy approved the batch
        assert campaign.ledger.events("a", types=["Approved"])
        assert campaign.ledger.campaign("a").status == "running"


def test_the_gate_asks_once_per_planned_batch_when_the_lab_refills_each_slot(tmp_path):
    spec = _gated_spec(12)
    assert spec.lab.wait == "any" and lab_wait(spec) == "all"
    assert lab_wait(small_spec()) == "any"  # a policy gate keeps refilling slot by slot
    with Campaign.start(spec, db=tmp_path / "b.db", campaign_id="b") as campaign:
        campaign.run()
        n_questions = 0
        while campaign.pending_interrupt is not None:
            assert len(campaign.pending_interrupt["job_keys"]) == spec.planner.batch_size
            n_questions += 1
            campaign.run(approval=True)
        requested = campaign.ledger.events("b", types=["ApprovalRequested"])
        assert [len(e.payload["job_keys"]) for e in requested] == [4, 4, 4]
        assert n_questions == 3 and campaign.summary()["n_lab"] == 12


def test_the_question_carries_each_candidates_prediction_in_the_objectives_unit(tmp_path):
    with Campaign.start(_gated_spec(8), db=tmp_path / "p.db", campaign_id="p") as campaign:
        campaign.run()
        campaign.run(approval=True)  # the first batch is bo's initial design; the second is the model's
        question = campaign.pending_interrupt
        expected = {e.payload["candidate_id"]: (e.payload["expected"], e.payload["expected_sd"])
                    for e in campaign.ledger.events("p", types=["Proposed"])}
        assert question["unit"] == "kcal/mol"
        assert [p["job_key"] for p in question["predictions"]] == question["job_keys"]
        assert [p["candidate"] for p in question["predictions"]] == question["candidates"]
        for key, p in zip(question["job_keys"], question["predictions"], strict=True):
            cid = key.split("/")[1]
            assert (p["predicted"], p["sd"]) == expected[cid] and isinstance(p["predicted"], float) and p["sd"] > 0
        assert predictions(campaign.ctx.view, ["not-a-candidate"]) == {"not-a-candidate": Prediction(None, None)}


def test_a_denial_records_the_persons_reason(tmp_path):
    with Campaign.start(_gated_spec(8), db=tmp_path / "r.db", campaign_id="r") as campaign:
        campaign.run()
        keys = campaign.pending_interrupt["job_keys"]
        campaign.run(approval={"answer": keys[:2], "reasons": {keys[2]: "out of stock"}, "reason": "too dear"},
                     by="ada")
        rejected = {e.payload["raw"]: e for e in campaign.ledger.events("r", types=["Rejected"])}
        assert rejected[keys[2]].payload["reason"] == "denied at approval by human:ada: out of stock"
        assert rejected[keys[3]].payload["reason"] == "denied at approval by human:ada: too dear"
        assert rejected[keys[3]].actor == "human:ada"
        assert verify(campaign.ledger, "r").is_identical


def test_a_denied_candidate_is_held_back_for_a_while_then_may_be_proposed_again(tmp_path):
    with Campaign.start(_gated_spec(16), db=tmp_path / "h.db", campaign_id="h") as campaign:
        campaign.run()
        question = campaign.pending_interrupt
        denied_ids = {k.split("/")[1] for k in question["job_keys"]}
        campaign.run(approval={"answer": False, "reason": "wrong solvent"})
        view = campaign.ctx.view
        view.refresh()
        denied_at = question["iteration"]
        assert not denied_ids & view.proposals.rejected_for_good  # not ruled out for good any more
        for later in range(denied_at + 1, denied_at + DENIAL_HOLD_ITERATIONS + 1):
            assert held_after_denial(campaign.ctx, later) == denied_ids
        assert held_after_denial(campaign.ctx, denied_at + DENIAL_HOLD_ITERATIONS + 1) == set()
        # while held, the planners do not propose them
        while campaign.pending_interrupt is not None and campaign.pending_interrupt["iteration"] <= (
                denied_at + DENIAL_HOLD_ITERATIONS):
            assert not {k.split("/")[1] for k in campaign.pending_interrupt["job_keys"]} & denied_ids
            campaign.run(approval=True)
        proposed = [e.payload for e in campaign.ledger.events("h", types=["Proposed"])]
        assert not [p for p in proposed if p["candidate_id"] in denied_ids
                    and denied_at < p["iteration"] <= denied_at + DENIAL_HOLD_ITERATIONS]
