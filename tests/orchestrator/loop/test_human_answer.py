"""Who answered: a human's approval carries an optional name, recorded as ``human:NAME`` (``human`` without one)."""

from __future__ import annotations

import pytest
from langgraph.types import Command

from orchestrator.ledger import verify
from orchestrator.loop.campaign import Campaign
from orchestrator.loop.human_answer import (
    MAX_NAME_CHARS,
    MAX_REASON_CHARS,
    InvalidApprover,
    InvalidReason,
    actor,
    checked_name,
    denial_reasons,
    plain_answer,
    read_answer,
    resume_value,
)
from tests.conftest import small_spec
from vocabulary.domain import ClosedLoopError


def test_plain_answers_read_as_they_always_did():
    for plain in (True, False, None, ["c/A", "c/B"], "retry", {"c/A": "skip"}):
        assert read_answer(plain) == (plain, "human")
        assert resume_value(plain, by=None) == plain  # without a name the resume value is the old one


def test_a_named_answer_round_trips_to_human_colon_name():
    assert read_answer(resume_value(["c/A"], by="  Ada Lovelace ")) == (["c/A"], "human:Ada Lovelace")
    assert read_answer(resume_value({"c/A": "retry"}, by="ada")) == ({"c/A": "retry"}, "human:ada")
    assert actor(None) == "human" and actor("bo") == "human:bo"


@pytest.mark.parametrize(("name", "why"), [
    ("", "empty"), ("   ", "empty"), ("ada\nroot", "not printable"), ("tab\there", "not printable"),
    ("x" * (MAX_NAME_CHARS + 1), "at most 64"), (42, "must be text"),
])
def test_a_bad_name_is_refused_with_the_reason(name, why):
    with pytest.raises(InvalidApprover, match=why):
        checked_name(name)
    with pytest.raises(InvalidApprover, match=why):
        read_answer({"answer": True, "by": name})  # a name smuggled past Campaign.run is refused in the node too
    assert issubclass(InvalidApprover, ClosedLoopError)  # the CLI, MCP and dashboard show it as one line
    assert checked_name("x" * MAX_NAME_CHARS) == "x" * MAX_NAME_CHARS


def _gated(tmp_path, cid):
    campaign = Campaign.start(small_spec(lab_experiments=4, approval__policy="interrupt",
                                         planner__control_share=0.0), db=tmp_path / f"{cid}.db", campaign_id=cid)
    campaign.run()
    assert campaign.pending_interrupt is not None
    return campaign


def test_an_approval_with_a_name_records_who_approved_and_denied(tmp_path):
    with _gated(tmp_path, "named") as campaign:
        keys = campaign.pending_interrupt["job_keys"]
        campaign.run(approval=keys[:-1], by="ada")
        [approved] = campaign.ledger.events("named", types=["Approved"])
        [denied] = campaign.ledger.events("named", types=["Rejected"])
        assert approved.payload["approved_by"] == "human:ada" and approved.actor == "human:ada"
        assert approved.payload["denied_keys"] == [keys[-1]]
        assert denied.actor == "human:ada" and denied.payload["reason"] == "denied at approval by human:ada"
        assert verify(campaign.ledger, "named").is_identical


def test_an_approval_without_a_name_records_human(tmp_path):
    with _gated(tmp_path, "anon") as campaign:
        campaign.run(approval=True)
        [approved] = campaign.ledger.events("anon", types=["Approved"])
        assert approved.payload["approved_by"] == "human" and approved.actor == "human"


def test_a_bad_name_records_nothing_and_the_question_still_waits(tmp_path):
    with _gated(tmp_path, "bad") as campaign:
        question, n_events = campaign.pending_interrupt, campaign.ledger.n_events("bad")
        with pytest.raises(InvalidApprover, match="not printable"):
            campaign.run(approval=True, by="ada\n; DROP TABLE")
        assert campaign.ledger.n_events("bad") == n_events and campaign.pending_interrupt == question
        campaign.run(approval=True, by="ada")  # a good answer still goes through
        [approved] = campaign.ledger.events("bad", types=["Approved"])
        assert approved.payload["approved_by"] == "human:ada"


def test_a_named_resume_value_given_to_the_graph_directly_is_read_by_the_node(tmp_path):
    """A notebook may resume the graph itself with the named form (``Command(resume={...})``)."""
    with _gated(tmp_path, "direct") as campaign:
        for _ in campaign.graph.stream(Command(resume={"answer": True, "by": "grace"}), campaign.config,
                                       stream_mode="updates"):
            break  # the approve node has run: its update is the first chunk
        [approved] = campaign.ledger.events("direct", types=["Approved"])
        assert approved.payload["approved_by"] == "human:grace"


def test_an_answer_with_reasons_keeps_them_and_takes_the_name():
    value = resume_value({"answer": ["c/A"], "reasons": {"c/B": " toxic "}, "reason": "too dear"}, by="ada")
    assert value["by"] == "ada" and read_answer(value) == (["c/A"], "human:ada") and plain_answer(value) == ["c/A"]
    assert denial_reasons(value, ["c/B", "c/C"]) == {"c/B": "toxic", "c/C": "too dear"}
    assert read_answer({"answer": False, "reason": "x"}) == (False, "human")  # no name: plain human
    assert denial_reasons(False, ["c/A"]) == {} and denial_reasons({"answer": False, "reason": "  "}, ["c/A"]) == {}
    assert plain_answer({"c/A": "retry"}) == {"c/A": "retry"}  # a recover decision is never taken for a wrapped one


@pytest.mark.parametrize(("value", "why"), [
    ({"answer": False, "reason": "two\nlines"}, "one plain line"),
    ({"answer": False, "reason": "x" * (MAX_REASON_CHARS + 1)}, f"at most {MAX_REASON_CHARS}"),
    ({"answer": False, "reason": 3}, "must be text"),
    ({"answer": False, "reasons": ["c/A"]}, "must map job keys"),
])
def test_a_bad_reason_is_refused_before_the_graph_runs(value, why):
    with pytest.raises(InvalidReason, match=why):
        resume_value(value, by=None)
    assert issubclass(InvalidReason, ClosedLoopError)
