import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vocabulary.events import (
    EVENT_TYPES,
    CampaignStopped,
    Event,
    Observed,
    Promoted,
    Proposed,
    RungDecision,
    RungRun,
    RungsValidated,
    RungValidated,
    RungValidity,
    Scored,
    Screened,
    Simulated,
    batch_records,
    expand_batches,
    parse_payload,
)

ROUND = Screened(iteration=2, steps=[
    RungRun(candidate_id="X", rung="xtb", observation={"status": "ok", "properties": {"dg": -1.0}, "cost_s": 2.0}),
    RungDecision(candidate_id="X", from_rung="xtb", to_rung="gaff", decision="promote", score=0.3, reason="voi",
                 numbers={"voi": 0.1}),
    RungRun(candidate_id="X", rung="gaff", observation={"status": "failed", "reason": "no charge model"}),
    RungDecision(candidate_id="X", from_rung="gaff", to_rung="lab", decision="skip", reason="gaff failed"),
])

EXAMPLES = [
    Proposed(iteration=0, arm="bo", candidate_id="X", candidate={"type": "molecule", "smiles": "C", "id": "X",
                                                                 "schema_version": 1}),
    Observed(iteration=1, job_key="c/X", candidate_id="X", arm="bo", value=1.5, uncertainty=0.1, sim_time_s=3600.0),
    Scored(iteration=1, stage="outcome", subject="c/X", rubric_id="default", rubric_version="1", criterion_id="improves",
           value=1.0, weight=1.0, is_provisional=False),
    CampaignStopped(reason="budget", n_lab=3, best_candidate_id="X", best_value=1.5),
    ROUND,
    RungsValidated(iteration=3, base_rate=0.25, success_threshold=-4.0, rungs=[
        RungValidity(rung="xtb", n_pairs=6, spearman=0.4, auroc=0.7, weight=0.4, measure="auroc"),
        RungValidity(rung="gaff", n_pairs=2, weight=0.5, measure="prior")]),
]


@pytest.mark.parametrize("payload", EXAMPLES, ids=lambda p: p.type)
def test_payload_round_trip(payload):
    assert parse_payload(payload.type, payload.model_dump_json()) == payload


def test_every_type_is_versioned_and_registered():
    assert {"CampaignStarted", "Proposed", "Rejected", "Simulated", "Promoted", "ApprovalRequested", "Approved",
            "Dispatched", "JobStatus", "Observed", "Scored", "RewardFinalised", "SurrogateUpdated", "LLMCall",
            "CampaignStopped"} <= set(EVENT_TYPES)
    assert all(cls.schema_version >= 1 for cls in EVENT_TYPES.values())


def test_unknown_type_and_extra_fields_are_refused():
    with pytest.raises(ValueError, match="unknown"):
        parse_payload("Exploded", "{}")
    with pytest.raises(ValueError):
        parse_payload("CampaignStopped", {"reason": "x", "n_lab": 1, "surprise": True})


@settings(max_examples=50, deadline=None)
@given(value=st.none() | st.floats(allow_nan=False, allow_infinity=False), t=st.floats(0, 1e9),
       status=st.sampled_from(["ok", "failed"]))
def test_observed_round_trip(value, t, status):
    payload = Observed(iteration=0, job_key="k", candidate_id="c", arm="random", value=value, sim_time_s=t,
                       status=status, reason=None if status == "ok" else "jam")
    assert parse_payload("Observed", payload.model_dump_json()) == payload


def test_a_screening_round_reads_as_the_per_step_events_older_ledgers_hold():
    expected = [
        Simulated(iteration=2, candidate_id="X", rung="xtb", observation=ROUND.steps[0].observation),
        Promoted(iteration=2, candidate_id="X", from_rung="xtb", to_rung="gaff", decision="promote", score=0.3,
                 reason="voi", numbers={"voi": 0.1}),
        Simulated(iteration=2, candidate_id="X", rung="gaff", observation=ROUND.steps[2].observation),
        Promoted(iteration=2, candidate_id="X", from_rung="gaff", to_rung="lab", decision="skip", reason="gaff failed"),
    ]
    assert ROUND.expand() == expected
    stored = ROUND.model_dump(mode="json")
    assert [parse_payload(t, p) for t, p in batch_records("Screened", stored)] == expected
    assert batch_records("Observed", {"x": 1}) == [("Observed", {"x": 1})]
    envelope = Event(campaign_id="c", seq=7, type="Screened", schema_version=1, payload=stored, idempotency_key="k",
                     actor="screen", at="2026-01-01T00:00:00Z")
    steps = list(expand_batches([envelope]))
    assert [(e.seq, e.type, e.typed()) for e in steps] == [(7, p.type, p) for p in expected]


def test_a_batch_of_rung_validities_reads_as_one_rung_validated_per_rung():
    batch = EXAMPLES[-1]
    items = [parse_payload(t, p) for t, p in batch_records(batch.type, batch.model_dump(mode="json"))]
    assert items == [RungValidated(iteration=3, base_rate=0.25, success_threshold=-4.0, **v.model_dump())
                     for v in batch.rungs]
