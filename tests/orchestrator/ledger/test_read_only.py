"""A healthy ledger on read-only media (an archive, a snapshot, a read-only mount) reads as well as a working copy
(issue 46, case 3): ``ls``, ``show``, ``ledger verify``, ``ledger export``, ``report`` and an exact ``replay`` open it
read-only, and "damaged" is kept for damage. A read-only open writes nothing: no migration, no -wal or -shm left.

The read-only media are a read-only bind mount in a private mount namespace (``unshare -m``), which stops root too;
where no such namespace can be had the test says so and is skipped. A folder chmod 555 is tried when not root."""

from __future__ import annotations

import gc
import json
import os
import shlex
import shutil
import sqlite3
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.interfaces.cli import app
from orchestrator.ledger import (
    Ledger,
    LedgerError,
    LedgerNeedsMigration,
    UnreadableDatabase,
    verify,
)
from orchestrator.ledger.integrity import read_only_target
from tests.orchestrator.ledger.sandbox import (
    closedloop_shell,
    in_mount_namespace,
    mount_namespace_problem,
    read_only_bind,
    write_tiny_spec,
)
from vocabulary.events import CampaignStarted

READ_COMMANDS = [
    ("ls", ["ls", "--json"]),
    ("show", ["show", "c", "--json"]),
    ("verify", ["ledger", "verify", "c"]),
    ("export", ["ledger", "export", "c", "--out", "{out}/c.jsonl"]),
    ("report", ["report", "c", "--out", "{out}/report"]),
    ("replay", ["replay", "c"]),
]


@pytest.fixture(scope="module")
def campaign_folder(tmp_path_factory) -> Path:
    """A folder holding only a finished campaign's ledger and checkpoints (closed cleanly: no -wal, no -shm)."""
    spec = write_tiny_spec(tmp_path_factory.mktemp("spec"))
    folder = tmp_path_factory.mktemp("archive")
    result = CliRunner().invoke(app, ["run", str(spec), "--db", str(folder / "l.db"), "--campaign-id", "c", "--json"])
    assert result.exit_code == 0, result.output
    for leftover in folder.glob("l.db.lease.*"):
        leftover.unlink()
    return folder


def listing(folder: Path) -> dict[str, bytes]:
    gc.collect()  # ledgers opened by in-process commands close their connections (the -wal and -shm go with them)
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def copy_of(folder: Path, tmp_path: Path) -> Path:
    target = tmp_path / "media"
    shutil.copytree(folder, target)
    return target


needs_mounts = pytest.mark.skipif(mount_namespace_problem() is not None,
                                  reason=f"read-only media need a mount namespace: {mount_namespace_problem()}")


def _on_read_only_mount(source: Path, out: Path, commands: list[tuple[str, list[str]]]) -> dict[str, dict]:
    """Run each closedloop command against ``source`` shown read-only at ``<out>/ro``; their exit codes and output."""
    mount_point = out / "ro"
    mount_point.mkdir(exist_ok=True)
    lines = [read_only_bind(source, mount_point) + " || exit 97",
             f"touch {shlex.quote(str(mount_point))}/probe 2>/dev/null && exit 98"]
    for name, args in commands:
        argv = [a.format(out=out) for a in args] + ["--db", str(mount_point / "l.db")]
        lines.append(f"{closedloop_shell(*argv)} > {out}/{name}.out 2> {out}/{name}.err; echo $? > {out}/{name}.rc")
    done = in_mount_namespace("\n".join(lines))
    assert done.returncode == 0, (done.returncode, done.stderr)
    return {name: {"rc": int((out / f"{name}.rc").read_text()), "out": (out / f"{name}.out").read_text(),
                   "err": (out / f"{name}.err").read_text()} for name, _ in commands}


@needs_mounts
def test_every_read_command_reads_a_ledger_on_a_read_only_mount(campaign_folder, tmp_path):
    media = copy_of(campaign_folder, tmp_path)
    before = listing(media)
    out = tmp_path / "out"
    out.mkdir()
    results = _on_read_only_mount(media, out, READ_COMMANDS)
    for name, got in results.items():
        assert got["rc"] == 0 and "damaged" not in got["err"] and "error" not in got["err"], (name, got)
    assert [row["campaign_id"] for row in json.loads(results["ls"]["out"])] == ["c"]
    assert json.loads(results["show"]["out"])[0]["type"] == "CampaignStarted"
    assert "hash chain ok" in results["verify"]["out"] and "projections ok" in results["verify"]["out"]
    assert (out / "c.jsonl").read_text().count("\n") > 10 and (out / "report" / "index.html").is_file()
    assert "identical" in results["replay"]["out"]
    assert listing(media) == before  # not a byte written, no -wal or -shm beside it


