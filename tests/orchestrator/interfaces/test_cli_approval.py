"""`closedloop run` at the approval gate (issue 50): exit 3 while a batch waits, an explicit choice with no default
that re-asks on a blank or unknown answer, the predictions shown, an optional reason recorded, and `ls` showing the
waiting status with whole ids."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import orchestrator.interfaces.cli as cli
from orchestrator.interfaces import cli_common
from orchestrator.interfaces.cli import app
from tests.conftest import FREESOLV_SPEC

runner = CliRunner()


@pytest.fixture
def gated(tmp_path):
    """The FreeSolv spec with a human gate and no survey: a run stops at its first lab batch in seconds."""
    text = FREESOLV_SPEC.read_text().replace('policy = "auto"', 'policy = "interrupt"')
    text = text.replace('pool = "data/', f'pool = "{FREESOLV_SPEC.parent}/data/')
    spec = tmp_path / "gated.toml"
    spec.write_text(text + "\n[screening]\nsurvey_share = 0.0\n")
    return spec


def invoke(*args, input=None):
    return runner.invoke(app, [str(a) for a in args], input=input, catch_exceptions=False)


def _events(db, campaign_id, event_type):
    events = json.loads(invoke("show", campaign_id, "--db", db, "--json").stdout)
    return [e for e in events if e["type"] == event_type]


def test_run_exits_3_while_a_batch_waits_and_ls_says_so_with_the_whole_id(gated, tmp_path, monkeypatch):
    db, long_id = tmp_path / "w.db", "a-campaign-id-long-enough-to-be-cut-at-eighty-columns-0123456789abcdef"
    waiting = invoke("run", gated, "--db", db, "--lab-budget", 4, "--planner", "bo", "--control-share", 0,
                     "--campaign-id", long_id, "--json")
    assert waiting.exit_code == 3
    summary = json.loads(waiting.stdout)
    assert summary["status"] == "waiting_for_approval" and summary["n_lab"] == 0
    assert [p["job_key"] for p in summary["approval"]["predictions"]] == summary["approval"]["job_keys"]
    [row] = json.loads(invoke("ls", "--db", db, "--json").stdout)
    assert row["status"] == "waiting_for_approval"
    monkeypatch.setattr(cli_common.out, "width", 80)
    table = invoke("ls", "--db", db).stdout
    assert long_id in table and "waiting for approval" in table
    done = invoke("run", "--resume", long_id, "--db", db, "--yes", "--json")
    assert done.exit_code == 0 and json.loads(done.stdout)["status"] == "stopped"
    help_text = " ".join(invoke("run", "--help").stdout.replace("│", " ").split())
    assert "3 it waits for approval of a lab batch" in help_text and "4 it waits for lab results" in help_text


def test_the_prompt_has_no_default_re_asks_and_records_the_reason(gated, tmp_path, monkeypatch):
    db = tmp_path / "p.db"
    first = invoke("run", gated, "--db", db, "--lab-budget", 4, "--planner", "bo", "--control-share", 0,
                   "--campaign-id", "p")
    assert first.exit_code == 3
    assert "predicted (kcal/mol)" in first.stdout  # the batch, each job with its prediction
    monkeypatch.setattr(cli, "_is_interactive", lambda: True)
    # Enter alone, then an unknown job: asked again each time; then jobs 1 and 2, a reason for the other two;
    # the second batch (the two slots left) is approved whole
    result = invoke("run", "--resume", "p", "--db", db, "--by", "ada", input="\nbogus\n1, 2\nout of stock\nall\n")
    assert result.exit_code == 0, result.output
    assert result.output.count("approve which of these 4 lab job(s)?") == 3
    assert "type all, none, or the numbers" in result.output and "'bogus' is not a job of this batch" in result.output
    approved = _events(db, "p", "Approved")
    assert [len(e["payload"]["job_keys"]) for e in approved] == [2, 2]
    rejected = _events(db, "p", "Rejected")
    assert [e["payload"]["reason"] for e in rejected] == ["denied at approval by human:ada: out of stock"] * 2
    assert {e["payload"]["raw"] for e in rejected} == set(approved[0]["payload"]["denied_keys"])


def test_approve_none_with_a_reason_and_a_reason_without_denials(gated, tmp_path):
    db = tmp_path / "n.db"
    invoke("run", gated, "--db", db, "--lab-budget", 4, "--planner", "bo", "--control-share", 0, "--campaign-id", "n")
    refused = invoke("run", "--resume", "n", "--db", db, "--approve", "all", "--reason", "why not")
    assert refused.exit_code == 2 and "--reason explains the jobs --approve denies" in refused.output
    assert not _events(db, "n", "Approved")
    denied = invoke("run", "--resume", "n", "--db", db, "--approve", "none", "--reason", "reagent on order", "--json")
    assert denied.exit_code == 3  # the next batch waits
    reasons = {e["payload"]["reason"] for e in _events(db, "n", "Rejected")}
    assert len(reasons) == 1 and reasons.pop().endswith(": reagent on order")


def test_a_typed_choice_reads_numbers_and_keys():
    keys = ["c/a", "c/b", "c/c"]
    assert cli._approval_choice(" ALL ", keys) is True and cli._approval_choice("no", keys) is False
    assert cli._approval_choice("3,c/a,3", keys) == ["c/c", "c/a"]
    for bad in ("", "  ", "4", "c/x", "0"):
        with pytest.raises(ValueError):
            cli._approval_choice(bad, keys)
