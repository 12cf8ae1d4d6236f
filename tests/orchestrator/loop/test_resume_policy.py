"""`run --resume` with the options that shape a campaign: a new lab budget is applied and recorded, another seed,
planner, lab or model is refused with one error line, and nothing is silently ignored (issue 18)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from orchestrator.interfaces.cli import app
from orchestrator.ledger import Ledger, verify
from orchestrator.loop.resume_policy import resume_spec
from tests.conftest import FREESOLV_SPEC, small_spec
from vocabulary.domain import SetupError

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def error_line(result) -> str:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


@pytest.fixture
def interrupted(tmp_path):
    db = tmp_path / "r.db"
    first = invoke("run", FREESOLV_SPEC, "--db", db, "--lab-budget", 6, "--seed", 3, "--max-steps", 7, "--json",
                   "--campaign-id", "half", "--planner", "bo")
    assert json.loads(first.stdout)["status"] == "running"
    return db


def test_a_different_seed_or_planner_on_resume_is_refused(interrupted):
    db = interrupted
    line = error_line(invoke("run", "--resume", "half", "--db", db, "--seed", 99))
    assert "--seed 99" in line and "seed 3" in line and "new campaign" in line
    line = error_line(invoke("run", "--resume", "half", "--db", db, "--planner", "random"))
    assert "--planner random" in line and "main arm bo" in line and "closedloop replay half --planner random" in line
    line = error_line(invoke("run", "--resume", "half", "--db", db, "--lab-url", "http://127.0.0.1:9"))
    assert "--lab-url" in line and "keeps its lab" in line
    ledger = Ledger.open(db)
    assert [e.type for e in ledger.events("half")][-1] != "LabBudgetChanged"
    assert not ledger.events("half", types=["LabBudgetChanged"])
    ledger.close()


def test_a_raised_lab_budget_on_resume_is_applied_and_recorded(interrupted):
    db = interrupted
    resumed = invoke("run", "--resume", "half", "--db", db, "--lab-budget", 8, "--seed", 3, "--planner", "bo",
                     "--json")
    assert resumed.exit_code == 0, resumed.output
    summary = json.loads(resumed.stdout)
    assert summary["status"] == "stopped" and summary["lab_budget"] == 8 and summary["n_lab"] == 8
    ledger = Ledger.open(db)
    [change] = ledger.events("half", types=["LabBudgetChanged"])
    assert change.payload["lab_experiments"] == 8 and change.payload["previous"] == 6
    assert 0 < change.payload["n_dispatched"] <= 6
    assert verify(ledger, "half").is_identical
    ledger.close()
    line = error_line(invoke("run", "--resume", "half", "--db", db, "--lab-budget", 12))
    assert "has stopped" in line and "--lab-budget 12" in line


def test_a_lab_budget_below_what_was_dispatched_is_refused(interrupted):
    line = error_line(invoke("run", "--resume", "half", "--db", interrupted, "--lab-budget", 1))
    assert "--lab-budget 1 is below the" in line and "already dispatched" in line


def test_a_redacted_credential_must_be_given_again_and_match():
    recorded = small_spec().with_overrides(lab_url="http://lab:***@127.0.0.1:8000",
                                           model="openai:m@http://u:***@llm/v1")
    common = {"campaign_id": "c", "n_dispatched": 0, "is_stopped": False}
    with pytest.raises(SetupError, match="--lab-url and the full URL again"):
        resume_spec(recorded, model="openai:m@http://u:pw@llm/v1", **common)
    with pytest.raises(SetupError, match="--model and the full URL again"):
        resume_spec(recorded, lab_url="http://lab:pw@127.0.0.1:8000", **common)
    with pytest.raises(SetupError, match="is not campaign 'c'"):
        resume_spec(recorded, lab_url="http://lab:pw@10.0.0.1:8000", model="openai:m@http://u:pw@llm/v1", **common)
    spec, changes = resume_spec(recorded, lab_url="http://lab:pw@127.0.0.1:8000", model="openai:m@http://u:pw@llm/v1",
                                **common)
    assert spec.lab.parameters["base_url"] == "http://lab:pw@127.0.0.1:8000"
    assert spec.planner.model == "openai:m@http://u:pw@llm/v1" and changes == []


# ------------------------------------------------------------------------- a model that cannot answer (issue 46)
@pytest.mark.parametrize("model", ["opnai:gpt-4o-mini", "missing.gguf", "not-a-model.gguf"])
def test_a_model_that_could_never_answer_is_refused_before_the_campaign_starts(tmp_path, model):
    """An unknown provider, a missing .gguf or a file that is not GGUF: one error line, and no campaign (nothing
    dispatched, nothing to strand)."""
    (tmp_path / "not-a-model.gguf").write_text("hello\n")
    given = model if ":" in model else str(tmp_path / model)
    db = tmp_path / "m.db"
    line = error_line(invoke("run", FREESOLV_SPEC, "--db", db, "--lab-budget", 4, "--model", given,
                             "--campaign-id", "m", "--json"))
    assert ("opnai" in line and "provider" in line) or ("does not exist" in line) or ("not a GGUF" in line), line
    if db.exists():
        ledger = Ledger.open(db)
        assert ledger.n_events("m") == 0
        ledger.close()


def _llm_spec(model: str):
    return small_spec(lab_experiments=4, planner__main="llm", planner__control="bo", planner__model=model)


def test_a_model_that_never_answered_can_be_replaced_on_resume(tmp_path, monkeypatch):
    """A campaign recorded with a model that cannot start (here ``opnai:``, as a closedloop before this check let
    through) is resumed with a corrected model, recorded as ``PlannerModelChanged``; once a model has answered, it
    stays."""
    from orchestrator.loop import campaign as campaign_module
    from orchestrator.loop.campaign import Campaign
    from vocabulary.events import LLMCall

    db = tmp_path / "m.db"
    monkeypatch.setattr(campaign_module, "_check_planner_models", lambda ctx: None)  # the closedloop of the issue
    Campaign.start(_llm_spec("opnai:gpt-4o-mini"), db=db, campaign_id="m").close()
    monkeypatch.undo()
    with pytest.raises(SetupError, match="knows no provider 'opnai'"):
        Campaign.resume("m", db=db)
    fixed = "openai:gpt-4o-mini@http://127.0.0.1:9/v1"
    with Campaign.resume("m", db=db, model=fixed) as campaign:
        assert campaign.spec.planner.model == fixed
        [change] = campaign.ledger.events("m", types=["PlannerModelChanged"])
        assert change.payload == {"model": fixed, "previous": "opnai:gpt-4o-mini"}
        # a failed call is no answer; the next resume keeps the recorded (new) model
        campaign.ledger.append("m", LLMCall(iteration=0, key="it0:llm:0", model="openai-chat:gpt-4o-mini",
                                            messages=[], response="", error="ConnectError: refused"),
                               key="llm-call:it0:llm:0")
    with Campaign.resume("m", db=db) as campaign:
        assert campaign.spec.planner.model == fixed
        campaign.ledger.append("m", LLMCall(iteration=0, key="it0:llm:1", model="openai-chat:gpt-4o-mini",
                                            messages=[], response='{"picks": []}'), key="llm-call:it0:llm:1")
    with pytest.raises(SetupError, match="keeps its lab and model"):
        Campaign.resume("m", db=db, model="openai:gpt-4o@http://127.0.0.1:9/v1")
