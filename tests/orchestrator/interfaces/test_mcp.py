"""``closedloop mcp`` driven by the mcp package's own client over stdio: a real server subprocess
(``python -m orchestrator.interfaces.cli_main mcp --db DB``), campaigns on the simulated lab, and the ledger as the judge."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.ledger import Ledger, verify
from orchestrator.loop.lease import CampaignLease
from tests.conftest import BUCHWALD_SPEC, ROOT

pytest.importorskip("mcp", reason='the mcp extra is not installed: pip install "closedloop[mcp]"')

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

TOOLS = {"list_campaigns", "start_campaign", "resume_campaign", "stop_campaign", "campaign_status", "suggest",
         "campaign_timeline", "approve_dispatch", "reject_dispatch", "decide_failed_jobs",
         "campaign_report", "add_results", "export_results"}


@asynccontextmanager
async def mcp_session(db: Path):
    """An initialised client session with a ``closedloop mcp`` subprocess serving ``db``."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "orchestrator.interfaces.cli_main", "mcp", "--db", str(db)], cwd=str(db.parent),
        env={"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content


async def call_error(session: ClientSession, tool: str, **arguments: Any) -> str:
    result = await session.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return result.content[0].text


async def poll(session: ClientSession, campaign_id: str, states: set[str], *, timeout_s: float = 240.0,
               seen: list[str] | None = None) -> dict[str, Any]:
    """campaign_status until this server's run of the campaign is in one of ``states``; the run states seen go to
    ``seen``."""
    deadline = time.monotonic() + timeout_s
    while True:
        status = await call(session, "campaign_status", campaign_id=campaign_id)
        state = status["run"]["state"]
        if seen is not None:
            seen.append(state)
        assert state != "failed", status["run"]["error"]
        if state in states:
            return status
        assert time.monotonic() < deadline, f"{campaign_id} still {state} after {timeout_s} s"
        await anyio.sleep(0.2)


def gated_spec(tmp_path: Path) -> Path:
    """The Buchwald–Hartwig spec with a human approval gate at every lab batch."""
    text = BUCHWALD_SPEC.read_text().replace('pool = "data/', f'pool = "{BUCHWALD_SPEC.parent}/data/')
    spec = tmp_path / "gated.toml"
    spec.write_text(text + '\n[approval]\npolicy = "interrupt"\n')
    return spec


def types_of(db: Path, campaign_id: str, event_type: str) -> list[dict[str, Any]]:
    ledger = Ledger.open(db)
    try:
        return [e.payload for e in ledger.events(campaign_id) if e.type == event_type]
    finally:
        ledger.close()


def test_an_agent_starts_a_campaign_watches_it_finish_and_reads_it(tmp_path):
    db = tmp_path / "mcp.db"

    async def agent():
        async with mcp_session(db) as session:
            assert {tool.name for tool in (await session.list_tools()).tools} == TOOLS
            started = await call(session, "start_campaign", spec=str(BUCHWALD_SPEC), planner="bo", lab_budget=6,
                                 campaign_id="drive")
            assert started["campaign_id"] == "drive" and started["status"] == "running"
            done = await poll(session, "drive", {"finished"})
            listed = await call(session, "list_campaigns")
            first = await call(session, "campaign_timeline", campaign_id="drive", limit=3, include_payload=False)
            rest = await call(session, "campaign_timeline", campaign_id="drive", after_seq=first["last_seq"],
                              limit=5000)
            observed = await call(session, "campaign_timeline", campaign_id="drive", types=["Observed"])
            report = await call(session, "campaign_report", campaign_id="drive")
            return done, listed, first, rest, observed, report

    done, listed, first, rest, observed, report = anyio.run(agent)
    ledger = Ledger.open(db)
    events = ledger.events("drive")
    row = ledger.campaign("drive")
    assert verify(ledger, "drive").is_identical
    ledger.close()
    assert done["status"] == "stopped" and done["n_lab"] == 6 == row.n_lab
    assert [e.type for e in events].count("Dispatched") == 6 and events[-1].type == "CampaignStopped"
    # the best candidate is named as a chemist writes it (its conditions), never by an id alone
    best_label = listed["campaigns"][0].pop("best_candidate")
    assert "Aryl_halide_SMILES=" in best_label and row.best_candidate_id not in best_label
    assert listed["campaigns"] == [{"campaign_id": "drive", "name": "buchwald-hartwig-yield", "status": "stopped",
                                    "n_lab": 6, "n_imported": 0, "best_value": row.best_value,
                                    "best_candidate_id": row.best_candidate_id,
                                    "stop_reason": row.stop_reason, "run_state": "finished"}]
    # the timeline pages through the whole ledger, in order, with what `closedloop show` prints
    timeline = first["events"] + rest["events"]
    assert [(e["seq"], e["type"]) for e in timeline] == [(e.seq, e.type) for e in events]
    assert first["events"][0]["type"] == "CampaignStarted" and "payload" not in first["events"][0]
    assert rest["events"][-1]["payload"]["reason"] == row.stop_reason
    assert len(observed["events"]) == 6 and all(e["type"] == "Observed" for e in observed["events"])
    # each line names its candidate by its conditions, as `closedloop show` does, never by its id
    assert all("Aryl_halide_SMILES=" in e["what"] and "cond-" not in e["what"] for e in observed["events"])
    assert report["status"] == "stopped" and report["n_lab"] == 6 and report["main_arm"] == "bo"
    assert report["best"]["value"] == pytest.approx(row.best_value)


def test_approval_through_mcp_takes_the_cli_path_and_obeys_the_policy(tmp_path):
    db = tmp_path / "gate.db"
    spec = gated_spec(tmp_path)

    async def agent():
        async with mcp_session(db) as session:
            await call(session, "start_campaign", spec=str(spec), planner="random", control_share=0, lab_budget=10,
                       campaign_id="gate")
            waiting = await poll(session, "gate", {"waiting_for_approval"})
            keys = waiting["run"]["question"]["job_keys"]
            typo = await call_error(session, "approve_dispatch", campaign_id="gate", job_keys=[keys[0] + "x"])
            bad_name = await call_error(session, "approve_dispatch", campaign_id="gate", by="ada\nroot")
            partly = await call(session, "approve_dispatch", campaign_id="gate", job_keys=keys[:-1], by="ada")
            again = await poll(session, "gate", {"waiting_for_approval"})
            rejected = await call(session, "reject_dispatch", campaign_id="gate")
            status = await poll(session, "gate", {"waiting_for_approval", "finished"})
            while status["run"]["state"] != "finished":
                await call(session, "approve_dispatch", campaign_id="gate")
                status = await poll(session, "gate", {"waiting_for_approval", "finished"})
            too_late = await call_error(session, "approve_dispatch", campaign_id="gate")
            return waiting, keys, typo, bad_name, partly, again, rejected, status, too_late

    waiting, keys, typo, bad_name, partly, again, rejected, status, too_late = anyio.run(agent)
    # nothing reached the lab before the answer, and the gate asked about a whole batch
    assert waiting["n_lab"] == 0 and len(keys) > 1
    assert "not in the pending batch" in typo
    assert "not printable" in bad_name  # and nothing was recorded: the first Approved is the next answer's
    # the answers are the approve node's own events, as `closedloop run --resume --approve` records them
    approved = types_of(db, "gate", "Approved")
    assert approved[0]["job_keys"] == keys[:-1] and approved[0]["denied_keys"] == [keys[-1]]
    assert all(a["policy"] == "interrupt" for a in approved)
    # who answered: the name given with the answer, else plain "human"
    assert [a["approved_by"] for a in approved] == ["human:ada"] + ["human"] * (len(approved) - 1)
    assert partly["approved"] == approved[0]
    second = again["run"]["question"]["job_keys"]
    assert approved[1]["job_keys"] == [] and approved[1]["denied_keys"] == second
    assert rejected["approved"] == approved[1]
    denied = {r["raw"] for r in types_of(db, "gate", "Rejected") if r["stage"] == "approve"}
    assert denied == {keys[-1], *second}
    dispatched = {d["job_key"] for d in types_of(db, "gate", "Dispatched")}
    assert not dispatched & denied and set(keys[:-1]) <= dispatched
    assert status["status"] == "stopped" and status["n_lab"] == 10 == len(dispatched)
    assert "is not waiting for an approval" in too_late


def test_a_stopped_campaign_is_consistent_released_and_resumes(tmp_path):
    """Stopping lets go between two nodes; the test opens the ledger from its own process meanwhile, as a user's
    `closedloop ls` would (the server keeps one connection pool, so its SQLite locks hold: see BackgroundRuns)."""
    db = tmp_path / "stop.db"

    async def agent():
        async with mcp_session(db) as session:
            errors = [await call_error(session, "start_campaign", spec=str(tmp_path / "nope.toml")),
                      await call_error(session, "campaign_status", campaign_id="ghost"),
                      await call_error(session, "stop_campaign", campaign_id="ghost")]
            await call(session, "start_campaign", spec=str(BUCHWALD_SPEC), planner="random", control_share=0,
                       campaign_id="halt")
            seen: list[str] = []
            while (await poll(session, "halt", {"running"}, seen=seen))["n_lab"] < 5:
                await anyio.sleep(0.1)
            stopped = await call(session, "stop_campaign", campaign_id="halt")
            # the server let go of the campaign: another process could take its lease now
            ledger = Ledger.open(db)
            lease = CampaignLease(ledger, "halt")
            assert lease.try_acquire()
            lease.release()
            assert verify(ledger, "halt").is_identical
            ledger.close()
            budget = len(types_of(db, "halt", "Dispatched")) + 3
            resumed = await call(session, "resume_campaign", campaign_id="halt", lab_budget=budget)
            done = await poll(session, "halt", {"finished"})
            return errors, seen, stopped, budget, resumed, done

    errors, seen, stopped, budget, resumed, done = anyio.run(agent)
    # errors are tool errors whose text names what was wrong
    assert "nope.toml" in errors[0] and all("'ghost' has no events" in e for e in errors[1:])
    assert "running" in seen  # the server answered while the campaign ran
    assert stopped["run"]["state"] == "paused" and stopped["status"] == "running"
    assert 5 <= stopped["n_lab"] < 40
    assert resumed["run"]["state"] in {"running", "finished"}
    assert done["status"] == "stopped" and done["n_lab"] == budget
    assert types_of(db, "halt", "LabBudgetChanged")[-1]["lab_experiments"] == budget
    ledger = Ledger.open(db)
    assert verify(ledger, "halt").is_identical
    dispatched = [e.payload["job_key"] for e in ledger.events("halt") if e.type == "Dispatched"]
    ledger.close()
    assert len(dispatched) == len(set(dispatched)) == budget  # no job ran twice across the stop


def test_without_the_mcp_package_the_command_is_one_error_line(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['mcp'] = None\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]), "COLUMNS": "60"}
    result = subprocess.run([sys.executable, "-m", "orchestrator.interfaces.cli_main", "mcp", "--db", str(tmp_path / "x.db")],
                            check=False, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: closedloop mcp needs mcp, which is not installed")
    assert line.endswith('install it with pip install "closedloop[mcp]"')


def failing_spec(tmp_path: Path) -> Path:
    """The Buchwald–Hartwig spec on a lab whose readings often go bad, with failed jobs left to a human."""
    text = BUCHWALD_SPEC.read_text().replace('pool = "data/', f'pool = "{BUCHWALD_SPEC.parent}/data/')
    text = text.replace('[lab]\n', '[lab]\nfailure_policy = "ask"\ntolerated_failure_rate = 1.0\nmax_retries = 1\n'
                                   'parameters = { faults = { bad_reading_probability = 0.5 } }\n', 1)
    spec = tmp_path / "failing.toml"
    spec.write_text(text)
    return spec


def test_failed_lab_jobs_are_decided_through_mcp_under_the_clis_policy(tmp_path):
    db = tmp_path / "fail.db"

    async def agent():
        async with mcp_session(db) as session:
            await call(session, "start_campaign", spec=str(failing_spec(tmp_path)), planner="random",
                       control_share=0, lab_budget=8, campaign_id="fail")
            waiting = await poll(session, "fail", {"awaiting_decision", "finished"})
            failures = waiting["run"]["question"]["failures"]
            not_asked = await call_error(session, "approve_dispatch", campaign_id="fail")
            typo = await call_error(session, "decide_failed_jobs", campaign_id="fail",
                                    actions={failures[0]["job_key"] + "x": "retry"})
            both = await call_error(session, "decide_failed_jobs", campaign_id="fail", action="skip",
                                    actions={failures[0]["job_key"]: "retry"})
            retried = await call(session, "decide_failed_jobs", campaign_id="fail", action="retry", by="grace")
            status = await poll(session, "fail", {"awaiting_decision", "finished"})
            while status["run"]["state"] != "finished":
                await call(session, "decide_failed_jobs", campaign_id="fail", action="skip")
                status = await poll(session, "fail", {"awaiting_decision", "finished"})
            too_late = await call_error(session, "decide_failed_jobs", campaign_id="fail", action="retry")
            return waiting, failures, not_asked, typo, both, retried, status, too_late

    waiting, failures, not_asked, typo, both, retried, status, too_late = anyio.run(agent)
    assert waiting["run"]["state"] == "awaiting_decision" and failures
    assert all("bad reading" in f["reason"] for f in failures)
    assert "waits for a decision on failed lab jobs" in not_asked
    assert "are not among the failed jobs" in typo
    assert "either action" in both
    # the answers are the recover node's own events, decided by a human, as the CLI's retry/skip/abort prompt records
    handled = types_of(db, "fail", "FailureHandled")
    first = [h for h in handled if h["job_key"] in {f["job_key"] for f in failures}]
    assert {h["decided_by"] for h in first} == {"human:grace"}  # the name given with the decision
    assert {h["decided_by"] for h in handled if h not in first} <= {"human"}
    assert [h["action"] for h in first] == ["retry"] * len(failures)
    assert retried["decided"] == first
    retries = {d["job_key"] for d in types_of(db, "fail", "Dispatched")}
    assert all(f"{f['job_key']}/retry2" in retries for f in failures)  # a retry is a new job key
    assert status["status"] == "stopped"
    assert "is not waiting for a decision" in too_late
    ledger = Ledger.open(db)
    assert verify(ledger, "fail").is_identical
    ledger.close()
