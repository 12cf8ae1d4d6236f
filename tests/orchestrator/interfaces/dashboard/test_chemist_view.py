"""The dashboard as a chemist reads it: molecules drawn and named by SMILES (never an InChIKey), the target and the
best so far with its uncertainty, a sortable results table with units and uncertainties, the waiting statuses, and an
approval gate that asks for an explicit choice per candidate, shows each one's predicted value and records a reason
for a rejection. The answers go through ``BackgroundRuns``, as the page's buttons do; the ledger is the judge."""

from __future__ import annotations

import json
import re
from html import unescape

import pytest

from orchestrator.ledger import Ledger
from orchestrator.loop.campaign import Campaign
from tests.conftest import small_spec

pytest.importorskip("jinja2", reason='the dashboard extra is not installed: pip install "closedloop[dashboard]"')

from fastapi.testclient import TestClient  # noqa: E402

from orchestrator.interfaces.dashboard import create_app  # noqa: E402
from orchestrator.interfaces.dashboard.app import choices_of, entered_rows  # noqa: E402
from orchestrator.interfaces.dashboard.views import (  # noqa: E402
    measured,
    rounded_pair,
    shown_status,
    status_text,
)

LOCAL = "http://127.0.0.1:8765"
HX = {"HX-Request": "true", "Origin": LOCAL}
INCHIKEY = re.compile(r"\b[A-Z]{14}-[A-Z]{10}-[A-Z]\b")


def visible_text(html: str) -> str:
    """What a person reads on the page: the text between tags (attributes, which hold ids for links, left out)."""
    html = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S)
    return unescape(re.sub(r"<[^>]+>", " ", html))


def panel(html: str, panel_id: str) -> str:
    match = re.search(rf'<section id="{panel_id}".*?</section>', html, flags=re.S)
    assert match is not None, f"no #{panel_id} panel"
    return match.group(0)


@pytest.fixture(scope="module")
def gated_db(tmp_path_factory):
    """FreeSolv (molecules, a target of -12 ± 0.5 kcal/mol) stopped at its second human gate: one batch measured."""
    db = tmp_path_factory.mktemp("chemist") / "gated.db"
    spec = small_spec(lab_experiments=12, approval__policy="interrupt", planner__control_share=0.0)
    with Campaign.start(spec, db=db, campaign_id="gated") as campaign:
        campaign.run()
    with Campaign.resume("gated", db=db) as campaign:
        campaign.run(approval=True)
        assert campaign.pending_interrupt is not None
    return db


@pytest.fixture
def client(gated_db):
    with TestClient(create_app(gated_db, poll_s=0.05), base_url=LOCAL) as test_client:
        yield test_client


def test_the_status_shows_the_target_the_waiting_status_and_the_best_with_its_uncertainty(client, gated_db):
    page = client.get("/campaigns/gated").text
    status = visible_text(panel(page, "status"))
    assert "waiting for approval" in status and "running" not in status
    assert re.search(r"target\s+-12 ± 0.5 kcal/mol", status)
    ledger = Ledger.open(gated_db)
    row = ledger.campaign("gated")
    best = [e.payload for e in ledger.events("gated", types=["Observed"])
            if e.payload["candidate_id"] == row.best_candidate_id][0]
    smiles = ledger.candidate("gated", row.best_candidate_id).canonical
    ledger.close()
    assert measured(best["value"], best["uncertainty"], "kcal/mol") in status
    assert best["uncertainty"] is not None and " ± " in measured(best["value"], best["uncertainty"])
    assert re.search(r'"smiles":\s*"([^"]+)"', smiles).group(1) in status  # the best candidate named by its SMILES
    [drawing] = re.findall(r'<img src="([^"]+)"[^>]*id="best-drawing"', page)
    svg = client.get(unescape(drawing))
    assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg+xml")
    assert svg.text.startswith("<svg") and "</svg>" in svg.text
    assert "waiting for approval" in visible_text(client.get("/").text)


def test_no_inchikey_reaches_the_reader(client, gated_db):
    page = client.get("/campaigns/gated").text
    ledger = Ledger.open(gated_db)
    ids = [row.candidate_id for row in ledger.candidates("gated")]
    ledger.close()
    assert ids and all(INCHIKEY.fullmatch(i) for i in ids)  # the ids are InChIKeys: the check below means something
    for name in ("status", "approvals", "results"):
        text = visible_text(panel(page, name))
        assert not INCHIKEY.search(text), (name, INCHIKEY.findall(text))
    listing = visible_text(client.get("/").text)
    assert not INCHIKEY.search(listing)
    ledger = Ledger.open(gated_db)
    best = ledger.campaign("gated").best_candidate_id
    smiles = next(json.loads(r.canonical)["smiles"] for r in ledger.candidates("gated") if r.candidate_id == best)
    ledger.close()
    assert smiles in listing  # the campaign list names the best candidate by its SMILES


