"""The CLI contracts that later checks rely on: names, flags and JSON shapes."""

from __future__ import annotations

import json
import sqlite3

import pytest
from typer.testing import CliRunner

from orchestrator.interfaces.cli import app
from tests.conftest import FREESOLV_SPEC, small_spec

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    db = tmp_path_factory.mktemp("cli") / "cli.db"
    result = invoke("run", FREESOLV_SPEC, "--db", db, "--seed", 3, "--lab-budget", 6, "--planner", "bo", "--json")
    assert result.exit_code == 0, result.output
    return db, json.loads(result.stdout)


def test_run_json_contract(ran):
    db, summary = ran
    assert {"campaign_id", "db", "n_lab", "best", "status", "measured"} <= set(summary)
    assert len(summary["measured"]) == summary["n_lab"]
    assert summary["n_lab"] <= 6 and summary["status"] == "stopped"
    assert {"candidate_id", "value"} <= set(summary["best"])
    assert str(db) in summary["db"]


def test_run_without_a_control_reports_the_dispatch_order(tmp_path):
    db = tmp_path / "solo.db"
    result = invoke("run", FREESOLV_SPEC, "--db", db, "--planner", "bo", "--control-share", 0, "--seed", 3,
                    "--lab-budget", 5, "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["control_arm"] is None and set(summary["arms"]) == {"bo"}
    events = json.loads(invoke("show", summary["campaign_id"], "--db", db, "--json").stdout)
    assert {e["payload"]["arm"] for e in events if e["type"] in ("Proposed", "Dispatched")} == {"bo"}
    dispatched = [e["payload"]["candidate_id"] for e in events if e["type"] == "Dispatched"]
    assert summary["measured"] == dispatched and len(dispatched) == summary["n_lab"] == 5
    started = next(e for e in events if e["type"] == "CampaignStarted")["payload"]["spec"]["planner"]
    assert (started["control"], started["control_share"]) == (None, 0.0)


def test_control_share_is_checked_and_not_accepted_on_resume(tmp_path):
    result = invoke("run", FREESOLV_SPEC, "--db", tmp_path / "x.db", "--control-share", 1.5, "--json")
    assert result.exit_code == 2 and "control_share" in result.output
    result = invoke("run", "--resume", "anything", "--db", tmp_path / "x.db", "--control-share", 0)
    assert result.exit_code == 2 and "--control-share" in result.output


def test_show_json_lists_events_with_seq_and_type(ran):
    db, summary = ran
    result = invoke("show", summary["campaign_id"], "--db", db, "--json")
    events = json.loads(result.stdout)
    assert events[0]["type"] == "CampaignStarted" and events[0]["seq"] == 1
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert invoke("show", summary["campaign_id"], "--db", db).exit_code == 0


def test_ls_json(ran):
    db, summary = ran
    rows = json.loads(invoke("ls", "--db", db, "--json").stdout)
    assert rows == [{**rows[0], "campaign_id": summary["campaign_id"], "status": "stopped", "n_lab": summary["n_lab"]}]


def test_ledger_verify_exit_codes(ran, tmp_path):
    db, summary = ran
    assert invoke("ledger", "verify", "--db", db, summary["campaign_id"]).exit_code == 0
    assert invoke("ledger", "verify", "--db", db).exit_code == 0
    copy = tmp_path / "tampered.db"
    source = sqlite3.connect(db)
    target = sqlite3.connect(copy)
    source.backup(target)
    target.execute("UPDATE lab_job SET value = value + 1")
    target.commit()
    target.close()
    source.close()
    result = invoke("ledger", "verify", "--db", copy, summary["campaign_id"])
    assert result.exit_code == 1
    assert "lab_job" in result.stdout


def test_interrupted_run_resumes_from_the_cli(tmp_path):
    db = tmp_path / "r.db"
    first = invoke("run", FREESOLV_SPEC, "--db", db, "--lab-budget", 8, "--max-steps", 7, "--json",
                   "--campaign-id", "cli-resume", "--planner", "bo")
    assert json.loads(first.stdout)["status"] == "running"
    second = invoke("run", "--resume", "cli-resume", "--db", db, "--json")
    assert second.exit_code == 0
    assert json.loads(second.stdout)["status"] == "stopped"


def test_invalid_spec_exits_2_with_the_field(tmp_path):
    spec = tmp_path / "bad.toml"
    spec.write_text(FREESOLV_SPEC.read_text().replace('direction = "target"', 'direction = "up"'))
    result = invoke("run", spec, "--db", tmp_path / "x.db")
    assert result.exit_code == 2
    assert "objective.direction" in result.output and "maximize" in result.output


def test_missing_database_and_campaign_are_explained(tmp_path, ran):
    result = invoke("ls", "--db", tmp_path / "nothing.db")
    assert result.exit_code == 2 and "no ledger database" in result.output
    db, _ = ran
    result = invoke("show", "ghost", "--db", db)
    assert result.exit_code == 2 and "ghost" in result.output


def test_simulate_runs_every_rung_of_the_molecule_ladder():
    result = invoke("simulate", "--kind", "molecule", "--json", "CCO", "c1ccccc1O")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [(r["input"], r["rung"]) for r in rows] == [
        (smiles, rung) for smiles in ("CCO", "c1ccccc1O") for rung in ("rdkit_descriptors", "conformers", "xtb")]
    assert all(r["status"] == "ok" and r["wall_s"] >= 0 for r in rows)
    xtb = {r["input"]: r["properties"] for r in rows if r["rung"] == "xtb"}
    assert -7 < xtb["CCO"]["dg_solv_kcal_mol"] < -2  # FreeSolv experiment: -5.0 kcal/mol


def test_simulate_materials_and_bad_input():
    result = invoke("simulate", "--kind", "material", "--json", "NaCl")
    rows = json.loads(result.stdout)
    assert [r["rung"] for r in rows] == ["composition", "prototype", "chgnet"]
    assert rows[0]["properties"]["is_charge_balanced"] == 1.0
    bad = invoke("simulate", "--kind", "molecule", "CCO", "C1CC")
    assert bad.exit_code == 2 and "'C1CC'" in bad.output
    unknown = invoke("simulate", "--kind", "material", "--ladder", "molecule", "NaCl")
    assert unknown.exit_code == 2 and "for molecules" in unknown.output


def test_approval_gate_from_the_cli(tmp_path):
    spec = tmp_path / "gated.toml"
    text = FREESOLV_SPEC.read_text().replace('policy = "auto"', 'policy = "interrupt"')
    spec.write_text(text.replace('pool = "data/', f'pool = "{FREESOLV_SPEC.parent}/data/'))
    db = tmp_path / "gate.db"
    waiting = json.loads(invoke("run", spec, "--db", db, "--lab-budget", 4, "--json", "--campaign-id", "g",
                                "--planner", "bo").stdout)
    assert waiting["status"] == "waiting_for_approval" and waiting["n_lab"] == 0
    assert len(waiting["approval"]["job_keys"]) == 4
    done = json.loads(invoke("run", "--resume", "g", "--db", db, "--yes", "--json").stdout)
    assert done["status"] == "stopped" and done["n_lab"] == 4


def test_exact_replay_json(ran):
    db, summary = ran
    report = json.loads(invoke("replay", summary["campaign_id"], "--db", db, "--json").stdout)
    assert report["identical"] is True and report["differences"] == []
    assert report["n_events"] == len(json.loads(invoke("show", summary["campaign_id"], "--db", db, "--json").stdout))


def test_export_import_report(ran, tmp_path):
    db, summary = ran
    cid = summary["campaign_id"]
    out_file = tmp_path / "c.jsonl"
    assert invoke("ledger", "export", cid, "--db", db, "--out", out_file).exit_code == 0
    other = tmp_path / "other.db"
    assert invoke("ledger", "import", out_file, "--db", other).exit_code == 0
    assert json.loads(invoke("replay", cid, "--db", other, "--json").stdout)["identical"] is True
    lines = out_file.read_text().splitlines()
    lines[5] = lines[5][:-10]
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join(lines) + "\n")
    result = invoke("ledger", "import", broken, "--db", tmp_path / "third.db")
    assert result.exit_code == 2 and "line 6" in result.output
    assert invoke("report", cid, "--db", db, "--out", tmp_path / "rep").exit_code == 0
    assert (tmp_path / "rep" / "index.html").is_file()


