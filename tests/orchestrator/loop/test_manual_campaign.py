"""A campaign on the manual lab: it dispatches a batch to a person and returns ``waiting_for_results``; results are
entered (a CSV, Python), the campaign is restarted (a fresh ``Campaign.resume``, a new process) and plans on, over
days of lab time whose only clock is the results' own time stamps; the ledger verifies and replays. Partial, late,
duplicated, conflicting, off-plan and failed results each get their answer and lose nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta

import pandas as pd
import pytest

from orchestrator.ledger import Ledger, verify
from orchestrator.loop.campaign import Campaign
from orchestrator.loop.manual_results import (
    ResultsEntryError,
    add_results,
    export_results,
    pending_jobs,
    read_results_csv,
)
from orchestrator.spec import CampaignSpec
from tests.conftest import ROOT
from vocabulary.domain import SetupError

SMILES = ["C", "CC", "CCC", "CCCC", "CCCCC", "CCO", "CCN", "CCCl", "CCCO", "CCCN", "c1ccccc1", "Cc1ccccc1"]
DAY_S = 86400.0


def manual_spec(*, planner: str = "random", budget: int = 6, wait: str = "all", **lab) -> CampaignSpec:
    return CampaignSpec.model_validate({
        "campaign": {"name": "bench", "kind": "molecule", "seed": 5},
        "objective": {"direction": "maximize", "property": "yield", "unit": "%"},
        "space": {"inline": SMILES},
        "lab": {"driver": "manual", "parameters": {"max_parallel_jobs": 2}, "wait": wait, **lab},
        "budget": {"lab_experiments": budget},
        "planner": {"main": planner, "control": None, "control_share": 0, "batch_size": 2, "n_initial": 2},
    })


def truth(smiles: str) -> float:
    """What the bench measures: a yield, %."""
    return 10.0 + 7.5 * len(smiles) - 3.0 * smiles.count("O")


def started(tmp_path, spec: CampaignSpec, campaign_id: str = "bench"):
    db = tmp_path / "bench.db"
    with Campaign.start(spec, db=db, campaign_id=campaign_id) as campaign:
        summary = campaign.run()
    return db, summary


def measured(jobs: pd.DataFrame, at) -> pd.DataFrame:
    """The suggest table filled in at the bench: the yield and when it was measured."""
    filled = jobs.drop(columns=["predicted", "sd"]).copy()
    filled["yield"] = [truth(s) for s in filled["smiles"]]
    filled["measured_at"] = at.isoformat()
    return filled


def test_a_manual_campaign_runs_over_days_through_csv_files_and_restarts(tmp_path):
    db, summary = started(tmp_path, manual_spec(planner="bo"))
    assert summary["status"] == "waiting_for_results" and summary["n_lab"] == 0
    ledger = Ledger.open(db)
    start = ledger.events("bench", types=["CampaignStarted"])[0].at.replace(tzinfo=None)
    n_rounds = 0
    for day in (1, 3, 5):
        assert ledger.campaign("bench").status == "waiting_for_results"  # what `ls` and the dashboard show
        jobs = pending_jobs(ledger, "bench")
        assert list(jobs.columns) == ["job", "smiles", "predicted", "sd"] and len(jobs) == 2
        if day > 1:  # the model predicts from the first round on
            assert jobs["predicted"].notna().all()
        path = tmp_path / f"day{day}.csv"
        measured(jobs, start + timedelta(days=day)).to_csv(path, index=False)
        receipt = add_results(ledger, "bench", read_results_csv(path), by="ada")
        assert [r.outcome for r in receipt.rows] == ["recorded", "recorded"]
        assert receipt.rows[0].row == "line 2"
        if day == 3:  # a restart in another process: only the ledger carries the campaign over
            script = ("import json, sys; from orchestrator.loop.campaign import Campaign\n"
                      f"with Campaign.resume('bench', db={str(db)!r}) as c: print(json.dumps(c.run()['status']))")
            done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                                  timeout=300)
            assert done.returncode == 0, done.stderr
            status = json.loads(done.stdout.strip().splitlines()[-1])
        else:
            with Campaign.resume("bench", db=db) as campaign:
                status = campaign.run()["status"]
        n_rounds += 1
        assert status == ("stopped" if day == 5 else "waiting_for_results")
    with Campaign.resume("bench", db=db) as campaign:
        summary = campaign.summary()
    assert n_rounds == 3 and summary["n_lab"] == 6 and summary["stop_reason"].startswith("lab budget used")
    assert summary["lab_hours"] == pytest.approx(5 * 24, abs=0.5)  # the bench's time stamps are the lab clock
    observed = ledger.events("bench", types=["Observed"])
    assert {e.actor for e in observed} == {"human:ada"} and {e.payload["provenance"] for e in observed} == {"lab"}
    dispatched = [e.payload["sim_time_s"] for e in ledger.events("bench", types=["Dispatched"])]
    assert dispatched[2] >= 1 * DAY_S and dispatched[4] >= 3 * DAY_S  # each batch went out after the last results
    report = verify(ledger, "bench")
    assert report.is_identical and report.chain_break is None  # the replay folds to the same projections
    exported = export_results(ledger, "bench")
    assert len(exported) == 6 and set(exported["provenance"]) == {"entered"} and set(exported["by"]) == {"human:ada"}
    head = ledger.head_seq("bench")
    again = add_results(ledger, "bench", exported, by="ada")  # the export entered again changes nothing
    assert {r.outcome for r in again.rows} == {"duplicate"} and ledger.head_seq("bench") == head
    ledger.close()


def test_the_same_through_python_with_partial_results_and_wait_any(tmp_path):
    db, _ = started(tmp_path, manual_spec(wait="any", budget=4))
    with Campaign.resume("bench", db=db) as campaign:
        jobs = campaign.suggest()
        first = jobs.iloc[:1].assign(**{"yield": 42.0})
        receipt = campaign.add_results(first)
        assert [r.outcome for r in receipt.rows] == ["recorded"]
        summary = campaign.run()
        # one result in: the freed slot is planned and dispatched, and the other job still waits
        assert summary["status"] == "waiting_for_results" and summary["n_lab"] == 1
        waiting = campaign.suggest()
        assert len(waiting) == 2 and jobs["job"].iloc[1] in set(waiting["job"])
        assert jobs["job"].iloc[0] not in set(waiting["job"])
        campaign.add_results(waiting.assign(**{"yield": [50.0, 51.0]}))
        summary = campaign.run()
    assert summary["n_lab"] == 3 and summary["status"] == "waiting_for_results"


def test_with_wait_all_a_partial_batch_keeps_the_campaign_waiting(tmp_path):
    db, _ = started(tmp_path, manual_spec())
    with Campaign.resume("bench", db=db) as campaign:
        jobs = campaign.suggest()
        campaign.add_results([{"job": jobs["job"][0], "yield": 30.0}])
        summary = campaign.run()
        assert summary["status"] == "waiting_for_results" and summary["n_lab"] == 1
        assert list(campaign.suggest()["job"]) == [jobs["job"][1]]
        head = campaign.ledger.head_seq("bench")
        assert campaign.run()["status"] == "waiting_for_results"
        assert campaign.ledger.head_seq("bench") == head  # asking again with nothing new writes nothing
        campaign.add_results([{"smiles": jobs["smiles"][1], "yield": 31.0}])  # by the candidate's own column
        summary = campaign.run()
    assert summary["n_lab"] == 2 and len(pending_jobs(Ledger.open(db), "bench")) == 2  # the next batch


def test_duplicates_conflicts_and_off_plan_measurements_each_get_their_answer(tmp_path):
    db, _ = started(tmp_path, manual_spec(planner="random"))
    ledger = Ledger.open(db)
    job = pending_jobs(ledger, "bench")["job"][0]
    assert add_results(ledger, "bench", [{"job": job, "yield": 20.0}]).rows[0].outcome == "recorded"
    head = ledger.head_seq("bench")
    again = add_results(ledger, "bench", [{"job": job, "yield": 20.0}])
    assert again.rows[0].outcome == "duplicate" and ledger.head_seq("bench") == head
    conflict = add_results(ledger, "bench", [{"job": job, "yield": 25.0}])
    assert conflict.rows[0].outcome == "refused" and "already has the result 20.0" in conflict.rows[0].detail
    assert ledger.head_seq("bench") == head
    untested = next(s for s in SMILES if s not in set(pending_jobs(ledger, "bench")["smiles"]))
    off = add_results(ledger, "bench", [{"smiles": untested, "yield": 77.0, "uncertainty": 1.5}], by="bo")
    assert off.rows[0].outcome == "off_plan" and off.rows[0].candidate == untested
    recorded = ledger.events("bench", types=["Observed"])[-1]
    assert (recorded.payload["provenance"], recorded.payload["driver"], recorded.actor) == (
        "imported", "manual:bo", "importer:human:bo")
    assert add_results(ledger, "bench", [{"smiles": untested, "yield": 77.0, "uncertainty": 1.5}]).rows[0].outcome \
        == "duplicate"
    with Campaign.resume("bench", db=db) as campaign:
        summary = campaign.run()
        history = campaign.ctx.view.history()
    assert summary["n_imported"] == 1 and summary["n_lab"] == 1  # the off-plan result is history, not budget
    assert any(r[0] != job and r[2] == 77.0 for r in history.results)  # ... and the planner learns from it
    ledger.close()


def test_a_failed_run_is_entered_with_its_reason_and_a_late_result_is_kept(tmp_path):
    db, _ = started(tmp_path, manual_spec(failure_policy="abort", wait="any"))  # the failure is handled at once
    ledger = Ledger.open(db)
    jobs = pending_jobs(ledger, "bench")
    with pytest.raises(ResultsEntryError, match=r"row 1, column reason: a failed run needs a reason"):
        add_results(ledger, "bench", [{"job": jobs["job"][0], "status": "failed"}])
    add_results(ledger, "bench", [{"job": jobs["job"][0], "status": "failed", "reason": "no product formed"}])
    with Campaign.resume("bench", db=db) as campaign:
        summary = campaign.run()
    assert summary["status"] == "stopped" and "no product formed" in summary["stop_reason"]  # the abort policy
    failed = ledger.events("bench", types=["Observed"])[0].payload
    assert (failed["status"], failed["reason"]) == ("failed", "no product formed")
    assert pending_jobs(ledger, "bench").empty
    late = add_results(ledger, "bench", [{"job": jobs["job"][1], "yield": 12.0}])
    # the abort cancelled the other job; its result, come late, is kept as an off-plan measurement
    assert late.rows[0].outcome == "off_plan" and late.rows[0].detail.startswith("late: the job had ended (cancelled")
    exported = export_results(ledger, "bench")
    assert exported["provenance"].tolist() == ["entered", "lab", "off-plan"]
    assert exported["status"].tolist() == ["failed", "failed", "ok"] and exported["yield"].tolist()[2] == 12.0
    ledger.close()


def test_bad_rows_refuse_the_whole_entry_and_write_nothing(tmp_path):
    db, _ = started(tmp_path, manual_spec())
    ledger = Ledger.open(db)
    job = pending_jobs(ledger, "bench")["job"][0]
    head = ledger.head_seq("bench")
    cases = [
        ([{"job": job, "yield": 1.0}, {"job": "nope", "yield": 2.0}], r"row 2, column job: no job 'nope'"),
        ([{"job": job, "amount": 1.0}], r"no 'yield' column"),
        ([{"job": job, "yield": "lots"}], r"row 1, column yield: 'lots' is not a number"),
        ([{"smiles": "not a molecule", "yield": 1.0}], r"row 1, column smiles"),
        ([{"smiles": "CCCCCCCCCCCC", "yield": 1.0}], r"not in the campaign's design space"),
        ([{"job": job, "yield": 1.0, "measured_at": "yesterday-ish"}], r"column measured_at"),
    ]
    for rows, message in cases:
        with pytest.raises(ResultsEntryError, match=message):
            add_results(ledger, "bench", rows)
    assert ledger.head_seq("bench") == head
    ledger.close()


def test_a_robot_lab_takes_off_plan_measurements_but_reports_its_own_jobs(tmp_path):
    """Without ``driver = "manual"`` the loop runs as before; a person may still add an off-plan measurement."""
    spec = CampaignSpec.model_validate({
        "campaign": {"name": "robot", "kind": "molecule", "seed": 1},
        "objective": {"direction": "maximize", "property": "yield"},
        "space": {"inline": SMILES[:6]},
        "lab": {"oracle": {s: truth(s) for s in SMILES[:6]}},
        "budget": {"lab_experiments": 3}, "planner": {"main": "random", "control": None, "control_share": 0},
    })
    with Campaign.start(spec, db=tmp_path / "robot.db", campaign_id="robot") as campaign:
        campaign.run(max_steps=6)  # survey .. dispatch: the first job is in the lab
        ledger = campaign.ledger
        job = ledger.events("robot", types=["Dispatched"])[0].payload["job_key"]
        refused = campaign.add_results([{"job": job, "yield": 1.0}])
        assert refused.rows[0].outcome == "refused" and "reports this job's result itself" in refused.rows[0].detail
        off = campaign.add_results([{"smiles": SMILES[5], "yield": 99.0}], by="ada")
        assert off.rows[0].outcome == "off_plan"
        summary = campaign.run()
    assert summary["status"] == "stopped" and summary["n_lab"] == 3 and summary["n_imported"] == 1
    assert not ledger.events("robot", types=["ResultEntered", "ResultsAwaited"])


def test_suggest_and_add_results_alone_are_the_ask_tell_loop(tmp_path):
    spec = manual_spec(budget=4)
    with Campaign.start(spec, db=tmp_path / "ledger.db", campaign_id="asktell") as campaign:
        seen = []
        for _ in range(2):
            jobs = campaign.suggest()  # plans and dispatches the next batch when nothing is left at the bench
            assert len(jobs) == 2 and not set(jobs["job"]) & set(seen)
            seen += list(jobs["job"])
            campaign.add_results(jobs.assign(**{"yield": [truth(s) for s in jobs["smiles"]]}))
        assert campaign.suggest().empty  # the budget is spent: nothing more to run
        summary = campaign.summary()
    assert summary["status"] == "stopped" and summary["n_lab"] == 4


def test_suggest_n_sizes_the_next_batch_and_the_ledger_alone_says_so(tmp_path):
    spec = manual_spec(budget=5, parameters={"max_parallel_jobs": 3})  # batch_size 2, lab capacity 3
    db = tmp_path / "ledger.db"
    with Campaign.start(spec, db=db, campaign_id="sized") as campaign:
        assert len(campaign.suggest()) == 2  # the spec's batch_size
        jobs = campaign.suggest()
        assert len(jobs) == 2  # jobs at the bench come back as they are: n would not apply to them
        campaign.add_results(jobs.assign(**{"yield": [truth(s) for s in jobs["smiles"]]}))
        assert len(campaign.suggest(3, by="ada")) == 3  # a batch of three, the lab's whole capacity
        with pytest.raises(SetupError, match="whole number >= 1"):
            campaign.suggest(0)
    ledger = Ledger.open(db)
    requests = ledger.events("sized", types=["BatchRequested"])
    assert [(e.payload["n"], e.actor) for e in requests] == [(3, "human:ada")]
    assert verify(ledger, "sized").is_identical
    ledger.close()
