"""What-if replay: the same history under another planner or rubric, compared side by side."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import rewards
from orchestrator.interfaces.cli import app
from orchestrator.ledger import Ledger, verify
from orchestrator.loop.campaign import Campaign
from orchestrator.replay.whatif import what_if
from tests.conftest import small_spec
from vocabulary.domain import SetupError


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    db = tmp_path_factory.mktemp("whatif") / "recorded.db"
    with Campaign.start(small_spec(lab_experiments=8), db=db, campaign_id="rec") as campaign:
        campaign.run()
    return db


@pytest.fixture(scope="module")
def changed_rubric(tmp_path_factory):
    text = (Path(rewards.__file__).parent / "rubrics" / "default.toml").read_text()
    text = text.replace('version = "2"', 'version = "2-what-if"').replace("outcome_weight = 0.5", "outcome_weight = 0.9")
    text = text.replace("progress_weight = 0.5", "progress_weight = 0.1")
    path = tmp_path_factory.mktemp("rubric") / "outcome_heavy.toml"
    path.write_text(text)
    return path


def test_another_planner_changes_the_proposals_on_the_same_simulated_lab(recorded, tmp_path):
    ledger = Ledger.open(recorded)
    result = what_if(ledger, "rec", planner="random", out_db=tmp_path / "w.db")
    assert result["planner"] == {"original": "bo", "what_if": "random"}
    assert result["control"]["what_if"] == "bo", "the control must differ from the new main arm"
    assert not result["identical_decisions"] and result["proposals"]["differ_by_iteration"]
    assert result["lab"] == "the same simulated lab" and result["n_unknown"] == 0
    assert result["lab_experiments"] == {**result["lab_experiments"], "original": 8, "what_if": 8}
    steps = result["experiments_to_best"]
    assert steps["best_utility"] is not None
    assert any(steps[k] is not None for k in ("original", "what_if")), "whoever found the best reached it"
    assert all(steps[k] is None or 1 <= steps[k] <= 8 for k in ("original", "what_if"))
    assert result["rewards"]["original"]["n"] > 0 and result["rewards"]["what_if"]["n"] > 0
    with Campaign.resume("rec", db=tmp_path / "w.db") as replayed:
        assert verify(replayed.ledger, "rec").is_identical
    ledger.close()


def test_another_rubric_keeps_the_decisions_and_rescores_them(recorded, tmp_path, changed_rubric):
    ledger = Ledger.open(recorded)
    same = what_if(ledger, "rec", rubric="default", out_db=tmp_path / "same.db")
    assert same["identical_decisions"]
    assert same["rewards"]["what_if"]["mean"] == pytest.approx(same["rewards"]["original"]["mean"], abs=1e-12)
    other = what_if(ledger, "rec", rubric=str(changed_rubric), out_db=tmp_path / "other.db")
    assert other["identical_decisions"] and other["experiments_to_best"]["original"] == other["experiments_to_best"]["what_if"]
    assert other["rewards"]["what_if"]["mean"] != pytest.approx(other["rewards"]["original"]["mean"], abs=1e-6)
    assert other["rubric"]["what_if"].endswith("outcome_heavy.toml")
    ledger.close()


def test_results_a_real_lab_never_measured_are_unknown(recorded, tmp_path):
    ledger = Ledger.open(recorded)
    result = what_if(ledger, "rec", planner="random", recorded_lab=True, out_db=tmp_path / "r.db")
    assert result["lab"] == "recorded results; others unknown"
    assert result["n_unknown"] > 0
    replayed = Ledger.open(tmp_path / "r.db")
    reasons = [e.payload["reason"] for e in replayed.events("rec", types=["Observed"]) if e.payload["status"] == "failed"]
    assert reasons and all(r.startswith("unknown") for r in reasons)
    measured = {e.payload["candidate_id"]: e.payload["value"] for e in ledger.events("rec", types=["Observed"])}
    for e in replayed.events("rec", types=["Observed"]):
        if e.payload["status"] == "ok":
            assert e.payload["value"] == pytest.approx(measured[e.payload["candidate_id"]]), "recorded values are reused"
    replayed.close()
    ledger.close()


def test_what_if_needs_a_change_and_its_own_ledger(recorded):
    ledger = Ledger.open(recorded)
    with pytest.raises(SetupError, match="--planner, --rubric or --model"):
        what_if(ledger, "rec")
    with pytest.raises(SetupError, match="its own ledger"):
        what_if(ledger, "rec", planner="random", out_db=recorded)
    ledger.close()


def test_cli_prints_the_side_by_side_report(recorded, tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["replay", "rec", "--db", str(recorded), "--planner", "random", "--out-db",
                                 str(tmp_path / "cli.db"), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert {"proposals", "rewards", "experiments_to_best", "what_if_db"} <= set(data)
    table = runner.invoke(app, ["replay", "rec", "--db", str(recorded), "--planner", "random", "--out-db",
                                str(tmp_path / "cli2.db")])
    assert table.exit_code == 0 and "experiments to the best either found" in table.output
