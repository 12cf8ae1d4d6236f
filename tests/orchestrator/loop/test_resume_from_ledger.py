"""A campaign resumes from its ledger alone: without its checkpoint file (only the database copied, or the ledger
moved by ``ledger export`` / ``ledger import``), or with a checkpoint older than the ledger (what a power cut leaves,
or a kill between the ledger's commit and the checkpoint's write), and still ends with the ledger of an
uninterrupted run (``orchestrator.loop.position``).

The campaign surveys a proxy rung, so the screen reads survey values and probes: the screen's re-run after its own
commit used to count the survey reads as this round's probes and probe again (a ``LedgerConflict``).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.ledger import Ledger, verify
from orchestrator.loop.campaign import Campaign
from tests.conftest import small_spec

ROOT = Path(__file__).resolve().parents[3]


def ladder_spec(lab_experiments: int = 8):
    """The example campaign with fast rungs and a survey of its proxy rung (rdkit logP in place of xtb)."""
    from orchestrator.spec import validate_spec

    data = small_spec(lab_experiments=lab_experiments).model_dump()
    data["screening"]["survey_share"] = 0.5
    for rung in data["ladder"]:
        if rung["simulator"] == "xtb":
            rung.update(simulator="rdkit_descriptors", proxy="logp", parameters={})
    return validate_spec(data)


def _comparable(ledger, campaign_id):
    return [(e.seq, e.type, e.payload, e.idempotency_key) for e in ledger.events(campaign_id)]


def _checkpoints(db: Path) -> list[Path]:
    return [db.with_name(db.name + ".checkpoints.sqlite" + suffix) for suffix in ("", "-wal", "-shm")]


def _drop_checkpoints(db: Path) -> None:
    for path in _checkpoints(db):
        path.unlink(missing_ok=True)


def _keep_checkpoints(db: Path, where: Path) -> None:
    where.mkdir(exist_ok=True)
    for path in _checkpoints(db):
        if path.exists():
            shutil.copy2(path, where / path.name)


def _restore_checkpoints(db: Path, where: Path) -> None:
    _drop_checkpoints(db)
    for path in where.iterdir():
        shutil.copy2(path, db.with_name(path.name))


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    spec = ladder_spec()
    with Campaign.start(spec, db=tmp_path_factory.mktemp("ref") / "ref.db", campaign_id="same") as campaign:
        campaign.run()
        return spec, _comparable(campaign.ledger, "same")


def _finish(db, expected):
    with Campaign.resume("same", db=db) as campaign:
        assert campaign.run()["status"] == "stopped"
        assert _comparable(campaign.ledger, "same") == expected
        assert verify(campaign.ledger, "same").is_identical


def test_resume_without_its_checkpoint_file(reference, tmp_path):
    """Stopped at many points (inside the survey's iteration, mid-iteration, while draining), its checkpoint file
    deleted each time: every resume rebuilds the graph's position from the ledger."""
    spec, expected = reference
    db = tmp_path / "copied.db"
    with Campaign.start(spec, db=db, campaign_id="same") as campaign:
        campaign.run(max_steps=3)
    for n_steps in [1, 2, 4, 5, 3, 7, 6, 9, 2, 11, 8, 13]:
        _drop_checkpoints(db)
        with Campaign.resume("same", db=db) as campaign:
            campaign.run(max_steps=n_steps)
            if campaign.is_finished:
                break
    _drop_checkpoints(db)
    _finish(db, expected)


def test_resume_with_a_checkpoint_behind_the_ledger(reference, tmp_path):
    """The checkpoint file is put back as it was some steps earlier (a power cut loses the newest checkpoints)."""
    spec, expected = reference
    db = tmp_path / "cut.db"
    with Campaign.start(spec, db=db, campaign_id="same") as campaign:
        campaign.run(max_steps=4)
    for n_steps in [6, 9, 5, 12]:
        _keep_checkpoints(db, tmp_path / "older")
        with Campaign.resume("same", db=db) as campaign:
            campaign.run(max_steps=n_steps)
            if campaign.is_finished:
                break
        _restore_checkpoints(db, tmp_path / "older")
    _finish(db, expected)


class SimulatedCrash(BaseException):
    """Raised right after a commit, like a kill: not an Exception, so nothing on the way catches it."""


@pytest.mark.parametrize("nth", [3, 8, 15])
def test_crash_after_a_commit_with_an_older_checkpoint(reference, tmp_path, monkeypatch, nth):
    """The process dies right after the n-th commit of a run, before LangGraph writes the checkpoint, and the
    checkpoint file is the one from before that run: the ledger is several nodes ahead of it."""
    spec, expected = reference
    db = tmp_path / "killed.db"
    with Campaign.start(spec, db=db, campaign_id="same") as campaign:
        campaign.run(max_steps=5)
    _keep_checkpoints(db, tmp_path / "older")
    original, seen = Ledger.append_many, {"n": 0}

    def crashing_append_many(self, campaign_id, items, **kwargs):
        out = original(self, campaign_id, items, **kwargs)
        if items:
            seen["n"] += 1
            if seen["n"] == nth:
                raise SimulatedCrash(f"killed after commit #{nth}")
        return out

    monkeypatch.setattr(Ledger, "append_many", crashing_append_many)
    with pytest.raises(SimulatedCrash):
        with Campaign.resume("same", db=db) as campaign:
            campaign.run()
    monkeypatch.setattr(Ledger, "append_many", original)
    _restore_checkpoints(db, tmp_path / "older")
    _finish(db, expected)


def test_resume_after_export_and_import_into_a_new_ledger(reference, tmp_path):
    """``ledger export`` then ``ledger import`` into another database: no checkpoint travels with the ledger."""
    from orchestrator.ledger.jsonl import export_jsonl, import_jsonl

    spec, expected = reference
    db = tmp_path / "origin.db"
    with Campaign.start(spec, db=db, campaign_id="same") as campaign:
        campaign.run(max_steps=17)
        export_jsonl(campaign.ledger, "same", tmp_path / "same.jsonl")
    moved = tmp_path / "elsewhere" / "moved.db"
    moved.parent.mkdir()
    ledger = Ledger.open(moved)
    try:
        import_jsonl(tmp_path / "same.jsonl", ledger)
    finally:
        ledger.close()
    _finish(moved, expected)  # the new database has no LangGraph checkpoint of the campaign


# ------------------------------------------------------------------------------------------ a real SIGKILL
@pytest.mark.slow
def test_sigkill_after_a_commit_then_resume_from_the_ledger(tmp_path):
    """The real CLI, SIGKILLed by itself right after the commit of its 2nd ``Dispatched`` append and before the
    checkpoint is written (``test_sigkill``'s child); then the checkpoint file is lost too. ``run --resume`` finishes
    the campaign with the uninterrupted ledger."""
    from tests.conftest import FREESOLV_SPEC

    spec_file = tmp_path / "spec.toml"
    spec_file.write_text(FREESOLV_SPEC.read_text().replace("on_target = true", "on_target = false")
                         .replace('main = "llm"', 'main = "random"')
                         .replace('simulator = "xtb"', 'simulator = "rdkit_descriptors"')
                         .replace('proxy = "dg_solv_kcal_mol"', 'proxy = "logp"')
                         .replace('pool = "data/', f'pool = "{FREESOLV_SPEC.parent}/data/'))
    child = [sys.executable, str(ROOT / "tests" / "orchestrator" / "loop" / "test_sigkill.py")]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    start = [str(spec_file), "--lab-budget", "8", "--campaign-id", "killed"]

    def cli(kill: str, db: Path, *argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([*child, kill, "run", "--db", str(db), "--json", *argv], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=900)

    reference = cli("none", tmp_path / "ref.db", *start)
    assert reference.returncode == 0, reference.stderr[-3000:]
    killed = cli("after:Dispatched:2", tmp_path / "crash.db", *start)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    _drop_checkpoints(tmp_path / "crash.db")
    resumed = cli("none", tmp_path / "crash.db", "--resume", "killed")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    ledgers = [Ledger.open(tmp_path / name) for name in ("ref.db", "crash.db")]
    try:
        assert _comparable(ledgers[1], "killed") == _comparable(ledgers[0], "killed")
        assert verify(ledgers[1], "killed").is_identical
    finally:
        for ledger in ledgers:
            ledger.close()
