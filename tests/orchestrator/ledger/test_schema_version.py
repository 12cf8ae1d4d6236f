"""A ledger written by a newer closedloop is refused in one line naming the schema revision and closedloop version
that wrote it and the ones that read it (issue 46, case 4), by every command and never written to; each migration
records which closedloop brought the schema to its revision (``ledger_info``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.interfaces.cli import app
from orchestrator.ledger import Ledger, LedgerTooNew
from orchestrator.ledger.migrations import HEAD, closedloop_version
from vocabulary.events import CampaignStarted


def newer_ledger(path: Path, *, revision: str = "0099", writer: str | None = "9.4.1") -> Path:
    """A ledger as a later closedloop would leave it: a revision this one does not ship, and its version recorded."""
    ledger = Ledger.open(path)
    ledger.append("c", CampaignStarted(name="demo", seed=0, spec={}), key="start")
    ledger.close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = ?", (revision,))
        conn.execute("DELETE FROM ledger_info")
        if writer is not None:
            conn.execute("INSERT INTO ledger_info (key, value) VALUES ('schema_written_by', ?)", (writer,))
    conn.close()
    return path


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if not p.name.endswith(("-wal", "-shm"))}


def test_a_new_ledger_records_the_closedloop_that_wrote_its_schema(tmp_path):
    Ledger.open(tmp_path / "l.db").close()
    with sqlite3.connect(tmp_path / "l.db") as conn:
        assert conn.execute("SELECT value FROM ledger_info WHERE key = 'schema_written_by'").fetchone() == (
            closedloop_version(),)
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == (HEAD,)
    conn.close()


@pytest.mark.parametrize("read_only", [False, True])
def test_opening_a_newer_ledger_names_both_versions_and_writes_nothing(tmp_path, read_only):
    db = newer_ledger(tmp_path / "l.db")
    before = files(tmp_path)
    with pytest.raises(LedgerTooNew) as caught:
        Ledger.open(db, read_only=read_only)
    message = str(caught.value)
    assert message.startswith(f"ledger {db} was written by a newer closedloop (schema revision 0099, closedloop "
                              f"9.4.1); this closedloop ({closedloop_version()}) reads up to revision {HEAD}")
    assert "upgrade closedloop" in message and "\n" not in message
    assert files(tmp_path) == before


@pytest.mark.parametrize("args", [["ls"], ["show", "c"], ["ledger", "verify"], ["ledger", "export", "c"],
                                  ["run", "--resume", "c"], ["report", "c"]], ids=lambda a: " ".join(a))
def test_every_command_refuses_a_newer_ledger_in_one_line(tmp_path, args, monkeypatch):
    monkeypatch.chdir(tmp_path)
    db = newer_ledger(tmp_path / "l.db")
    before = files(tmp_path)
    result = CliRunner().invoke(app, [*args, "--db", str(db)])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert lines[0].startswith(f"error: ledger {db} was written by a newer closedloop (schema revision 0099, "
                               f"closedloop 9.4.1)")
    assert "Traceback" not in result.output and files(tmp_path) == before


def test_a_newer_ledger_that_records_no_version_still_names_its_revision(tmp_path):
    db = newer_ledger(tmp_path / "l.db", revision="a1b2c3", writer=None)
    with pytest.raises(LedgerTooNew, match=r"newer closedloop \(schema revision a1b2c3\); this closedloop"):
        Ledger.open(db)


def test_a_ledger_migrated_from_an_older_revision_records_its_new_writer(tmp_path):
    db = tmp_path / "l.db"
    Ledger.open(db).close()
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE ledger_info")
        conn.execute("UPDATE alembic_version SET version_num = '0005'")
    conn.close()
    Ledger.open(db).close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == (HEAD,)
        assert conn.execute("SELECT value FROM ledger_info").fetchall() == [(closedloop_version(),)]
    conn.close()


@pytest.mark.postgres
def test_a_newer_postgres_ledger_is_refused_and_a_current_one_reads_read_only(postgres_url):
    from sqlalchemy import create_engine, text

    from orchestrator.ledger import LedgerError, database_url

    ledger = Ledger.open(postgres_url)
    ledger.append("c", CampaignStarted(name="demo", seed=0, spec={}), key="start")
    ledger.close()
    reader = Ledger.open(postgres_url, read_only=True)
    try:
        assert reader.n_events("c") == 1
        with pytest.raises(LedgerError, match="was opened read-only"):
            reader.append("c", CampaignStarted(name="demo", seed=0, spec={}), key="again")
    finally:
        reader.close()
    engine = create_engine(database_url(postgres_url))
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0099'"))
        conn.execute(text("UPDATE ledger_info SET value = '9.4.1' WHERE key = 'schema_written_by'"))
    engine.dispose()
    for read_only in (False, True):
        with pytest.raises(LedgerTooNew, match=r"newer closedloop \(schema revision 0099, closedloop 9.4.1\)") as caught:
            Ledger.open(postgres_url, read_only=read_only)
        assert "s3cret" not in str(caught.value)
