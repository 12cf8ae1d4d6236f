"""Refuse a damaged SQLite file before anything is written to it.

A ledger (or the LangGraph checkpoint file beside it) that is not a SQLite database at all, or that fails
``PRAGMA quick_check``, is refused with one message naming the file, what is wrong and what to do. The check opens
the file read-only (``mode=ro``), so a refused file keeps every byte; an absent or empty file is a new database.

Example:
    >>> import tempfile, pathlib
    >>> notes = pathlib.Path(tempfile.mkdtemp()) / "notes.db"
    >>> _ = notes.write_text("my lab notes")
    >>> check_sqlite_file(notes, what="ledger")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    orchestrator.ledger.integrity.CorruptDatabase: ledger .../notes.db is not a SQLite database (it starts with b'my lab notes'); ...
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from orchestrator.ledger.errors import LedgerError
from vocabulary.domain import SetupError

__all__ = ["SQLITE_HEADER", "CorruptDatabase", "check_sqlite_file"]

SQLITE_HEADER = b"SQLite format 3\x00"
_N_PROBLEMS_SHOWN = 3


class CorruptDatabase(LedgerError, SetupError):
    """A database file is damaged or is not a SQLite database; nothing was written to it."""


def check_sqlite_file(path: Path, *, what: str) -> None:
    """Raise ``CorruptDatabase`` unless ``path`` is absent, empty, or a SQLite database that passes ``quick_check``.

    Args:
        path: the database file.
        what: what the file is, for the message ("ledger", "LangGraph checkpoint file").
    """
    # The file is read through SQLite only. Opening and closing it any other way would drop every POSIX lock this
    # process holds on it (fcntl locks belong to the process, and any close releases them), so another process could
    # then check-point or delete the WAL under a live connection of ours.
    try:
        if path.stat().st_size == 0:
            return
    except FileNotFoundError:
        return
    if path.is_dir():
        raise CorruptDatabase(f"{what} {path} is a directory, not a SQLite database; pass a file path")
    problems = _quick_check(path)
    if problems and any("not a database" in problem for problem in problems):
        header = _header(path)  # not a SQLite file, so no connection of ours holds a lock on it
        if header[:len(SQLITE_HEADER)] != SQLITE_HEADER:
            raise CorruptDatabase(
                f"{what} {path} is not a SQLite database (it starts with {header[:12]!r}); it was left untouched. "
                f"Pass another --db path, or move this file away if it is a ledger you meant to replace")
    if problems:
        # a problem can span lines ("*** in database main ***\nPage 99: ..."); the message stays one line
        shown = "; ".join(" ".join(p.split()) for p in problems[:_N_PROBLEMS_SHOWN]) + (
            " …" if len(problems) > _N_PROBLEMS_SHOWN else "")
        raise CorruptDatabase(
            f"{what} {path} is damaged (SQLite quick_check: {shown}); nothing was written to it. "
            f"{_remedy(what, path)}")


def _header(path: Path) -> bytes:
    with path.open("rb") as handle:
        return handle.read(len(SQLITE_HEADER))


def _quick_check(path: Path) -> list[str]:
    """The problems ``PRAGMA quick_check`` finds (an empty list when the file is sound)."""
    sidecars = [path.with_name(path.name + suffix) for suffix in ("-wal", "-shm")]
    had_sidecars = [p.exists() for p in sidecars]
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    except sqlite3.Error as exc:
        return [str(exc)]
    try:
        rows = [row[0] for row in connection.execute("PRAGMA quick_check")]
    except sqlite3.Error as exc:
        rows = [str(exc)]
    finally:
        connection.close()
    if rows == ["ok"]:
        return []
    # A read-only open of a WAL database still creates an empty -wal and its -shm index; leave the folder as it was.
    wal, shm = sidecars
    if not any(had_sidecars) and wal.exists() and wal.stat().st_size == 0:
        for created in sidecars:
            created.unlink(missing_ok=True)
    return rows


def _remedy(what: str, path: Path) -> str:
    if what == "ledger":
        return (f"Move it away and restore the campaign into a new file from its export "
                f"(`closedloop ledger import CAMPAIGN.jsonl --db NEW.db`), or start a new ledger with another --db; "
                f"`sqlite3 {path} .recover` may salvage what is left")
    return "Restore it from a backup, or start a new ledger with another --db"
