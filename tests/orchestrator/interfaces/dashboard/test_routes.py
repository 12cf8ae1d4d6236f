"""The dashboard's HTTP routes with FastAPI's TestClient: pages, fragments, plots, access rules and the answer buttons
(which go through ``BackgroundRuns``, the code ``closedloop mcp`` answers with), plus the command's refusals."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from orchestrator.ledger import Ledger
from orchestrator.loop.campaign import Campaign
from tests.conftest import ROOT, small_spec

pytest.importorskip("jinja2", reason='the dashboard extra is not installed: pip install "closedloop[dashboard]"')

from fastapi.testclient import TestClient  # noqa: E402

from orchestrator.interfaces.dashboard import create_app  # noqa: E402

LOCAL = "http://127.0.0.1:8765"


def gated_campaign(db):
    """A ledger with one campaign stopped at its first human approval gate (nothing dispatched yet)."""
    spec = small_spec(lab_experiments=4, approval__policy="interrupt", planner__control_share=0.0)
    with Campaign.start(spec, db=db, campaign_id="gated") as campaign:
        campaign.run()
        assert campaign.pending_interrupt is not None
    return db


@pytest.fixture(scope="module")
def gated_db(tmp_path_factory):
    return gated_campaign(tmp_path_factory.mktemp("dash") / "gated.db")


@pytest.fixture
def client(gated_db):
    with TestClient(create_app(gated_db, poll_s=0.05), base_url=LOCAL) as test_client:
        yield test_client


def test_pages_are_rendered_on_the_server(client):
    listing = client.get("/")
    assert listing.status_code == 200
    assert 'data-campaign="gated"' in listing.text and "/static/htmx.min.js" in listing.text
    page = client.get("/campaigns/gated")
    assert page.status_code == 200
    for panel in ("status", "approvals", "entry", "plots", "results", "llm_calls"):
        assert f'id="{panel}"' in page.text
    assert 'id="send-answer"' in page.text and 'name="choice:gated/' in page.text
    assert client.get("/static/htmx.min.js").status_code == 200  # vendored: nothing comes from a CDN
    assert "cdn" not in page.text.lower() and "https://" not in page.text


def test_unknown_campaigns_panels_and_plots_are_404(client):
    missing = client.get("/campaigns/ghost")
    assert missing.status_code == 404 and "'ghost' has no events" in missing.json()["detail"]
    assert "gated" in missing.json()["detail"]
    assert client.get("/campaigns/ghost/events").status_code == 404
    assert client.get("/campaigns/ghost/plots/funnel.png").status_code == 404
    assert client.get("/campaigns/gated/fragments/nope").status_code == 404
    assert client.get("/campaigns/gated/plots/nope.png").status_code == 404
    assert client.post("/campaigns/ghost/approve").status_code == 404


def test_plots_are_pngs(client):
    for name in ("funnel", "best_so_far", "gantt", "rewards"):
        response = client.get(f"/campaigns/gated/plots/{name}.png")
        assert response.status_code == 200 and response.headers["content-type"] == "image/png"
        assert response.content[:4] == b"\x89PNG"


def test_the_event_stream_sends_the_ledger_state(client, gated_db):
    ledger = Ledger.open(gated_db)
    n_events = ledger.n_events("gated")
    ledger.close()
    with client.stream("GET", "/campaigns/gated/events") as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        lines = []
        for line in stream.iter_lines():
            lines.append(line)
            if line.startswith("data:"):
                break
    assert "event: campaign" in lines
    assert f'"n_events": {n_events}' in lines[-1] or f'"n_events":{n_events}' in lines[-1]


def test_a_token_is_required_when_set(gated_db):
    with TestClient(create_app(gated_db, token="s3cret"), base_url=LOCAL) as anonymous:
        refused = anonymous.get("/")
        assert refused.status_code == 401 and "needs its token" in refused.text
        assert anonymous.get("/campaigns/gated", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert anonymous.post("/campaigns/gated/approve").status_code == 401  # nothing was answered
        assert anonymous.get("/", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        # a browser opens the page once with ?token=: a cookie, and the token leaves the address
        opened = anonymous.get("/campaigns/gated?token=s3cret", follow_redirects=False)
        assert opened.status_code == 303 and opened.headers["location"] == "/campaigns/gated"
        assert "httponly" in opened.headers["set-cookie"].lower()
        assert "samesite=strict" in opened.headers["set-cookie"].lower()
        assert anonymous.get("/campaigns/gated").status_code == 200  # the cookie now


def test_without_a_token_only_loopback_hosts_and_same_origin_posts(client):
    rebound = client.get("/", headers={"Host": "evil.example:8765"})
    assert rebound.status_code == 400 and "loopback" in rebound.text
    cross_site = client.post("/campaigns/gated/reject", headers={"Origin": "https://evil.example"})
    assert cross_site.status_code == 403


def test_an_answer_nobody_asked_for_is_refused_with_the_reason(client):
    # the campaign waits for an approval, not for a decision on failed jobs
    refused = client.post("/campaigns/gated/decide", data={"action": "retry"}, headers={"HX-Request": "true"})
    assert refused.status_code == 200 and 'class="error"' in refused.text
    assert "waits for an approval of a lab batch" in refused.text
    plain = client.post("/campaigns/gated/decide", data={"action": "retry"}, follow_redirects=False)
    assert plain.status_code == 409


def test_approve_in_the_page_records_the_approve_nodes_event(tmp_path):
    ledger = Ledger.open(gated_campaign(tmp_path / "approve.db"))
    requested = ledger.last_event("gated", "ApprovalRequested").payload
    app = create_app(ledger)
    with TestClient(app, base_url=LOCAL) as client:
        keys = requested["job_keys"]
        assert 'name="by"' in client.get("/campaigns/gated/fragments/approvals").text  # the page asks for a name
        n_events = ledger.n_events("gated")
        bad = client.post("/campaigns/gated/approve", data={"n_jobs": len(keys), "by": "x" * 65},
                          headers={"HX-Request": "true", "Origin": LOCAL})
        assert bad.status_code == 200 and 'class="error"' in bad.text and "at most 64" in bad.text
        assert ledger.n_events("gated") == n_events  # the bad name recorded nothing
        answered = client.post("/campaigns/gated/approve",
                               data={"job_key": keys[:-1], "n_jobs": len(keys), "by": "ada"},
                               headers={"HX-Request": "true", "Origin": LOCAL})
        assert answered.status_code == 200 and "answer recorded" in answered.text
        app.state.runs.get("gated").join(timeout_s=120)
    approved = ledger.events("gated", types=["Approved"])[0]
    ledger.close()
    assert approved.payload["job_keys"] == keys[:-1] and approved.payload["denied_keys"] == [keys[-1]]
    assert approved.payload["policy"] == "interrupt"
    assert approved.payload["approved_by"] == "human:ada" and approved.actor == "human:ada"


def test_imported_past_results_are_shown_apart_from_lab_experiments(tmp_path):
    import pandas as pd

    from orchestrator.loop.importing import HistoryFile
    from tests.conftest import BUCHWALD_SPEC

    past = tmp_path / "past.csv"
    pd.read_csv(BUCHWALD_SPEC.parent / "data" / "experiment_index.csv").iloc[:5].to_csv(past, index=False)
    spec = small_spec(BUCHWALD_SPEC, lab_experiments=4, approval__policy="interrupt", planner__control_share=0.0)
    with Campaign.start(spec, db=tmp_path / "warm.db", campaign_id="warm", history=HistoryFile(past)) as campaign:
        campaign.run()  # waits at the first approval: no lab experiment yet, 5 imported
    with TestClient(create_app(tmp_path / "warm.db"), base_url=LOCAL) as client:
        listing, page = client.get("/").text, client.get("/campaigns/warm").text
    assert '<td class="n-lab">0 <span class="imported">(+5 imported)</span></td>' in listing
    assert '<td id="n-lab">0 of 4, after 5 imported past results</td>' in page


def _closedloop(*args: str, env: dict | None = None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "orchestrator.interfaces.cli_main", *args], capture_output=True, text=True,
                          env=env or {**os.environ, "PYTHONPATH": str(ROOT)}, cwd=cwd, timeout=120,
                          stdin=subprocess.DEVNULL, check=False)


def test_another_interface_without_a_token_is_one_error_line(gated_db):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "60"}
    env.pop("CLOSEDLOOP_DASHBOARD_TOKEN", None)
    result = _closedloop("dashboard", "--db", str(gated_db), "--host", "0.0.0.0", "--port", "0", env=env)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: --host 0.0.0.0 is reachable from other machines and no token is set")
    assert "--token" in line


def test_without_the_dashboard_extra_the_command_is_one_error_line(gated_db, tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['jinja2'] = None\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]), "COLUMNS": "60"}
    result = _closedloop("dashboard", "--db", str(gated_db), "--port", "0", env=env, cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: closedloop dashboard needs jinja2, which is not installed")
    assert line.endswith('install it with pip install "closedloop[dashboard]"')


def test_the_model_panel_shows_what_the_model_chose_beside_a_coin(gated_db, tmp_path):
    import shutil

    from vocabulary.events import Proposed

    db = tmp_path / "model.db"
    shutil.copy(gated_db, db)
    store = Ledger.open(db)
    candidate = {"type": "molecule", "smiles": "C"}
    store.append_many("gated", [
        (Proposed(iteration=9, arm="llm", candidate_id="m1", candidate=candidate, is_bo_pick=False, shown_position=0,
                  n_shown=2, n_shown_bo_picks=1), "p:llm:m1"),
        (Proposed(iteration=9, arm="llm", candidate_id="m2", candidate=candidate, is_bo_pick=True, is_anchor=True),
         "p:llm:m2"),
    ])
    store.close()
    with TestClient(create_app(db, poll_s=0.05), base_url=LOCAL) as test_client:
        panel = test_client.get("/campaigns/gated/fragments/llm_calls")
    assert panel.status_code == 200
    text = panel.text
    assert "What the model chose" in text and "(llm)" in text
    assert "picks that were the first row shown</th><td>1.0" in text, "the model took the first row"
    assert "a coin in the same slots</th><td>0.5" in text and "bo&#39;s anchors</th><td>1" in text
