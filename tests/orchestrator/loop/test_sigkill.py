"""A campaign killed with SIGKILL again and again, resumed each time with ``closedloop run --resume``, ends exactly as
an uninterrupted run: the ledger verifies, every lab job key was dispatched once, every result is recorded.

Each run is the real CLI in a subprocess. Most kills are aimed: the child (this file run as a script) wraps
``Ledger.append_many`` and SIGKILLs itself just before or just after the n-th append of a ``Dispatched`` or
``Observed`` event, that is in the middle of dispatching or of ingesting results, the windows where a crash can lose or
duplicate lab work. The others come from outside, at a random number of events into the run. Runs against SQLite and
against PostgreSQL (see ``tests.postgres``).

Every run, the uninterrupted reference included, executes a copy of the source tree taken when the test starts. A
resume must meet the code that wrote the ledger: if the code changes between a crash and its resume (another session
editing the working tree while this test runs for minutes), a node may compute other payloads under the same keys,
and the ledger rightly refuses them with a ``LedgerConflict``.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.ledger import (  # at import: pytest's doctest collection rebinds ledger.verify
    Ledger,
    verify,
)

ROOT = Path(__file__).resolve().parents[3]
N_KILLS = 12
BUDGET = 16
# (when, event type) of the aimed kills, in turn; None is a kill from outside at a random point
KILL_POINTS = [("after", "Dispatched"), ("before", "Observed"), None, ("before", "Dispatched"), ("after", "Observed")]


# ------------------------------------------------------------------------------------------------- the child
def _child(kill_spec: str, argv: list[str]) -> None:
    """Run the CLI, dying by SIGKILL at ``before|after:EventType:n`` (or never, for ``none``)."""
    if kill_spec != "none":
        when, event_type, nth = kill_spec.split(":")
        from orchestrator.ledger import Ledger

        original, seen = Ledger.append_many, {"n": 0}

        def append_many(self, campaign_id, items, *, actor="orchestrator"):
            hits = sum(1 for item in items if item[0].type == event_type)
            if when == "before" and hits and seen["n"] + hits >= int(nth):
                os.kill(os.getpid(), signal.SIGKILL)
            out = original(self, campaign_id, items, actor=actor)
            seen["n"] += hits
            if when == "after" and hits and seen["n"] >= int(nth):
                os.kill(os.getpid(), signal.SIGKILL)
            return out

        Ledger.append_many = append_many
    from orchestrator.interfaces.cli import app

    app(argv, prog_name="closedloop")


# ------------------------------------------------------------------------------------------------ the parent
def _source_snapshot(directory: Path) -> Path:
    """A frozen copy of the packages and test helpers the subprocesses import."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in ("vocabulary", "orchestrator", "simulators", "instruments", "rewards"):
        shutil.copytree(ROOT / package, directory / package, ignore=ignore)
    (directory / "tests" / "orchestrator").mkdir(parents=True)
    for name in ("__init__.py", "conftest.py", "postgres.py"):
        shutil.copy2(ROOT / "tests" / name, directory / "tests" / name)
    shutil.copy2(Path(__file__), directory / "tests" / "orchestrator" / "test_sigkill.py")
    return directory


class _Watch:
    """Reads the crash ledger's event count and last type without the ledger code (and without write locks)."""

    def __init__(self, db: str):
        self.db = db
        self._pg = None

    def last(self) -> tuple[int, str | None]:
        query = "SELECT seq, type FROM event WHERE campaign_id = 'killed' ORDER BY seq DESC LIMIT 1"
        try:
            if "://" in self.db:
                if self._pg is None:
                    import psycopg

                    self._pg = psycopg.connect(self.db, autocommit=True)
                row = self._pg.execute(query).fetchone()
            else:
                if not Path(self.db).exists():
                    return 0, None
                with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=5) as conn:
                    row = conn.execute(query).fetchone()
        except Exception:  # the table may not exist yet
            return 0, None
        return (row[0], row[1]) if row else (0, None)

    def close(self):
        if self._pg is not None:
            self._pg.close()


def _comparable(ledger, campaign_id):
    return [(e.seq, e.type, e.payload, e.idempotency_key) for e in ledger.events(campaign_id)]


@pytest.fixture(params=["sqlite", "postgres"])
def crash_db(request, tmp_path):
    if request.param == "sqlite":
        return str(tmp_path / "crash.db")
    return request.getfixturevalue("postgres_url")


