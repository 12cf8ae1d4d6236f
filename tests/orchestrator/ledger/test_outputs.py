"""Output paths a user gives: an existing file is replaced only with --force, and a link, FIFO, device or folder in
its place never is; `ledger export --out` says so in one line and leaves it as it was."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.interfaces.cli import app
from orchestrator.ledger import Ledger
from orchestrator.ledger.outputs import (
    OutputPathError,
    check_output_path,
    output_dir,
    output_file,
    publish_tree,
)
from tests.orchestrator.ledger.writers import dispatched, started

runner = CliRunner()


def _one_error_line(result) -> str:
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


@pytest.fixture
def db(tmp_path) -> Path:
    path = tmp_path / "l.db"
    ledger = Ledger.open(path)
    try:
        ledger.append("c", started(), key="start")
        ledger.append("c", dispatched(1, "c"), key="d1")
    finally:
        ledger.close()
    return path


def _write(path: Path, text: str, *, force: bool = False) -> None:
    with output_file(path, force=force) as tmp:
        tmp.write_text(text)


def _not_ours(tmp_path: Path) -> dict[str, Path]:
    """Things at an output path that are not an output of ours: a link to a file, a dangling link, a FIFO, a
    directory."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    made = {"link": tmp_path / "link.out", "dangling": tmp_path / "dangling.out", "fifo": tmp_path / "fifo.out",
            "directory": tmp_path / "dir.out"}
    os.symlink(victim, made["link"])
    os.symlink(tmp_path / "nowhere", made["dangling"])
    os.mkfifo(made["fifo"])
    made["directory"].mkdir()
    return made


def _kind(path: Path) -> str:
    mode = os.lstat(path).st_mode
    return ("link" if stat.S_ISLNK(mode) else "fifo" if stat.S_ISFIFO(mode) else "dir" if stat.S_ISDIR(mode)
            else "file")


def test_a_new_file_is_written_and_an_existing_one_replaced_only_with_force(tmp_path):
    target = tmp_path / "out.txt"
    _write(target, "one")
    with pytest.raises(OutputPathError, match="already exists; pass --force to overwrite it, or give another path"):
        _write(target, "two")
    assert target.read_text() == "one"
    _write(target, "two", force=True)
    assert target.read_text() == "two"
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~_umask()  # an ordinary file, not a private temp
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]  # no temporary left


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("force", [False, True])
def test_links_fifos_and_directories_are_never_replaced(tmp_path, force):
    for name, path in _not_ours(tmp_path).items():
        kind = _kind(path)
        with pytest.raises(OutputPathError, match="it was left as it is"):
            _write(path, "overwritten", force=force)
        assert _kind(path) == kind, name
    assert (tmp_path / "victim.txt").read_text() == "keep me"


def test_something_that_appears_while_writing_is_not_replaced(tmp_path):
    target = tmp_path / "out.txt"
    with pytest.raises(OutputPathError, match="already exists"):
        with output_file(target) as tmp:
            tmp.write_text("ours")
            target.write_text("another writer's")  # between the check and the publication
    assert target.read_text() == "another writer's"


def test_a_failed_write_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        with output_file(tmp_path / "out.txt") as tmp:
            tmp.write_text("half")
            raise RuntimeError("the writer failed")
    assert list(tmp_path.iterdir()) == []


def test_an_output_folder_is_created_or_a_real_folder(tmp_path):
    assert output_dir(tmp_path / "a" / "b").is_dir()
    (tmp_path / "file").write_text("x")
    os.symlink(tmp_path / "a", tmp_path / "link")
    for path in (tmp_path / "file", tmp_path / "link", tmp_path / "file" / "under"):
        with pytest.raises(OutputPathError):
            output_dir(path)
    assert (tmp_path / "file").read_text() == "x" and (tmp_path / "link").is_symlink()


def test_a_folder_output_replaces_only_its_own_kind(tmp_path):
    ours, foreign = tmp_path / "ours", tmp_path / "foreign"
    for target in (ours, foreign):
        target.mkdir()
    (ours / "marker.json").write_text("{}")
    (foreign / "notes.txt").write_text("keep")
    for target in (ours, foreign):
        fresh = tmp_path / f".{target.name}.new"
        fresh.mkdir()
        (fresh / "marker.json").write_text('{"new": 1}')
        with pytest.raises(OutputPathError, match="already exists"):
            publish_tree(fresh, target, marker="marker.json")
        if target is foreign:
            with pytest.raises(OutputPathError, match="closedloop did not write"):
                publish_tree(fresh, target, force=True, marker="marker.json")
        else:
            publish_tree(fresh, target, force=True, marker="marker.json")
    assert (ours / "marker.json").read_text() == '{"new": 1}' and (foreign / "notes.txt").read_text() == "keep"


# ------------------------------------------------------------------------------------------------- ledger export
def test_ledger_export_onto_an_existing_file_needs_force(db, tmp_path):
    out = tmp_path / "c.jsonl"
    out.write_text("an earlier export")
    line = _one_error_line(runner.invoke(app, ["ledger", "export", "c", "--db", str(db), "--out", str(out)]))
    assert "already exists; pass --force" in line and out.read_text() == "an earlier export"
    result = runner.invoke(app, ["ledger", "export", "c", "--db", str(db), "--out", str(out), "--force"])
    assert result.exit_code == 0, result.output
    assert '"kind": "header"' in out.read_text().splitlines()[0]


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_ledger_export_never_replaces_a_link_or_fifo(db, tmp_path, force):
    for name, path in _not_ours(tmp_path).items():
        kind = _kind(path)
        result = runner.invoke(app, ["ledger", "export", "c", "--db", str(db), "--out", str(path), *force])
        assert "it was left as it is" in _one_error_line(result), name
        assert _kind(path) == kind
    assert (tmp_path / "victim.txt").read_text() == "keep me"


def test_ledger_export_onto_a_device_is_refused(db):
    if os.geteuid() != 0:
        pytest.skip("only root may replace /dev/full; as another user the refusal cannot be told from EACCES")
    before = os.lstat("/dev/full")
    result = runner.invoke(app, ["ledger", "export", "c", "--db", str(db), "--out", "/dev/full", "--force"])
    assert "is a device" in _one_error_line(result)
    after = os.lstat("/dev/full")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev


def test_check_output_path_names_a_missing_folder(tmp_path):
    with pytest.raises(OutputPathError, match="does not exist; create it"):
        check_output_path(tmp_path / "nope" / "out.jsonl")
