"""Several orchestrator workers share the campaigns of one ledger, against the HTTP remote lab, and one of them is
killed on the way: every job reaches the lab once, every result is recorded, and the ledger verifies.

Workers are real subprocesses (``python -m orchestrator.scale.workers``) on SQLite (file locks) and on PostgreSQL (advisory
locks). The lab is a real HTTP server whose driver counts the runs it is actually asked to start.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from orchestrator.ledger import Ledger, verify
from orchestrator.loop.campaign import Campaign
from orchestrator.scale.workers import CampaignLease, run_worker
from tests.conftest import small_spec

ROOT = Path(__file__).resolve().parents[3]
TOKEN = "worker-test-token"
CAMPAIGNS = ("shared-a", "shared-b")
BUDGET = 6


@pytest.fixture(params=["sqlite", "postgres"])
def shared_db(request, tmp_path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "shared.db")
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def counting_lab(tmp_path):
    """The example campaign's simulated lab behind the HTTP server, counting the runs its driver starts per key."""
    from instruments import TableOracle
    from instruments.server import ServerThread, create_app
    from instruments.simlab import SimLabDriver
    from orchestrator.space.pool import load_pool

    spec = small_spec()
    pool = load_pool(spec)
    runs: Counter[str] = Counter()

    class CountingSimLab(SimLabDriver):
        async def submit(self, job):
            runs[job.job_key] += 1
            return await super().submit(job)

    driver = CountingSimLab(oracle=TableOracle(pool.column(spec.lab.oracle_column), property=spec.objective.property),
                            noise_sd=spec.lab.noise_sd, seed=spec.campaign.seed)
    app = create_app(driver, token=TOKEN, journal_path=tmp_path / "lab.journal", seconds_per_sim_hour=0.05)
    with ServerThread(app) as server:
        yield server.url, runs


def _worker(db: str, name: str) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CLOSEDLOOP_LAB_TOKEN": TOKEN, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "orchestrator.scale.workers", "--db", db, "--worker-id", name,
                             "--turn-steps", "4", "--poll-s", "0.05"],
                            env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


@pytest.mark.slow
def test_workers_share_campaigns_and_survive_a_killed_worker(shared_db, counting_lab, monkeypatch):
    lab_url, runs = counting_lab
    monkeypatch.setenv("CLOSEDLOOP_LAB_TOKEN", TOKEN)
    spec = small_spec(lab_experiments=BUDGET).with_overrides(lab_url=lab_url)
    for campaign_id in CAMPAIGNS:
        Campaign.start(spec, db=shared_db, campaign_id=campaign_id).close()

    doomed = _worker(shared_db, "doomed")
    workers = {name: _worker(shared_db, name) for name in ("w1", "w2")}
    ledger = Ledger.open(shared_db)
    try:
        # kill the first worker once the campaigns are under way (it may hold a lease, mid-node)
        deadline = time.monotonic() + 300
        while doomed.poll() is None and time.monotonic() < deadline:
            if sum(len(ledger.events(c, types=["Dispatched"])) for c in CAMPAIGNS) >= 3:
                break
            time.sleep(0.05)
        assert doomed.poll() is None, doomed.stderr.read()[-3000:]
        os.killpg(doomed.pid, signal.SIGKILL)
        doomed.wait(30)

        reports = {}
        for name, process in workers.items():
            out, err = process.communicate(timeout=900)
            assert process.returncode == 0, err[-3000:]
            reports[name] = json.loads(out.strip().splitlines()[-1])

        for campaign_id in CAMPAIGNS:
            assert ledger.campaign(campaign_id).status == "stopped"
            assert verify(ledger, campaign_id).is_identical
            dispatched = [e.payload["job_key"] for e in ledger.events(campaign_id, types=["Dispatched"])]
            observed = [e.payload["job_key"] for e in ledger.events(campaign_id, types=["Observed"])]
            assert len(dispatched) == len(set(dispatched)) == BUDGET, "no job key dispatched twice"
            assert sorted(observed) == sorted(dispatched), "every result is in the ledger"
        all_dispatched = {e.payload["job_key"] for c in CAMPAIGNS for e in ledger.events(c, types=["Dispatched"])}
        assert set(runs) == all_dispatched, "the lab ran exactly the jobs the ledger dispatched"
        assert max(runs.values()) == 1, f"a job ran twice in the lab: {runs}"
        # the surviving workers shared the work
        assert all(report["n_turns"] >= 1 for report in reports.values()), reports
        assert {c for r in reports.values() for c in r["campaigns_finished"]} == set(CAMPAIGNS), reports
    finally:
        ledger.close()
        for process in [doomed, *workers.values()]:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)


def test_a_lease_is_exclusive_and_dies_with_its_holder(shared_db):
    """Two leases on one campaign exclude each other; a lease held by a killed process is free again."""
    ledger = Ledger.open(shared_db)
    try:
        first, second = CampaignLease(ledger, "c"), CampaignLease(ledger, "c")
        assert first.try_acquire() and not second.try_acquire()
        assert CampaignLease(ledger, "other").try_acquire()
        first.release()
        assert second.try_acquire()
        second.release()

        holder = subprocess.Popen(
            [sys.executable, "-c",
             "import sys, time\nfrom orchestrator.ledger import Ledger\nfrom orchestrator.scale.workers import CampaignLease\n"
             "lease = CampaignLease(Ledger.open(sys.argv[1]), 'c')\nassert lease.try_acquire()\nprint('held', flush=True)\n"
             "time.sleep(600)", shared_db],
            env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, stdout=subprocess.PIPE, text=True,
            start_new_session=True)
        try:
            assert holder.stdout.readline().strip() == "held"
            assert not CampaignLease(ledger, "c").try_acquire()
        finally:
            os.killpg(holder.pid, signal.SIGKILL)
            holder.wait(30)
        lease = CampaignLease(ledger, "c")
        deadline = time.monotonic() + 30
        while not lease.try_acquire():  # the server notices the dead connection within moments
            assert time.monotonic() < deadline, "the killed holder's lease was never released"
            time.sleep(0.1)
        lease.release()
    finally:
        ledger.close()


def test_a_worker_skips_campaigns_waiting_for_a_human(tmp_path):
    spec = small_spec(lab_experiments=4, approval__policy="interrupt")
    db = tmp_path / "waiting.db"
    Campaign.start(spec, db=db, campaign_id="ask").close()
    report = run_worker(db, worker_id="solo", turn_steps=50)
    assert report.campaigns_waiting == ["ask"] and report.campaigns_finished == []
    with Campaign.resume("ask", db=db) as campaign:
        assert campaign.pending_interrupt is not None