def test_the_results_table_is_sortable_with_value_unit_uncertainty_arm_iteration_and_status(client, gated_db):
    results = panel(client.get("/campaigns/gated").text, "results")
    assert 'class="sortable"' in results
    headings = [visible_text(h).strip() for h in re.findall(r"<th[^>]*>.*?</th>", results, flags=re.S)]
    for heading in ("iteration", "structure", "candidate", "arm", "value", "unit", "uncertainty (sd)", "status"):
        assert heading in headings
    ledger = Ledger.open(gated_db)
    observed = [e.payload for e in ledger.events("gated", types=["Observed"])]
    ledger.close()
    rows = re.findall(r'<tr class="result" data-job="([^"]+)">(.*?)</tr>', results, flags=re.S)
    assert [unescape(key) for key, _ in rows] == [o["job_key"] for o in observed][::-1]  # newest first
    for (_, cells), o in zip(rows, observed[::-1], strict=True):
        value, sd = rounded_pair(o["value"], o["uncertainty"])
        text = visible_text(cells)
        assert value in text and sd in text and "kcal/mol" in text and o["arm"] in text and "ok" in text
        assert f'data-sort="{o["value"]}"' in cells  # sorted on the exact value, not on its rounded text
        assert re.search(r'<img src="/campaigns/gated/candidates/[^"]+\.svg"', cells)


def test_the_approval_asks_per_candidate_with_its_prediction(client, gated_db):
    approvals = panel(client.get("/campaigns/gated").text, "approvals")
    ledger = Ledger.open(gated_db)
    keys = ledger.last_event("gated", "ApprovalRequested").payload["job_keys"]
    ledger.close()
    for key in keys:
        # two choices and no default: the person chooses, Enter does not approve the batch
        radios = re.findall(rf'<input type="radio" name="choice:{re.escape(key)}" value="(\w+)"([^>]*)>', approvals)
        assert [value for value, _ in radios] == ["approve", "reject"]
        assert not any("checked" in rest for _, rest in radios)
        assert f'name="reason:{key}"' in approvals
    predicted = re.findall(r'<td class="predicted">(.*?)</td>', approvals, flags=re.S)
    assert len(predicted) == len(keys)
    assert all(re.search(r"-?\d+(\.\d+)?( ± \d)?", visible_text(p)) for p in predicted), predicted  # bo predicts


def test_a_choice_missing_for_a_candidate_is_refused_and_records_nothing(client, gated_db):
    ledger = Ledger.open(gated_db)
    keys = ledger.last_event("gated", "ApprovalRequested").payload["job_keys"]
    n_events = ledger.n_events("gated")
    answer = client.post("/campaigns/gated/approve", headers=HX,
                         data={"job": keys, f"choice:{keys[0]}": "approve", "by": ""})
    assert answer.status_code == 200 and 'class="error"' in answer.text
    assert f"{len(keys) - 1} of {len(keys)} have no choice yet" in answer.text
    assert ledger.n_events("gated") == n_events
    ledger.close()


def test_a_rejection_with_a_reason_is_recorded_with_it(tmp_path):
    db = tmp_path / "reasons.db"
    spec = small_spec(lab_experiments=4, approval__policy="interrupt", planner__control_share=0.0)
    with Campaign.start(spec, db=db, campaign_id="reasons") as campaign:
        campaign.run()
    ledger = Ledger.open(db)
    keys = ledger.last_event("reasons", "ApprovalRequested").payload["job_keys"]
    app = create_app(ledger)
    with TestClient(app, base_url=LOCAL) as client:
        data = {"job": keys, **{f"choice:{k}": "approve" for k in keys[1:]}, f"choice:{keys[0]}": "reject",
                f"reason:{keys[0]}": "we have no stock of it", "by": "ada"}
        answered = client.post("/campaigns/reasons/approve", headers=HX, data=data)
        assert answered.status_code == 200 and "answer recorded" in answered.text, answered.text
        app.state.runs.get("reasons").join(timeout_s=120)
    approved = ledger.events("reasons", types=["Approved"])[0].payload
    assert approved["job_keys"] == keys[1:] and approved["denied_keys"] == [keys[0]]
    assert approved["approved_by"] == "human:ada"
    [rejected] = [e.payload for e in ledger.events("reasons", types=["Rejected"]) if e.payload["stage"] == "approve"]
    assert "we have no stock of it" in rejected["reason"]
    ledger.close()


def test_a_legacy_row_that_waits_at_the_gate_is_shown_as_waiting(gated_db):
    ledger = Ledger.open(gated_db)
    row = ledger.campaign("gated").model_copy(update={"status": "running"})  # as a ledger from before the status
    assert shown_status(ledger, row, None) == "waiting_for_approval"
    ledger.close()
    assert status_text("waiting_for_results") == "waiting for results"