@needs_mounts
def test_a_snapshot_taken_while_the_ledger_was_open_reads_its_log(campaign_folder, tmp_path):
    """A snapshot of a live ledger carries its -wal (with events not yet in the main file) and -shm."""
    live = copy_of(campaign_folder, tmp_path)
    writer = Ledger.open(live / "l.db")
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    try:
        writer.append("d", CampaignStarted(name="in the log only", seed=0, spec={}), key="start")
        for name in ("l.db", "l.db-wal", "l.db-shm"):  # the open ledger keeps its last commit in the log
            shutil.copy2(live / name, snapshot / name)
    finally:
        writer.close()
    assert (snapshot / "l.db-wal").stat().st_size > 0
    before = listing(snapshot)
    out = tmp_path / "out"
    out.mkdir()
    results = _on_read_only_mount(snapshot, out, [("ls", ["ls", "--json"])])
    assert results["ls"]["rc"] == 0, results
    assert sorted(row["campaign_id"] for row in json.loads(results["ls"]["out"])) == ["c", "d"]
    assert listing(snapshot) == before

    (snapshot / "l.db-shm").unlink()  # a log without its index cannot be read in a folder that cannot hold one
    results = _on_read_only_mount(snapshot, out, [("ls", ["ls"])])
    lines = [line for line in results["ls"]["err"].splitlines() if line.strip()]
    assert results["ls"]["rc"] == 2 and len(lines) == 1 and lines[0].startswith("error: "), results
    assert "has a write-ahead log (l.db-wal) but no l.db-shm" in lines[0] and "damaged" not in lines[0]


@needs_mounts
def test_a_writing_command_on_read_only_media_says_so_in_one_line(campaign_folder, tmp_path):
    media = copy_of(campaign_folder, tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    results = _on_read_only_mount(media, out, [("resume", ["run", "--resume", "c"])])
    lines = [line for line in results["resume"]["err"].splitlines() if line.strip()]
    assert results["resume"]["rc"] == 2 and len(lines) == 1, results
    assert "cannot be written here (a read-only file, folder or file system)" in lines[0]
    assert "damaged" not in lines[0] and ".recover" not in lines[0]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a chmod 555 folder; the read-only mount tests "
                                             "cover root")
def test_a_ledger_in_a_folder_this_user_cannot_write_reads(campaign_folder, tmp_path):
    media = copy_of(campaign_folder, tmp_path)
    before = listing(media)
    media.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    try:
        for args in (["ls"], ["show", "c"], ["ledger", "verify", "c"]):
            result = CliRunner().invoke(app, [*args, "--db", str(media / "l.db")])
            assert result.exit_code == 0 and "damaged" not in result.output, (args, result.output)
        ledger = Ledger.open(media / "l.db", read_only=True)
        assert verify(ledger, "c").is_identical
        ledger.close()
    finally:
        media.chmod(0o755)
    assert listing(media) == before


def test_a_read_only_open_leaves_a_writable_folder_as_it_was(campaign_folder, tmp_path):
    media = copy_of(campaign_folder, tmp_path)
    before = listing(media)
    ledger = Ledger.open(media / "l.db", read_only=True)
    try:
        assert ledger.is_read_only and verify(ledger, "c").is_identical
        with pytest.raises(LedgerError, match="was opened read-only"):
            ledger.add_note("c", "test", 1, 1, "never written")
    finally:
        ledger.close()
    for args in (["ls"], ["show", "c"], ["ledger", "verify", "c"], ["replay", "c"]):
        result = CliRunner().invoke(app, [*args, "--db", str(media / "l.db")])
        assert result.exit_code == 0, (args, result.output)
    assert listing(media) == before


def test_a_read_only_open_never_migrates(tmp_path):
    db = tmp_path / "old.db"
    Ledger.open(db).close()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0005'")
        conn.execute("DROP TABLE ledger_info")
    conn.close()
    before = listing(tmp_path)
    with pytest.raises(LedgerNeedsMigration, match=r"at schema revision 0005 .* reads revision 0006: it must be "
                                                   r"migrated first, which needs write access"):
        Ledger.open(db, read_only=True)
    assert listing(tmp_path) == before
    # where it can be written, a reading command migrates it first, as every command did before
    result = CliRunner().invoke(app, ["ls", "--db", str(db)])
    assert result.exit_code == 0, result.output
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone()[0] == "0006"
    conn.close()


def test_a_file_sqlite_cannot_open_is_not_called_damaged(tmp_path):
    """A file SQLite cannot open for a reason that is not its content (here: a folder in place of its -wal) is
    ``UnreadableDatabase``, with no advice to salvage it."""
    db = tmp_path / "l.db"
    Ledger.open(db).close()
    (tmp_path / "l.db-wal").mkdir()
    for read_only in (False, True):
        with pytest.raises(UnreadableDatabase) as caught:
            Ledger.open(db, read_only=read_only)
        assert "damaged" not in str(caught.value) and ".recover" not in str(caught.value)
        assert f"cannot read ledger {db}" in str(caught.value)


def test_the_read_only_target_is_immutable_only_without_a_log(tmp_path):
    db = tmp_path / "l?#%20.db"
    Ledger.open(db).close()
    assert read_only_target(db).endswith("?mode=ro&immutable=1") and "%3F%23%2520" in read_only_target(db)
    (tmp_path / (db.name + "-wal")).write_bytes(b"x" * 32)
    (tmp_path / (db.name + "-shm")).write_bytes(b"")
    assert read_only_target(db).endswith("?mode=ro")
