"""A campaign against a real HTTP lab server that is killed mid-campaign and restarted: nothing lost, nothing twice."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from orchestrator.ledger import Ledger, verify
from orchestrator.loop.campaign import Campaign
from tests.conftest import FREESOLV_SPEC, small_spec


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_server(port: int, journal: Path, token: str | None = None) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if token:
        env["CLOSEDLOOP_LAB_TOKEN"] = token
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.interfaces.cli", "lab", "serve", "--spec", str(FREESOLV_SPEC), "--port", str(port),
         "--journal", str(journal), "--seconds-per-sim-hour", "0.3"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/openapi.json", timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            time.sleep(0.3)
    process.kill()
    raise RuntimeError(f"lab server did not start: {process.stdout.read()}")


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


@pytest.fixture
def lab_server(tmp_path):
    port, journal = _free_port(), tmp_path / "lab.journal"
    state = {"process": _start_server(port, journal), "port": port, "journal": journal}
    yield state
    _stop(state["process"])


def test_openapi_and_token(tmp_path):
    port = _free_port()
    process = _start_server(port, tmp_path / "j", token="s3cret")
    try:
        spec = httpx.get(f"http://127.0.0.1:{port}/openapi.json").json()
        assert any(path.startswith("/jobs") for path in spec["paths"])
        assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 401
        assert httpx.get(f"http://127.0.0.1:{port}/health", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    finally:
        _stop(process)


def test_campaign_survives_a_killed_lab_server(lab_server, tmp_path):
    url = f"http://127.0.0.1:{lab_server['port']}"
    spec = small_spec(lab_experiments=12).with_overrides(lab_url=url)
    db = tmp_path / "remote.db"
    outcome: dict = {}

    def run_campaign():
        try:
            with Campaign.start(spec, db=db, campaign_id="remote") as campaign:
                outcome["summary"] = campaign.run()
        except BaseException as exc:  # surfaced by the assertion below
            outcome["error"] = exc

    runner = threading.Thread(target=run_campaign)
    runner.start()
    watcher = Ledger.open(db) if db.exists() else None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        watcher = watcher or (Ledger.open(db) if db.exists() else None)
        if watcher:
            n_observed = len(watcher.events("remote", types=["Observed"]))
            n_in_flight = len(watcher.events("remote", types=["Dispatched"])) - n_observed
            if n_observed >= 2 and n_in_flight >= 2:
                break
        time.sleep(0.2)
    _stop(lab_server["process"])  # SIGKILL: no goodbye, in-flight jobs are only in the journal
    time.sleep(1.0)
    lab_server["process"] = _start_server(lab_server["port"], lab_server["journal"])
    runner.join(600)
    assert "error" not in outcome, outcome.get("error")
    summary = outcome["summary"]
    assert summary["status"] == "stopped" and summary["n_lab"] == 12

    ledger = Ledger.open(db)
    events = ledger.events("remote")
    dispatched = [e.payload["job_key"] for e in events if e.type == "Dispatched"]
    observed = [e.payload["job_key"] for e in events if e.type == "Observed"]
    assert len(dispatched) == len(set(dispatched)) == 12
    assert sorted(observed) == sorted(dispatched)
    assert verify(ledger, "remote").is_identical

    from instruments.journal import LabJournal

    journal = LabJournal(lab_server["journal"])
    for key in dispatched:
        assert journal.count_events("accepted", job_key=key) == 1, key
        assert journal.count_events("completed", job_key=key) <= 1, key
    assert journal.count_states().get("accepted", 0) == 0
    assert journal.count_events("resubmitted") >= 1, "the restarted server picked up jobs that were in flight"


def test_the_lab_token_never_reaches_the_ledger_or_the_logs(tmp_path, monkeypatch, caplog):
    import logging

    secret = "tok-PLANTED-5ecr3t-0000"
    port = _free_port()
    process = _start_server(port, tmp_path / "j", token=secret)
    monkeypatch.setenv("CLOSEDLOOP_LAB_TOKEN", secret)
    caplog.set_level(logging.DEBUG)
    try:
        spec = small_spec(lab_experiments=4).with_overrides(lab_url=f"http://127.0.0.1:{port}")
        with Campaign.start(spec, db=tmp_path / "s.db", campaign_id="secret") as campaign:
            assert campaign.run()["n_lab"] == 4
    finally:
        _stop(process)
    for path in tmp_path.glob("s.db*"):
        assert secret.encode() not in path.read_bytes(), path
    assert secret not in caplog.text