@pytest.mark.slow
def test_sigkill_at_random_points_then_resume(tmp_path, crash_db, request):
    from tests.conftest import FREESOLV_SPEC

    # the example campaign with fast arms, its cheap rungs and no early stop, so it runs the whole budget
    spec_file = tmp_path / "spec.toml"
    spec_file.write_text(FREESOLV_SPEC.read_text().replace("on_target = true", "on_target = false")
                         .replace('main = "llm"', 'main = "random"')
                         .replace('simulator = "xtb"', 'simulator = "rdkit_descriptors"')
                         .replace('proxy = "dg_solv_kcal_mol"', 'proxy = "logp"')
                         .replace('pool = "data/', f'pool = "{FREESOLV_SPEC.parent}/data/'))
    code = _source_snapshot(tmp_path / "code")
    child = [sys.executable, str(code / "tests" / "orchestrator" / "test_sigkill.py")]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(code)}
    start = [str(spec_file), "--lab-budget", str(BUDGET), "--campaign-id", "killed"]
    reference = subprocess.run([*child, "none", "run", "--db", str(tmp_path / "ref.db"), "--json", *start], env=env,
                               cwd=code, capture_output=True, text=True, timeout=900)
    assert reference.returncode == 0, reference.stderr[-3000:]
    ledger = Ledger.open(tmp_path / "ref.db")
    expected = _comparable(ledger, "killed")
    ledger.close()

    cli = ["run", "--db", crash_db, "--json"]
    first = cli + start
    watch_url = crash_db.replace("postgresql+psycopg://", "postgresql://")
    watch = _Watch(watch_url)
    rng = random.Random(7)
    kills: list[tuple[str, int, str | None]] = []
    try:
        for n in range(N_KILLS):
            before, _ = watch.last()
            point = KILL_POINTS[n % len(KILL_POINTS)]
            spec_arg = "none" if point is None else f"{point[0]}:{point[1]}:{rng.randint(1, 3)}"
            argv = first if before == 0 else cli + ["--resume", "killed"]
            process = subprocess.Popen([*child, spec_arg, *argv], env=env, cwd=code,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
            target = before + rng.randint(3, 60)
            deadline = time.monotonic() + 300
            while process.poll() is None and time.monotonic() < deadline:
                if point is None and watch.last()[0] >= target:
                    os.killpg(process.pid, signal.SIGKILL)
                    break
                time.sleep(0.005)
            process.wait(60)
            stderr = process.stderr.read().decode()
            if process.returncode == 0:
                break  # the campaign finished before this kill
            assert process.returncode == -signal.SIGKILL, stderr[-3000:]
            after, last_type = watch.last()
            kills.append((spec_arg, after, last_type))
            print("kill", n, spec_arg, after, last_type)
    finally:
        watch.close()
    final = subprocess.run([*child, "none", *cli, "--resume", "killed"], env=env, cwd=code,
                           capture_output=True, text=True, timeout=600)
    assert final.returncode == 0, final.stderr[-3000:]
    verified = subprocess.run([sys.executable, "-m", "orchestrator.interfaces.cli", "ledger", "verify", "killed", "--db", crash_db],
                              env=env, cwd=code, capture_output=True, text=True, timeout=300)
    assert verified.returncode == 0, verified.stdout + verified.stderr

    ledger = Ledger.open(crash_db)
    try:
        assert verify(ledger, "killed").is_identical
        dispatched = [e.payload["job_key"] for e in ledger.events("killed", types=["Dispatched"])]
        observed = [e.payload["job_key"] for e in ledger.events("killed", types=["Observed"])]
        assert len(dispatched) == len(set(dispatched)) == BUDGET, "every job key dispatched exactly once"
        assert sorted(observed) == sorted(dispatched), "every result is in the ledger"
        assert _comparable(ledger, "killed") == expected
    finally:
        ledger.close()
    assert len(kills) >= 10, kills
    aimed = {spec.split(":")[0] + ":" + spec.split(":")[1] for spec, _, _ in kills if spec != "none"}
    assert {"after:Dispatched", "before:Dispatched", "before:Observed", "after:Observed"} <= aimed, kills
    assert any(spec == "none" for spec, _, _ in kills), kills


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2:])