def test_worker_command_drives_a_started_campaign_to_its_end(tmp_path):
    import json

    from orchestrator.loop.campaign import Campaign

    db = tmp_path / "shared.db"
    with Campaign.start(small_spec(lab_experiments=4), db=db, campaign_id="shared") as campaign:
        campaign.run(max_steps=3)
    result = CliRunner().invoke(app, ["worker", "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["campaigns_finished"] == ["shared"] and report["n_steps"] > 0


def test_lab_serve_refuses_a_public_interface_without_a_token(monkeypatch):
    monkeypatch.delenv("CLOSEDLOOP_LAB_TOKEN", raising=False)
    result = invoke("lab", "serve", "--host", "0.0.0.0", "--port", 0)
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: --host 0.0.0.0 is reachable from other machines")
    assert "CLOSEDLOOP_LAB_TOKEN" in lines[0]


def test_lab_serve_warns_once_when_the_token_travels_in_clear(monkeypatch, caplog):
    import instruments.server

    served = []
    monkeypatch.setattr(instruments.server._Server, "run", lambda self: served.append(self.config.host))
    monkeypatch.setenv("CLOSEDLOOP_LAB_TOKEN", "s3cret-token")
    with caplog.at_level("WARNING"):
        result = invoke("lab", "serve", "--host", "0.0.0.0", "--port", 0)
    assert result.exit_code == 0, result.output
    assert served == ["0.0.0.0"]
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "plain HTTP" in warnings[0] and "s3cret-token" not in warnings[0]
    assert invoke("lab", "serve", "--host", "0.0.0.0", "--ssl-certfile", "cert.pem").exit_code == 2


def _approvers(db, campaign_id):
    events = json.loads(invoke("show", campaign_id, "--db", db, "--json").stdout)
    return [(e["payload"]["approved_by"], e["actor"]) for e in events if e["type"] == "Approved"]


def test_the_cli_records_who_approved(tmp_path, monkeypatch):
    import getpass

    from orchestrator.loop.campaign import Campaign

    monkeypatch.setattr(getpass, "getuser", lambda: "labtech")
    db = tmp_path / "who.db"
    spec = small_spec(lab_experiments=8, approval__policy="interrupt", planner__control_share=0.0)
    with Campaign.start(spec, db=db, campaign_id="w") as campaign:  # two batches of four, each waiting for a human
        campaign.run()
        assert campaign.pending_interrupt is not None
    bad = runner.invoke(app, ["run", "--resume", "w", "--db", str(db), "--approve", "all", "--by", "ada\nroot",
                              "--json"])
    assert bad.exit_code == 2 and "not printable" in bad.output
    assert _approvers(db, "w") == []  # the bad name was refused before anything was written
    named = json.loads(invoke("run", "--resume", "w", "--db", db, "--approve", "all", "--by", "ada", "--json").stdout)
    assert named["status"] == "waiting_for_approval"  # the second batch of the budget waits
    assert _approvers(db, "w") == [("human:ada", "human:ada")]
    done = json.loads(invoke("run", "--resume", "w", "--db", db, "--yes", "--json").stdout)
    assert done["status"] == "stopped"
    rest = _approvers(db, "w")[1:]
    assert rest and set(rest) == {("human:labtech", "human:labtech")}  # no --by: the login name


def test_without_a_login_name_the_cli_records_plain_human(monkeypatch):
    import getpass

    from orchestrator.interfaces.cli import _approver

    def nobody():
        raise OSError("no login name for uid 1234")

    monkeypatch.setattr(getpass, "getuser", nobody)
    assert _approver(None) is None and _approver(" ada ") == "ada"
    monkeypatch.setattr(getpass, "getuser", lambda: "x" * 200)  # a login name that is no valid name: none
    assert _approver(None) is None


def test_ls_counts_imported_results_apart_from_lab_experiments(tmp_path):
    """Imported past results are history: not counted as lab experiments, and not the campaign's best value."""
    import pandas as pd

    from orchestrator.loop.campaign import Campaign
    from orchestrator.loop.importing import HistoryFile
    from tests.conftest import BUCHWALD_SPEC

    past = tmp_path / "past.csv"
    pool = pd.read_csv(BUCHWALD_SPEC.parent / "data" / "experiment_index.csv")
    pool.sort_values("yield", ascending=False).iloc[:20].to_csv(past, index=False)  # the history holds the best
    db = tmp_path / "warm.db"
    spec = small_spec(BUCHWALD_SPEC, lab_experiments=4)
    with Campaign.start(spec, db=db, campaign_id="warm", history=HistoryFile(past)) as campaign:
        summary = campaign.run()
        assert campaign.ledger.campaign("warm").n_lab == 24  # the projection counts every Observed event
    [row] = json.loads(invoke("ls", "--db", db, "--json").stdout)
    assert (row["n_lab"], row["n_imported"]) == (summary["n_lab"], summary["n_imported"]) == (4, 20)
    own = max(summary["arms"].values(), key=lambda arm: arm["best_value"])
    assert (row["best_value"], row["best_candidate_id"]) == (own["best_value"], own["best_candidate_id"])
    assert row["best_value"] < pool["yield"].max(), "the history's best is not the campaign's"
    table = invoke("ls", "--db", db).stdout
    assert "imported" in table and "20" in table


def test_the_run_table_says_what_the_gp_took_from_the_ladder():
    from orchestrator.interfaces.cli import _ladder_prior_text

    assert _ladder_prior_text(None) == "none (the GP plans on lab results alone)"
    prior = {"rung": "xtb", "form": "mean", "is_calibrated": False, "evidence": 0.234, "n_train": 10}
    assert _ladder_prior_text(prior) == "xtb as the prior mean, not yet proved informative on 10 lab results, " \
                                        "P(informative) 0.23"
    older = dict(prior, form="feature", is_calibrated=True, evidence=None)  # a ledger from before `evidence`
    assert _ladder_prior_text(older) == "xtb as an input, proved informative on 10 lab results"


def test_run_json_reports_the_model_statistics_and_the_added_prior(tmp_path):
    """``run --json`` carries the llm arms' honest statistics (issue 51) and the prior ``planner.model_prior`` adds:
    here the bracket's coin, which calls no model, so the test needs none."""
    from tests.orchestrator.ledger.sandbox import write_tiny_spec

    spec = write_tiny_spec(tmp_path, lab_experiments=6)
    spec.write_text(spec.read_text().replace('main = "random"', 'main = "llm-random"'))
    db = tmp_path / "coin.db"
    result = invoke("run", spec, "--db", db, "--seed", 1, "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    coin = summary["planner_stats"]["llm-random"]
    assert {"fallback_share", "differs_from_bo_share", "coin_differs_from_bo_share", "first_option_share",
            "coin_first_option_share", "n_model_picks", "n_anchor", "n_lab_model_picks"} <= set(coin)
    assert coin["calls"] == 0 and coin["n_lab"] >= 1, coin
    events = json.loads(invoke("show", summary["campaign_id"], "--db", db, "--json").stdout)
    ladder = next(e for e in events if e["type"] == "CampaignStarted")["payload"]["spec"]["ladder"]
    prior = [r for r in ladder if r.get("added_by") == "planner.model_prior"]
    assert [(r["simulator"], r["parameters"]["model"]) for r in prior] == [("llm_prior", "coin")], ladder
