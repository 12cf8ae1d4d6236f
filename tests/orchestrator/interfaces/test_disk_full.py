"""A full disk during ``run`` (or another writing command) ends in one ``error:`` line naming the ledger and the fix,
never a traceback; the ledger stays consistent, verifies, and the campaign resumes once there is room (issue 46,
case 8).

SQLite's ``SQLITE_FULL`` is made deterministic with ``PRAGMA max_page_count`` on the ledger's connections; a real
full disk is a small tmpfs in a private mount namespace (root, or a user namespace), skipped with a message where
neither can be had."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from sqlalchemy import event as sa_event
from typer.testing import CliRunner

import orchestrator.ledger.store as store_module
from orchestrator.interfaces.cli import app
from orchestrator.interfaces.cli_common import run_app
from orchestrator.ledger import Ledger, LedgerFull, verify
from orchestrator.ledger.errors import is_disk_full
from tests.orchestrator.ledger.sandbox import (
    closedloop_shell,
    in_mount_namespace,
    mount_namespace_problem,
    write_tiny_spec,
)


@pytest.fixture
def tiny_spec(tmp_path) -> Path:
    (tmp_path / "spec").mkdir()
    return write_tiny_spec(tmp_path / "spec")


def cap_the_ledgers_pages(monkeypatch, n_more_pages: int) -> None:
    """Every ledger opened from now on may grow ``n_more_pages`` pages past its size at the first connection."""
    real = store_module.sqlite_file_engine
    limit: dict[str, int] = {}

    def capped(path, *, read_only):
        engine = real(path, read_only=read_only)

        @sa_event.listens_for(engine, "connect")
        def _cap(dbapi_connection, _record):
            pages = dbapi_connection.execute("PRAGMA page_count").fetchone()[0]
            dbapi_connection.execute(f"PRAGMA max_page_count = {limit.setdefault('pages', pages + n_more_pages)}")

        return engine

    monkeypatch.setattr(store_module, "sqlite_file_engine", capped)


def one_error_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in text, text
    return lines[0]


def test_a_full_ledger_during_run_is_one_line_and_the_campaign_resumes(tmp_path, tiny_spec, monkeypatch, capsys):
    db = tmp_path / "my ledger?.db"
    Ledger.open(db).close()  # the schema fits; the campaign's events do not
    cap_the_ledgers_pages(monkeypatch, 6)
    with pytest.raises(SystemExit) as stopped:
        run_app(app, ["run", str(tiny_spec), "--db", str(db), "--campaign-id", "c", "--json"])
    assert stopped.value.code == 2
    line = one_error_line(capsys.readouterr().err)
    assert f"the disk holding ledger {db} is full (database or disk is full)" in line
    assert "the write was refused whole and the ledger is as it was" in line
    assert f"closedloop run --resume c --db {shlex.quote(str(db))}" in line
    monkeypatch.undo()  # the space is back

    ledger = Ledger.open(db, read_only=True)
    try:
        n_before = ledger.n_events("c")
        assert n_before > 0 and verify(ledger, "c").is_identical
    finally:
        ledger.close()
    resumed = CliRunner().invoke(app, ["run", "--resume", "c", "--db", str(db), "--json"])
    assert resumed.exit_code == 0, resumed.output
    assert json.loads(resumed.stdout)["stop_reason"].startswith("lab budget used")
    ledger = Ledger.open(db, read_only=True)
    try:
        assert ledger.n_events("c") > n_before and verify(ledger, "c").is_identical
    finally:
        ledger.close()


def test_a_full_ledger_during_an_import_is_one_line_and_nothing_is_imported(tmp_path, tiny_spec, monkeypatch):
    source = tmp_path / "source.db"
    assert CliRunner().invoke(app, ["run", str(tiny_spec), "--db", str(source), "--campaign-id", "c",
                                    "--json"]).exit_code == 0
    export = tmp_path / "c.jsonl"
    assert CliRunner().invoke(app, ["ledger", "export", "c", "--db", str(source), "--out", str(export)]).exit_code == 0
    target = tmp_path / "target.db"
    Ledger.open(target).close()
    cap_the_ledgers_pages(monkeypatch, 0)
    result = CliRunner().invoke(app, ["ledger", "import", str(export), "--db", str(target)])
    assert result.exit_code == 2
    assert f"the disk holding ledger {target} is full" in one_error_line(result.output)
    capped = Ledger.open(target)
    try:
        with pytest.raises(LedgerFull, match=f"the disk holding ledger {target} is full"):
            capped.add_note("c", "test", 1, 1, "x" * 100_000)
    finally:
        capped.close()
    monkeypatch.undo()
    ledger = Ledger.open(target, read_only=True)
    try:
        assert ledger.n_events("c") == 0
    finally:
        ledger.close()


def test_a_disk_full_error_is_recognised_through_the_layers_that_wrap_it():
    import errno
    import sqlite3

    from sqlalchemy.exc import OperationalError

    full = sqlite3.connect(":memory:")
    full.execute("CREATE TABLE t (x)")
    full.execute("PRAGMA max_page_count = 2")
    with pytest.raises(sqlite3.OperationalError) as caught:
        full.execute("INSERT INTO t VALUES (zeroblob(100000))")
    assert is_disk_full(caught.value) and is_disk_full(OperationalError("INSERT", {}, caught.value))
    try:
        raise RuntimeError("the checkpoint step failed") from OSError(errno.ENOSPC, "No space left on device")
    except RuntimeError as wrapped:
        assert is_disk_full(wrapped)
    assert not is_disk_full(sqlite3.OperationalError("database is locked"))


@pytest.mark.skipif(mount_namespace_problem() is not None,
                    reason=f"a small tmpfs needs a mount namespace: {mount_namespace_problem()}")
@pytest.mark.parametrize("size", ["300k", "420k"])
def test_a_real_full_disk_during_run_is_one_line_and_the_campaign_resumes(tmp_path, tiny_spec, size):
    """A tmpfs too small for the campaign: whichever write meets the full disk first (the ledger's, its LangGraph
    checkpoints', a lease file's), the run ends in one line, the ledger verifies, and a resume finishes the
    campaign once the tmpfs is grown."""
    disk = tmp_path / "disk"
    disk.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    db = disk / "l.db"
    script = "\n".join([
        f"mount -t tmpfs -o size={size} tmpfs {disk} || exit 97",
        f"{closedloop_shell('run', tiny_spec, '--db', db, '--campaign-id', 'c', '--json')} > {out}/run.out "
        f"2> {out}/run.err; echo $? > {out}/run.rc",
        f"mount -o remount,size=64m {disk}",
        f"{closedloop_shell('ledger', 'verify', 'c', '--db', db, '--json')} > {out}/verify.out 2>&1; "
        f"echo $? > {out}/verify.rc",
        f"{closedloop_shell('run', '--resume', 'c', '--db', db, '--json')} > {out}/resume.out 2> {out}/resume.err; "
        f"echo $? > {out}/resume.rc",
    ])
    done = in_mount_namespace(script)
    assert done.returncode == 0, done.stderr
    rc = {name: int((out / f"{name}.rc").read_text()) for name in ("run", "verify", "resume")}
    assert rc["run"] == 2, ((out / "run.out").read_text(), (out / "run.err").read_text())
    line = one_error_line((out / "run.err").read_text())
    assert line.startswith("error: the disk") and str(db) in line and "--resume" in line, line
    assert rc["verify"] == 0 and all(r["identical"] for r in json.loads((out / "verify.out").read_text()))
    assert rc["resume"] == 0, (out / "resume.err").read_text()
    assert json.loads((out / "resume.out").read_text())["stop_reason"].startswith("lab budget used")
