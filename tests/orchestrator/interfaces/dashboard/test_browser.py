"""``closedloop dashboard`` in a real headless browser: Debian's chromium driven by playwright.

A campaign with a human approval gate runs in its own ``closedloop run`` process and stops at the gate; the
dashboard, another process, is opened in chromium; the page is clicked (Approve), and the ledger is the judge: the
approval is the approve node's own ``Approved`` event. The campaign then runs on in the dashboard's process to the
next gate, and a ``closedloop run --resume --approve all`` in a third process answers that one: its results must
reach the open page within seconds, with no reload. Screenshots of each page go to ``tests/artifacts/dashboard/``
(gitignored).

playwright never downloads a browser here: it launches ``/usr/bin/chromium`` (``.ci/run`` installs it).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.ledger import Ledger
from orchestrator.loop.lease import CampaignLease
from tests.conftest import BUCHWALD_SPEC, ROOT

CHROMIUM = Path(os.environ.get("CLOSEDLOOP_TEST_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = ROOT / "tests" / "artifacts" / "dashboard"

pytest.importorskip("playwright.sync_api", reason='playwright is not installed: pip install "closedloop[dev]"')
pytest.importorskip("jinja2", reason='the dashboard extra is not installed: pip install "closedloop[dashboard]"')
if not CHROMIUM.exists():
    pytest.skip(f"no chromium at {CHROMIUM}: apt-get install chromium (.ci/run installs it), or point "
                "CLOSEDLOOP_TEST_CHROMIUM at one", allow_module_level=True)

from playwright.sync_api import expect, sync_playwright  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


def gated_spec(tmp_path: Path) -> Path:
    """The Buchwald–Hartwig spec with a human approval gate at every lab batch (as tests/orchestrator/interfaces/test_mcp.py)."""
    text = BUCHWALD_SPEC.read_text().replace('pool = "data/', f'pool = "{BUCHWALD_SPEC.parent}/data/')
    spec = tmp_path / "gated.toml"
    spec.write_text(text + '\n[approval]\npolicy = "interrupt"\n')
    return spec


def closedloop(*args: str, cwd: Path, exit_codes: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
    """``closedloop ARGS``, which must exit with one of ``exit_codes`` (3: waiting for approval, 4: for results)."""
    result = subprocess.run([sys.executable, "-m", "orchestrator.interfaces.cli_main", *args], cwd=cwd, env=ENV, timeout=300,
                            capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)
    assert result.returncode in exit_codes, result.stderr
    return result


def start_dashboard(db: Path) -> tuple[subprocess.Popen, str]:
    """``closedloop dashboard --db DB --port 0`` in a subprocess, and the URL it announces."""
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.interfaces.cli_main", "dashboard", "--db", str(db), "--port", "0"],
        cwd=db.parent, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    line = process.stdout.readline()
    match = re.search(r"on (http://127\.0\.0\.1:\d+)", line)
    if match is None:
        process.kill()
        raise AssertionError(f"the dashboard did not start: {line!r} {process.stderr.read()}")
    return process, match.group(1)


def ledger_events(db: Path, campaign_id: str, event_type: str) -> list[dict]:
    ledger = Ledger.open(db)
    try:
        return [e.payload for e in ledger.events(campaign_id, types=[event_type])]
    finally:
        ledger.close()


def wait_for(predicate, *, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"no {what} after {timeout_s} s"
        time.sleep(0.2)
    return value


def test_the_dashboard_shows_a_running_campaign_and_approves_from_the_page(tmp_path):
    db = tmp_path / "dash.db"
    spec = gated_spec(tmp_path)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    # another process runs the campaign up to its first approval gate, and lets go of it there
    waiting = closedloop("run", str(spec), "--db", str(db), "--planner", "random", "--control-share", "0",
                         "--lab-budget", "6", "--campaign-id", "watched", "--json", cwd=tmp_path, exit_codes=(3,))
    assert '"status": "waiting_for_approval"' in waiting.stdout
    [requested] = ledger_events(db, "watched", "ApprovalRequested")
    dashboard, url = start_dashboard(db)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 900})

            # the campaign list names every campaign in the first response, rendered on the server
            page.goto(url + "/")
            expect(page.locator("#campaigns tr[data-campaign='watched']")).to_be_visible()
            expect(page.locator("#live.on")).to_be_visible(timeout=10_000)  # the event stream is open
            page.screenshot(path=ARTIFACTS / "campaigns.png", full_page=True)

            page.click("text=watched")
            page.wait_for_url(url + "/campaigns/watched")
            approval = page.locator("form.approval")
            for key in requested["job_keys"]:
                expect(approval.locator(f"tr.job[data-job='{key}']")).to_be_visible()
            expect(page.locator("#campaign-status")).to_have_text("waiting for approval")
            expect(page.locator("#results")).to_contain_text("no lab results yet")
            for name in ("funnel", "best_so_far", "gantt", "rewards"):
                expect(page.locator(f"#plot-{name}")).to_have_js_property("complete", True)
            page.screenshot(path=ARTIFACTS / "campaign_waiting_for_approval.png", full_page=True)

            # Approve in the page: the approve node records the answer, as `--approve all` and MCP would
            # (the page's "answer recorded" note is transient: the next live refresh of the panel replaces it, so the
            # ledger is what the test waits for)
            page.click("#choose-approve")
            page.click("#send-answer")
            [approved] = wait_for(lambda: ledger_events(db, "watched", "Approved"), timeout_s=180, what="Approved")
            assert approved["job_keys"] == requested["job_keys"] and approved["denied_keys"] == []
            assert approved["approved_by"] == "human" and approved["policy"] == "interrupt"

            # the dashboard's run dispatches the batch: its first result appears live, then the next gate
            expect(page.locator("#results tr.result").first).to_be_visible(timeout=120_000)
            wait_for(lambda: len(ledger_events(db, "watched", "ApprovalRequested")) > 1, timeout_s=120,
                     what="second approval request")
            wait_for(lambda: is_free(db, "watched"), timeout_s=60, what="the dashboard's run letting go")
            second = ledger_events(db, "watched", "ApprovalRequested")[-1]
            expect(page.locator(f"form.approval tr.job[data-job='{second['job_keys'][0]}']")).to_be_visible(
                timeout=10_000)

            # a third process answers the second gate: its new results reach the open page within seconds
            seen = {o["job_key"] for o in ledger_events(db, "watched", "Observed")}
            closedloop("run", "--resume", "watched", "--db", str(db), "--approve", "all", "--json", cwd=tmp_path,
                       exit_codes=(0, 3))
            observed = ledger_events(db, "watched", "Observed")
            new = [o["job_key"] for o in observed if o["job_key"] not in seen]
            assert new, "the resumed campaign measured nothing new"
            expect(page.locator(f"#results tr.result[data-job='{new[-1]}']")).to_be_visible(timeout=10_000)
            expect(page.locator("#results tr.result")).to_have_count(len(observed), timeout=10_000)
            expect(page.locator("#n-events")).to_have_text(str(_n_events(db, "watched")), timeout=10_000)
            latest = ledger_events(db, "watched", "ApprovalRequested")[-1]
            if not ledger_events(db, "watched", "CampaignStopped"):  # the page asks about the gate it waits at now
                for key in latest["job_keys"]:
                    expect(page.locator(f"form.approval tr.job[data-job='{key}']")).to_be_visible(timeout=10_000)
            page.wait_for_timeout(5_000)  # the plots follow at most every 4 s
            for name in ("funnel", "best_so_far", "gantt", "rewards"):
                expect(page.locator(f"#plot-{name}")).to_have_js_property("complete", True)
            page.screenshot(path=ARTIFACTS / "campaign.png", full_page=True)
            browser.close()
    finally:
        dashboard.terminate()
        try:
            dashboard.wait(timeout=30)
        except subprocess.TimeoutExpired:
            dashboard.kill()
            raise
    print(f"dashboard screenshots in {ARTIFACTS}")
    assert dashboard.returncode in (0, -15), dashboard.stderr.read()


def is_free(db: Path, campaign_id: str) -> bool:
    """Whether no process holds the campaign's lease (the dashboard's run let go of it at the gate)."""
    ledger = Ledger.open(db)
    try:
        lease = CampaignLease(ledger, campaign_id)
        if not lease.try_acquire():
            return False
        lease.release()
        return True
    finally:
        ledger.close()


def _n_events(db: Path, campaign_id: str) -> int:
    ledger = Ledger.open(db)
    try:
        return ledger.n_events(campaign_id)
    finally:
        ledger.close()

