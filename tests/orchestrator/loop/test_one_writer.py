"""One writer per campaign (issue 18, case 8): a ``run --resume`` of a campaign that another process is running exits
at once with one ``error:`` line naming the campaign and its holder (host, pid, since when) and writes nothing; the
running campaign ends with the ledger of an uninterrupted run. A lease left by a process that died is taken over,
with a log line saying so.

The running campaign is the real CLI in a subprocess (this file run as a script), slowed down by a short sleep
before every ledger append so that it is still running when the second process tries.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.ledger import Ledger, verify
from orchestrator.loop.campaign import Campaign
from orchestrator.loop.lease import CampaignBusy, CampaignLease
from tests.conftest import FREESOLV_SPEC, small_spec

ROOT = Path(__file__).resolve().parents[3]
BUDGET = 6


def _child(delay_s: str, argv: list[str]) -> None:
    """Run the CLI, sleeping ``delay_s`` seconds before every ledger append."""
    from orchestrator.ledger import Ledger as ChildLedger

    original = ChildLedger.append_many

    def append_many(self, *args, **kwargs):
        time.sleep(float(delay_s))
        return original(self, *args, **kwargs)

    ChildLedger.append_many = append_many
    from orchestrator.interfaces.cli import app

    app(argv, prog_name="closedloop")


@pytest.fixture
def fast_spec_file(tmp_path) -> Path:
    """The example campaign with the random arm, its cheap rungs and no early stop, so it runs the whole budget."""
    path = tmp_path / "spec.toml"
    path.write_text(FREESOLV_SPEC.read_text().replace("on_target = true", "on_target = false")
                    .replace('main = "llm"', 'main = "random"')
                    .replace('simulator = "xtb"', 'simulator = "rdkit_descriptors"')
                    .replace('proxy = "dg_solv_kcal_mol"', 'proxy = "logp"')
                    .replace('pool = "data/', f'pool = "{FREESOLV_SPEC.parent}/data/'))
    return path


def _cli(delay_s: float, *argv) -> list[str]:
    return [sys.executable, str(Path(__file__)), str(delay_s), *map(str, argv)]


def _comparable(db: Path, campaign_id: str):
    ledger = Ledger.open(db)
    try:
        return [(e.seq, e.type, e.payload, e.idempotency_key) for e in ledger.events(campaign_id)]
    finally:
        ledger.close()


def _n_events(db: Path, campaign_id: str) -> int:
    ledger = Ledger.open(db)
    try:
        return ledger.n_events(campaign_id)
    finally:
        ledger.close()


def test_a_second_resume_of_a_running_campaign_is_refused_and_writes_nothing(tmp_path, fast_spec_file):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    start = ["run", fast_spec_file, "--lab-budget", BUDGET, "--campaign-id", "busy", "--json"]
    reference = subprocess.run(_cli(0, *start, "--db", tmp_path / "ref.db"), env=env, cwd=ROOT,
                               capture_output=True, text=True, timeout=900)
    assert reference.returncode == 0, reference.stderr[-3000:]

    db = tmp_path / "busy.db"
    first = subprocess.Popen(_cli(0.3, *start, "--db", db), env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not db.exists() or _n_events(db, "busy") < 3:  # the first run holds the lease and is writing
            assert first.poll() is None and time.monotonic() < deadline, first.stderr.read().decode()[-3000:]
            time.sleep(0.2)
        second = subprocess.run(_cli(0, "run", "--resume", "busy", "--db", db, "--lab-budget", BUDGET + 4),
                                env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert first.poll() is None, "the first run was still running when the second one gave up"
    finally:
        first.wait(600)
    assert first.returncode == 0, first.stderr.read().decode()[-3000:]

    lines = [line for line in second.stderr.splitlines() if line.strip()]
    assert second.returncode == 2 and len(lines) == 1, second.stderr
    assert re.fullmatch(
        rf"error: campaign 'busy' is being run by another process \(host {re.escape(socket.gethostname())}, "
        rf"pid {first.pid}, since \d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ; lock file {re.escape(str(db))}\.lease\.busy\.\w+\); "
        r"wait for it to finish or stop it, then `closedloop run --resume busy`", lines[0]), lines[0]
    assert second.stdout == ""

    assert _comparable(db, "busy") == _comparable(tmp_path / "ref.db", "busy"), "no event from the second process"
    verified = subprocess.run([sys.executable, "-c", "from orchestrator.interfaces.cli import app; app()", "ledger", "verify",
                               "busy", "--db", str(db), "--json"], env=env, cwd=ROOT, capture_output=True, text=True,
                              timeout=300)
    assert verified.returncode == 0 and json.loads(verified.stdout)[0]["identical"], verified.stdout + verified.stderr
    # the lease went with the first run: the campaign can be resumed (it is finished, so nothing more happens)
    resumed = subprocess.run(_cli(0, "run", "--resume", "busy", "--db", db, "--json"), env=env, cwd=ROOT,
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _comparable(db, "busy") == _comparable(tmp_path / "ref.db", "busy")


@pytest.fixture
def paused(tmp_path) -> Path:
    """A campaign that ran a few steps and was closed, resumable."""
    db = tmp_path / "paused.db"
    with Campaign.start(small_spec(lab_experiments=4), db=db, campaign_id="p") as campaign:
        campaign.run(max_steps=3)
    return db


def test_an_open_campaign_keeps_others_out_until_it_closes(paused):
    first = Campaign.resume("p", db=paused)
    try:
        n_events = _n_events(paused, "p")
        with pytest.raises(CampaignBusy, match=rf"campaign 'p' is being run by another process \(host .*, pid "
                                                 rf"{os.getpid()}, since "):
            Campaign.resume("p", db=paused, lab_budget=9)  # would record LabBudgetChanged if it got the lease
        assert _n_events(paused, "p") == n_events
    finally:
        first.close()
    with Campaign.resume("p", db=paused) as again:
        assert again.ledger.n_events("p") == n_events


def test_a_lease_left_by_a_dead_process_is_taken_over(paused, caplog):
    ledger = Ledger.open(paused)
    holder_file = CampaignLease(ledger, "p").holder_path()
    ledger.close()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)
    holder_file.write_text(json.dumps({"host": socket.gethostname(), "pid": dead_pid, "since": "2025-01-01T00:00:00Z"}))

    with caplog.at_level(logging.WARNING, logger="orchestrator.loop.lease"), Campaign.resume("p", db=paused) as campaign:
        summary = campaign.run()
        holder = json.loads(holder_file.read_text())
        assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
    assert summary["status"] == "stopped"
    assert (f"campaign 'p': taking over the lease left by host {socket.gethostname()}, pid {dead_pid}, since "
            f"2025-01-01T00:00:00Z (that process is gone without releasing it)") in caplog.text
    assert holder_file.read_text() == "", "a clean release leaves no holder behind"
    ledger = Ledger.open(paused)
    try:
        assert verify(ledger, "p").is_identical
    finally:
        ledger.close()


def test_postgres_names_the_holder_of_a_lease(postgres_url):
    ledger = Ledger.open(postgres_url)
    try:
        first, second = CampaignLease(ledger, "pg"), CampaignLease(ledger, "pg")
        first.acquire()
        with pytest.raises(CampaignBusy, match=rf"campaign 'pg' is being run by another process \(host "
                                               rf"{re.escape(socket.gethostname()[:20])}.*, pid {os.getpid()}, since "):
            second.acquire()
        first.release()
        second.acquire()
        assert second.holder().pid == os.getpid()
        second.release()
        assert first.holder() is None
    finally:
        ledger.close()


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2:])
