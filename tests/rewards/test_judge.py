"""The llm_judge scorer: reason before verdict, parse failures are errors, canaries never reach the model, and each
scoring pass's ``JudgeRecorder`` answers and records its own calls (two campaigns' threads never mix them)."""

from __future__ import annotations

import json

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from rewards import judge
from rewards.context import StepContext
from rewards.errors import ScoringError
from rewards.judge import (
    JudgeParseError,
    JudgeRecorder,
    llm_judge,
    parse_verdict,
    use_judge_model,
)
from rewards.rubric import load_rubric


class _Criterion:
    id, text, params = "specific", "The rationale gives a specific, checkable reason.", {"model": "scripted"}


def proposal(rationale: str) -> StepContext:
    return StepContext(stage="proposal", subject="x", arm="llm", is_valid=True,
                       candidate={"type": "molecule", "smiles": "CCO"}, rationale=rationale)


@pytest.fixture
def scripted(monkeypatch):
    """Register a scripted judge; returns a function setting its replies. The model registry is private."""
    monkeypatch.setattr(judge, "_MODELS", {})

    def script(*replies: str) -> FakeListChatModel:
        model = FakeListChatModel(responses=list(replies))
        use_judge_model("scripted", model)
        return model

    return script


def test_a_yes_with_a_reason_scores_plus_one_and_keeps_the_reason(scripted):
    scripted(json.dumps({"reason": "it cites the rung's value", "verdict": "yes"}))
    score = llm_judge(proposal("The cheap rung predicts -11.8 kcal/mol, inside the window."), criterion=_Criterion())
    assert score.value == 1.0 and "cites the rung" in score.reason


def test_a_no_scores_minus_one(scripted):
    scripted('Sure! {"reason": "nothing checkable", "verdict": "no"}')  # prose around the JSON is tolerated
    assert llm_judge(proposal("It is a molecule that might be good."), criterion=_Criterion()).value == -1.0


@pytest.mark.parametrize("reply", ["yes", '{"verdict": "yes"}', '{"reason": "ok", "verdict": "maybe"}', "[1, 2]",
                                   '{"reason": "", "verdict": "yes"}'])
def test_a_malformed_reply_is_an_error_never_a_zero(scripted, reply):
    with pytest.raises(JudgeParseError):
        parse_verdict(reply)
    scripted(reply)
    rubric = load_rubric("judged")
    from rewards import judge as module

    module.use_judge_model("embedded", module._MODELS["scripted"])
    with pytest.raises(ScoringError, match="rationale_is_specific"):
        rubric.score(proposal("The cheap rung predicts -11.8 kcal/mol, inside the window."))


@pytest.mark.parametrize("rationale", [":", "Thought process:", "", "☃☃☃ 💥💥💥 ✨✨✨ 💥💥💥",
                                       "Good. " + "very " * 200])
def test_canaries_are_scored_minus_one_without_asking_the_judge(scripted, rationale):
    scripted()  # no replies: any call would fail
    score = llm_judge(proposal(rationale), criterion=_Criterion())
    assert score.value == -1.0 and score.reason.startswith("not shown to the judge")


def test_the_reason_comes_before_the_verdict_in_the_schema_and_the_prompt():
    assert list(judge.VERDICT_SCHEMA["properties"]) == ["reason", "verdict"]
    system, user = judge.judge_messages(proposal("The cheap rung predicts -11.8."), "The statement.")
    assert system[1].index('"reason"') < system[1].index('"verdict"')
    assert "The statement." in user[1] and "-11.8" in user[1]


def test_a_recorder_asks_the_same_prompt_once(scripted):
    scripted(json.dumps({"reason": "specific", "verdict": "yes"}), json.dumps({"reason": "vague", "verdict": "no"}))
    context = proposal("The cheap rung predicts -11.8 kcal/mol, inside the window.")
    recorder = JudgeRecorder()
    first = llm_judge(context, criterion=_Criterion(), recorder=recorder)
    again = llm_judge(context, criterion=_Criterion(), recorder=recorder)
    assert first.value == again.value == 1.0  # asked once: a second call would have answered "no"
    assert len(recorder.calls) == 1


def test_without_a_loader_an_unknown_model_is_a_setup_error(scripted, monkeypatch):
    from rewards.errors import RewardSetupError

    monkeypatch.setattr(judge, "_LOADER", None)

    class Other(_Criterion):
        params = {"model": "nowhere"}

    with pytest.raises(RewardSetupError, match="use_judge_model"):
        llm_judge(proposal("The cheap rung predicts -11.8 kcal/mol, inside the window."), criterion=Other())


@pytest.mark.slow
def test_the_embedded_model_judges_with_a_parsable_verdict(monkeypatch):
    """The real embedded SmolLM2 (llama.cpp, grammar-constrained): a verdict of +1 or -1 with a reason."""
    pytest.importorskip("llama_cpp")
    from orchestrator.loop.nodes.reward import _install_judge_loader

    _install_judge_loader()

    class Embedded(_Criterion):
        params = {"model": "embedded"}

    score = llm_judge(proposal("The cheap rung predicts -11.8 kcal/mol, inside the target window of -12 ± 0.5."),
                      criterion=Embedded())
    assert score.value in (-1.0, 1.0) and score.reason.startswith("judge: ")


def test_a_recorder_answers_known_calls_without_the_model_and_collects_new_ones(scripted):
    scripted(json.dumps({"reason": "specific", "verdict": "yes"}))
    first = proposal("The cheap rung predicts -11.8 kcal/mol, inside the window.")
    recorder = JudgeRecorder({})
    assert llm_judge(first, criterion=_Criterion(), recorder=recorder).value == 1.0
    llm_judge(first, criterion=_Criterion(), recorder=recorder)  # the same prompt again: one call
    [call] = recorder.calls
    assert call["key"].startswith("judge:scripted:") and call["messages"][0]["role"] == "system"
    assert set(call) == {"key", "model", "messages", "response", "latency_s"} and call["latency_s"] >= 0
    scripted()  # a model with no replies: any call would fail
    again = JudgeRecorder({call["key"]: json.dumps({"reason": "recorded", "verdict": "no"})})
    score = llm_judge(first, criterion=_Criterion(), recorder=again)
    assert (score.value, score.reason, again.calls) == (-1.0, "judge: recorded", [])


def test_the_rubric_hands_its_recorder_to_the_judge(scripted):
    """``Rubric.score(..., recorder=)`` reaches the judged rubric's llm_judge criterion; the call lands there."""
    model = scripted(json.dumps({"reason": "it cites the rung", "verdict": "yes"}))
    use_judge_model("embedded", model)
    recorder = JudgeRecorder()
    scores = load_rubric("judged").score(proposal("The cheap rung predicts -11.8 kcal/mol, inside the window."),
                                         recorder=recorder)
    assert [s.value for s in scores if s.criterion_id == "rationale_is_specific"] == [1.0]
    [call] = recorder.calls
    assert call["key"].startswith("judge:embedded:") and call["response"] == model.responses[0]