def test_the_form_helpers_read_choices_and_entered_results():
    approval, reasons = choices_of({"job": ["c/A", "c/B"], "choice:c/A": "reject", "choice:c/B": "reject",
                                    "reason:c/A": " toxic ", "reason:c/B": ""})
    assert approval is False and reasons == {"c/A": "toxic"}
    assert choices_of({"job": ["c/A"], "choice:c/A": "approve"}) == (True, {})
    assert entered_rows({"job": ["c/A"], "value:c/A": "1.5", "sd:c/A": "0.2"}, "dg") == [
        {"job": "c/A", "dg": 1.5, "uncertainty": 0.2}]
    from vocabulary.domain import SetupError

    for bad in ({"job": ["c/A"], "value:c/A": "about 3"}, {"job": ["c/A"], "value:c/A": "nan"},
                {"job": ["c/A"], "value:c/A": ""}):
        with pytest.raises(SetupError):
            entered_rows(bad, "dg")


def manual_spec():
    """Molecules measured by a person (``[lab] driver = "manual"``), two at a time."""
    from orchestrator.spec import CampaignSpec

    return CampaignSpec.model_validate({
        "campaign": {"name": "bench", "kind": "molecule", "seed": 5},
        "objective": {"direction": "maximize", "property": "yield", "unit": "%"},
        "space": {"inline": ["CCO", "CCN", "CCCl", "CCCO", "CCCN", "c1ccccc1", "Cc1ccccc1", "Oc1ccccc1"]},
        "lab": {"driver": "manual", "parameters": {"max_parallel_jobs": 2}},
        "budget": {"lab_experiments": 4},
        "planner": {"main": "random", "control": None, "control_share": 0, "batch_size": 2, "n_initial": 2},
    })


def test_results_entered_in_the_page_are_recorded_and_the_campaign_plans_on(tmp_path):
    db = tmp_path / "bench.db"
    with Campaign.start(manual_spec(), db=db, campaign_id="bench") as campaign:
        assert campaign.run()["status"] == "waiting_for_results"
    ledger = Ledger.open(db)
    app = create_app(ledger)
    with TestClient(app, base_url=LOCAL) as client:
        page = client.get("/campaigns/bench").text
        assert "waiting for results" in visible_text(panel(page, "status"))
        entry = panel(page, "entry")
        keys = [unescape(k) for k in re.findall(r'<tr class="pending-job" data-job="([^"]+)"', entry)]
        assert len(keys) == 2 and not INCHIKEY.search(visible_text(entry))
        assert 'name="value:' in entry and 'id="continue"' in entry  # a value per job, and the way on

        n_events = ledger.n_events("bench")
        bad = client.post("/campaigns/bench/results", headers=HX, data={"job": keys, f"value:{keys[0]}": "about 40"})
        assert 'class="error' in bad.text and "is not a number" in bad.text and ledger.n_events("bench") == n_events

        # one result now (the other is still being measured)
        first = client.post("/campaigns/bench/results", headers=HX,
                            data={"job": keys, f"value:{keys[0]}": "41.5", f"sd:{keys[0]}": "1.2", "by": "ada"})
        assert "1 recorded" in first.text, first.text
        [entered] = [e for e in ledger.events("bench", types=["ResultEntered"])]
        assert entered.payload["job_key"] == keys[0] and entered.payload["value"] == 41.5
        assert entered.payload["uncertainty"] == 1.2 and entered.actor == "human:ada"
        now = panel(first.text, "entry")
        assert f'data-job="{keys[1]}"' in now and f'<tr class="pending-job" data-job="{keys[0]}"' not in now
        assert "41.5 ± 1.2 %" in visible_text(now)  # listed as entered, to be read at the next plan

        # the same result again (a second browser tab) is a duplicate; the other run failed at the bench
        again = client.post("/campaigns/bench/results", headers=HX, data={"job": [keys[0]], f"value:{keys[0]}": "41.5"})
        assert "duplicate" in again.text
        failed = client.post("/campaigns/bench/results", headers=HX,
                             data={"job": [keys[1]], f"failed:{keys[1]}": "on", f"reason:{keys[1]}": "flask broke"})
        assert "1 recorded" in failed.text

        planned = client.post("/campaigns/bench/continue", headers=HX)
        assert "plans its next batch" in planned.text, planned.text
        app.state.runs.get("bench").join(timeout_s=120)
        observed = {e.payload["job_key"]: e.payload for e in ledger.events("bench", types=["Observed"])}
        assert observed[keys[0]]["value"] == 41.5 and observed[keys[1]]["status"] == "failed"
        page = client.get("/campaigns/bench").text
        assert "waiting for results" in visible_text(panel(page, "status"))
        results = panel(page, "results")
        assert "41.5" in visible_text(results) and "flask broke" in visible_text(results)
        new = [unescape(k) for k in re.findall(r'<tr class="pending-job" data-job="([^"]+)"', panel(page, "entry"))]
        assert new and not set(new) & set(keys)  # the next batch is at the bench
    ledger.close()


def test_a_campaign_with_a_robot_has_no_entry_form(client):
    entry = panel(client.get("/campaigns/gated").text, "entry")
    assert "hidden" in entry.split(">")[0] and "<form" not in entry
