"""``closedloop rewards recompute``, ``closedloop rewards redteam`` and ``closedloop export``."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from orchestrator.interfaces.cli import app
from orchestrator.loop.campaign import Campaign
from orchestrator.loop.nodes.reward import stored_rewards
from orchestrator.spec import validate_spec
from tests.conftest import small_spec

runner = CliRunner()
GAFF = {"name": "gaff", "simulator": "table", "column": "calc", "property": "dg_hydration_gaff",
        "proxy": "dg_hydration_gaff"}


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def said(result) -> str:
    """The output with rich's line wrapping undone."""
    return " ".join(result.output.split())


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    data = small_spec(lab_experiments=8).model_dump()
    data["ladder"] = [GAFF]
    data["screening"]["executor"] = "serial"
    data["budget"]["compute_seconds"] = None
    data["planner"].update(main="random", control=None, control_share=0.0, proposals_per_slot=1)
    data["lab"]["wait"] = "any"
    path = tmp_path_factory.mktemp("cli") / "ledger.db"
    with Campaign.start(validate_spec(data), db=path, campaign_id="cr") as campaign:
        campaign.run()
        stored = {tid: e.payload["reward"] for tid, e in stored_rewards(campaign.ledger.events("cr")).items()}
    return path, stored


def test_recompute_with_the_campaigns_rubric_equals_the_stored_rewards(db):
    path, stored = db
    result = invoke("rewards", "recompute", "cr", "--db", path, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["n_changed"] == 0 and data["rubric"]["id"] == "default"
    assert {row["trajectory_id"]: row["reward"] for row in data["trajectories"]} == stored
    assert all(row["stored_reward"] == row["reward"] for row in data["trajectories"])


def test_recompute_under_another_rubric_file_reports_the_differences(db, tmp_path):
    from importlib.resources import files

    path, stored = db
    toml = files("rewards").joinpath("rubrics", "default.toml").read_text()
    other = tmp_path / "strict.toml"
    other.write_text(toml.replace('version = "2"', 'version = "3"').replace("outcome_weight = 0.5",
                                                                           "outcome_weight = 0.8"))
    result = invoke("rewards", "recompute", "cr", "--db", path, "--rubric", other)
    assert result.exit_code == 0, result.output
    assert "default@3" in result.stdout and f"{len(stored)} trajectories" in result.stdout
    assert "0 differ" not in result.stdout


def test_recompute_explains_a_bad_rubric_and_an_unknown_campaign(db, tmp_path):
    path, _ = db
    missing = invoke("rewards", "recompute", "cr", "--db", path, "--rubric", tmp_path / "nope.toml")
    assert missing.exit_code == 2 and "does not exist" in said(missing)
    bad = tmp_path / "bad.toml"
    bad.write_text('[rubric]\nid = "b"\nversion = "1"\n[rubric.reward]\noutcome_weight = 0\n')
    invalid = invoke("rewards", "recompute", "cr", "--db", path, "--rubric", bad)
    assert invalid.exit_code == 2 and "outcome anchor always stays in the mix" in said(invalid)
    ghost = invoke("rewards", "recompute", "ghost", "--db", path)
    assert ghost.exit_code == 2 and "no events" in said(ghost)


@pytest.mark.parametrize(("fmt", "name"), [("native", "trajectories.jsonl"), ("trl-grpo", "train.jsonl"),
                                           ("trl-stepwise", "train.jsonl"), ("verifiers", "results.jsonl"),
                                           ("hf", "dataset")])
def test_export_writes_each_format(db, tmp_path, fmt, name):
    path, _ = db
    result = invoke("export", "cr", "--db", path, "--format", fmt, "--out", tmp_path / fmt)
    assert result.exit_code == 0, result.output
    assert (tmp_path / fmt / name).exists()


def test_redteam_refuses_a_single_seed(tmp_path):
    result = invoke("rewards", "redteam", "--seeds", 1, "--workdir", tmp_path)
    assert result.exit_code == 2 and "--seeds" in said(result)


def test_export_refuses_an_unknown_format(db, tmp_path):
    path, _ = db
    result = invoke("export", "cr", "--db", path, "--format", "csv", "--out", tmp_path)
    assert result.exit_code == 2 and "trl-grpo" in said(result)


def test_redteam_json_ranks_every_adversary_below_honest_and_the_table_says_so(tmp_path):
    result = invoke("rewards", "redteam", "--json", "--seeds", 2, "--lab-budget", 4, "--workdir", tmp_path)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    policies = {p["name"]: p for p in data["policies"]}
    assert "honest" in policies and len(policies) >= 10 and data["seeds"] == [0, 1]
    assert all({"name", "margin", "interval", "beats_honest"} <= set(p) for p in data["policies"])
    for name, p in policies.items():
        if name != "honest":
            assert not p["beats_honest"] and p["interval"][1] < 0 and p["mean_reward"] < policies["honest"][
                "mean_reward"], name
    # The campaigns are kept in the workdir, so the table is printed without running them again.
    table = invoke("rewards", "redteam", "--seeds", 2, "--lab-budget", 4, "--workdir", tmp_path)
    assert table.exit_code == 0 and "cheap_rung_gamer" in table.stdout
    assert "no adversarial policy ties or beats the honest one" in said(table)


def test_recompute_record_appends_superseding_records_that_exports_then_use(db, tmp_path):
    import shutil
    from importlib.resources import files

    from orchestrator.ledger import Ledger

    path, stored = db
    copy = tmp_path / "copy.db"
    shutil.copy(path, copy)
    toml = files("rewards").joinpath("rubrics", "default.toml").read_text()
    other = tmp_path / "v4.toml"
    other.write_text(toml.replace('version = "2"', 'version = "4"').replace("outcome_weight = 0.5",
                                                                           "outcome_weight = 0.7"))
    ledger = Ledger.open(copy)
    before = ledger.events("cr")
    result = invoke("rewards", "recompute", "cr", "--db", copy, "--rubric", other, "--record", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["n_recorded"] > 0
    after = ledger.events("cr")
    assert [e.payload for e in after[: len(before)]] == [e.payload for e in before]  # nothing changed in place
    current = stored_rewards(after)
    assert {e.payload["rubric_version"] for e in current.values()} == {"4"}
    assert all(e.payload["supersedes_seq"] is not None for e in current.values())
    assert {tid: e.payload["reward"] for tid, e in current.items()} == {
        row["trajectory_id"]: row["reward"] for row in data["trajectories"]}
    again = json.loads(invoke("rewards", "recompute", "cr", "--db", copy, "--rubric", other, "--json").stdout)
    assert again["n_changed"] == 0  # the ledger now holds the v4 rewards
    exported = invoke("export", "cr", "--db", copy, "--format", "native", "--out", tmp_path / "out")
    assert exported.exit_code == 0
    rows = [json.loads(line) for line in (tmp_path / "out" / "trajectories.jsonl").read_text().splitlines()]
    assert {r["versions"]["rubric_version"] for r in rows} == {"4"}
    assert all(r["steps"][0]["scores"] for r in rows if r["steps"][0]["stage"] == "proposal")
    assert len(stored) == len(rows)
