"""A ``--db`` path is a path, never a URL fragment (issue 46, case 6): ``?``, ``#``, ``%20``, spaces, unicode, ``@``
and ``:`` in a ledger's path put the ledger, its LangGraph checkpoints and its leases exactly at (and beside) the
path given. Only a string with a URL scheme (``postgresql://``, ``sqlite:///``) is a URL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.interfaces.cli import app
from orchestrator.ledger import (
    Ledger,
    LedgerError,
    database_url,
    is_url,
    sqlite_file,
    verify,
)
from orchestrator.loop.campaign import checkpoint_path
from orchestrator.loop.lease import CampaignLease
from tests.orchestrator.ledger.sandbox import write_tiny_spec
from vocabulary.domain import SetupError
from vocabulary.events import CampaignStarted

NASTY_NAMES = ["run?x=1.db", "run#frag.db", "run%20spaced.db", "run with spaces.db", "rün-ünïcødé-💧.db",
               "user@host:5432.db", "a?b#c%41 d@e:f.db"]


@pytest.fixture
def tiny_spec(tmp_path_factory) -> Path:
    return write_tiny_spec(tmp_path_factory.mktemp("spec"))


def started() -> CampaignStarted:
    return CampaignStarted(name="demo", seed=0, spec={})


@pytest.mark.parametrize("name", NASTY_NAMES)
def test_a_ledger_its_checkpoints_and_its_lease_sit_exactly_at_the_path_given(tmp_path, name):
    folder = tmp_path / "f?o#l%20d e@r:ü"
    folder.mkdir()
    db = folder / name
    ledger = Ledger.open(str(db))
    try:
        ledger.append("c", started(), key="start")
        assert ledger.path == db.resolve()
        assert checkpoint_path(ledger) == folder / (name + ".checkpoints.sqlite")
        with CampaignLease(ledger, "c") as lease:
            lease.acquire()
            assert lease.lock_path().parent == folder and lease.lock_path().name.startswith(name + ".lease.c.")
            assert lease.holder_path().is_file()
    finally:
        ledger.close()
    assert db.is_file() and db.read_bytes().startswith(b"SQLite format 3\x00")
    # nothing anywhere else: not a file named after the part before the `?` or `#`, not a decoded `%20`
    assert [p for p in tmp_path.rglob("*") if p.is_file() and p.parent != folder] == []
    assert all(p.name.startswith(name) for p in folder.iterdir()), sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("name", NASTY_NAMES)
def test_the_ledgers_url_reads_back_as_the_same_file(tmp_path, name):
    db = tmp_path / name
    ledger = Ledger.open(db)
    ledger.append("c", started(), key="start")
    ledger.close()
    for spelled in (database_url(db), Ledger.open(db).url):
        assert is_url(spelled) and sqlite_file(spelled) == db.resolve()
        again = Ledger.open(spelled)
        try:
            assert again.path == db.resolve() and again.n_events("c") == 1
        finally:
            again.close()
    assert all(p.name.startswith(name) for p in tmp_path.iterdir()), sorted(p.name for p in tmp_path.iterdir())


def test_only_a_string_with_a_scheme_is_a_url():
    assert is_url("postgresql://me@db.example/lab") and is_url("sqlite:///x.db")
    for path in ("x.db", "a?b=1", "user@host:5432/lab.db", "C:\\lab\\x.db", "%2Ftmp%2Fx.db", "./sqlite:/x.db"):
        assert not is_url(path), path
        assert sqlite_file(path) == Path(path).resolve()


def test_a_sqlite_url_with_a_query_part_is_refused_not_read_as_another_file(tmp_path):
    with pytest.raises(LedgerError, match=r"has a query part \(x\).*pass the ledger's file path"):
        Ledger.open(f"sqlite:///{tmp_path}/run?x")
    assert list(tmp_path.iterdir()) == []


def test_a_campaign_run_from_the_command_line_lands_at_the_path_given(tmp_path, tiny_spec):
    folder = tmp_path / "lab #2 ? 100%20 é@host:1"
    folder.mkdir()
    db = folder / "screen?v=1#a %20.db"
    result = CliRunner().invoke(app, ["run", str(tiny_spec), "--db", str(db), "--campaign-id", "c", "--json",
                                      "--max-steps", "8"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in folder.iterdir() if "-wal" not in p.name and "-shm" not in p.name) == [
        db.name, f"{db.name}.checkpoints.sqlite", *sorted(p.name for p in folder.glob(f"{db.name}.lease.*"))]
    assert len(list(folder.glob(f"{db.name}.lease.c.*"))) == 2  # the lock file and its holder file
    assert [p for p in tmp_path.rglob("*") if p.is_file() and p.parent not in (folder, tiny_spec.parent)] == []
    listed = CliRunner().invoke(app, ["ls", "--db", str(db), "--json"])
    assert listed.exit_code == 0 and [row["campaign_id"] for row in json.loads(listed.stdout)] == ["c"]
    resumed = CliRunner().invoke(app, ["run", "--resume", "c", "--db", str(db), "--json"])
    assert resumed.exit_code == 0, resumed.output
    ledger = Ledger.open(db, read_only=True)
    try:
        assert verify(ledger, "c").is_identical and ledger.campaign("c").status == "stopped"
    finally:
        ledger.close()


def test_a_what_if_refuses_the_recorded_ledgers_own_path_however_it_is_spelled(tmp_path, tiny_spec):
    from orchestrator.replay.whatif import what_if

    db = tmp_path / "a?b %20.db"
    result = CliRunner().invoke(app, ["run", str(tiny_spec), "--db", str(db), "--campaign-id", "c", "--json",
                                      "--max-steps", "4"])
    assert result.exit_code == 0, result.output
    ledger = Ledger.open(db)
    try:
        for spelled in (str(db), database_url(db), str(tmp_path / "." / db.name)):
            with pytest.raises(SetupError, match="the what-if needs its own ledger"):
                what_if(ledger, "c", planner="random", out_db=spelled)
    finally:
        ledger.close()
