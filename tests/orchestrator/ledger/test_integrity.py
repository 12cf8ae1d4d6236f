"""A damaged SQLite ledger, or a file that is not a database at all, is refused with one error line naming the file,
the fault and the fix, and keeps every byte: ``run --resume`` appends nothing to it (issue 18, case 7). The LangGraph
checkpoint file beside a ledger gets the same check."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.interfaces.cli import app
from orchestrator.ledger import CorruptDatabase, Ledger, check_sqlite_file, verify
from orchestrator.loop.campaign import checkpoint_path
from tests.conftest import FREESOLV_SPEC
from vocabulary.domain import SetupError

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def error_line(result) -> str:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    """A ledger (and its checkpoint file) left by a short campaign that stopped part-way, so it can be resumed."""
    db = tmp_path_factory.mktemp("written") / "run.db"
    result = invoke("run", FREESOLV_SPEC, "--db", db, "--lab-budget", 4, "--max-steps", 12, "--json",
                    "--campaign-id", "c", "--planner", "random")
    assert json.loads(result.stdout)["status"] == "running", result.output
    return db


@pytest.fixture
def ledger_copy(written, tmp_path) -> Path:
    db = tmp_path / "run.db"
    shutil.copy2(written, db)
    shutil.copy2(checkpoint_path_of(written), checkpoint_path_of(db))
    return db


def checkpoint_path_of(db: Path) -> Path:
    return db.with_name(db.name + ".checkpoints.sqlite")


def quick_check(path: Path) -> list[str]:
    """SQLite's own verdict, on a copy (a read-only open of a WAL database leaves -wal and -shm files beside it)."""
    probe = path.with_name("probe-" + path.name)
    shutil.copy2(path, probe)
    with sqlite3.connect(f"file:{probe}?mode=ro", uri=True) as conn:
        try:
            return [row[0] for row in conn.execute("PRAGMA quick_check")]
        except sqlite3.DatabaseError as exc:
            return [str(exc)]


def scribble_on_a_table_page(path: Path) -> None:
    """Overwrite the header and cell pointers of a b-tree page in the middle of the file with junk."""
    data = bytearray(path.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    n_pages = len(data) // page_size
    btree_pages = [n for n in range(1, n_pages) if data[n * page_size] in (2, 5, 10, 13)]
    page = btree_pages[len(btree_pages) // 2]
    data[page * page_size:page * page_size + 64] = bytes(range(200, 232)) * 2
    path.write_bytes(bytes(data))


def test_the_checkpoint_file_is_named_after_the_ledger(ledger_copy):
    ledger = Ledger.open(ledger_copy)
    try:
        assert checkpoint_path(ledger) == checkpoint_path_of(ledger_copy)
    finally:
        ledger.close()


@pytest.mark.parametrize("damage", ["scribbled page", "truncated"])
def test_run_resume_refuses_a_damaged_ledger_and_leaves_it_unchanged(ledger_copy, damage):
    if damage == "truncated":
        data = ledger_copy.read_bytes()
        ledger_copy.write_bytes(data[:len(data) // 2])
    else:
        scribble_on_a_table_page(ledger_copy)
    assert quick_check(ledger_copy) != ["ok"], "the damage must be one SQLite can see"
    before = ledger_copy.read_bytes()
    checkpoints_before = checkpoint_path_of(ledger_copy).read_bytes()

    line = error_line(invoke("run", "--resume", "c", "--db", ledger_copy))
    assert f"ledger {ledger_copy} is damaged (SQLite quick_check: " in line
    assert "nothing was written to it" in line and "closedloop ledger import" in line and "another --db" in line
    with pytest.raises(CorruptDatabase, match="is damaged"):
        Ledger.open(ledger_copy)
    assert ledger_copy.read_bytes() == before
    assert checkpoint_path_of(ledger_copy).read_bytes() == checkpoints_before
    assert not ledger_copy.with_name(ledger_copy.name + "-wal").exists()


@pytest.mark.parametrize("content", [b"my lab notes\nrun 1: 3.2 mg\n", bytes(range(256)) * 40],
                         ids=["text", "random bytes"])
def test_a_file_that_is_not_a_database_is_refused_and_never_overwritten(tmp_path, content):
    db = tmp_path / "notes.db"
    db.write_bytes(content)
    for args in (["run", FREESOLV_SPEC, "--db", db, "--lab-budget", 2], ["run", "--resume", "c", "--db", db],
                 ["ledger", "verify", "--db", db]):
        line = error_line(invoke(*args))
        assert f"ledger {db} is not a SQLite database (it starts with {content[:12]!r})" in line
        assert "it was left untouched" in line and "another --db path" in line
    assert db.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]


def test_a_damaged_checkpoint_file_is_refused_and_left_as_it_is(ledger_copy):
    checkpoints = checkpoint_path_of(ledger_copy)
    checkpoints.write_bytes(b"not a checkpoint database" * 100)
    ledger = Ledger.open(ledger_copy)
    n_events = ledger.n_events("c")
    ledger.close()
    before = ledger_copy.read_bytes()

    line = error_line(invoke("run", "--resume", "c", "--db", ledger_copy))
    assert f"LangGraph checkpoint file {checkpoints} is not a SQLite database" in line
    assert checkpoints.read_bytes() == b"not a checkpoint database" * 100
    assert ledger_copy.read_bytes() == before
    ledger = Ledger.open(ledger_copy)
    try:
        assert ledger.n_events("c") == n_events and verify(ledger, "c").is_identical
    finally:
        ledger.close()


def test_check_sqlite_file_accepts_a_sound_file_and_a_new_one(written, tmp_path):
    check_sqlite_file(written, what="ledger")
    check_sqlite_file(tmp_path / "absent.db", what="ledger")
    (tmp_path / "empty.db").write_bytes(b"")
    check_sqlite_file(tmp_path / "empty.db", what="ledger")
    assert issubclass(CorruptDatabase, SetupError)


def test_checking_a_file_keeps_the_locks_this_process_holds_on_it(tmp_path):
    """fcntl locks belong to the process, and closing any descriptor of the file drops them all; the check reads
    the file through SQLite only, so a connection of ours keeps its lock and another process still waits for it."""
    import sqlite3
    import subprocess
    import sys

    path = tmp_path / "held.db"
    with sqlite3.connect(path) as setup:
        setup.execute("CREATE TABLE t (x)")
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT * FROM t").fetchall()  # holds a SHARED lock until the transaction ends
    try_exclusive = ("import sqlite3, sys; c = sqlite3.connect(sys.argv[1], timeout=0, isolation_level=None)\n"
                     "try:\n    c.execute('BEGIN EXCLUSIVE'); print('acquired')\n"
                     "except sqlite3.OperationalError as e:\n    print(e)")
    try:
        check_sqlite_file(path, what="ledger")
        other = subprocess.run([sys.executable, "-c", try_exclusive, str(path)], capture_output=True, text=True,
                               check=True)
        assert other.stdout.strip() == "database is locked"
    finally:
        reader.close()
