"""Refuse a damaged SQLite file before anything is written to it, and read a sound one on read-only media.

A ledger (or the LangGraph checkpoint file beside it) that is not a SQLite database at all, or that fails
``PRAGMA quick_check``, is refused with one message naming the file, what is wrong and what to do. The check opens
the file read-only (``mode=ro``), so a refused file keeps every byte; an absent or empty file is a new database.

"Damaged" is kept for damage: a file SQLite cannot open or read for another reason (no permission, a read-only
folder it would need a lock file in, a lock held elsewhere, an I/O error) is ``UnreadableDatabase``, with its own
message. ``read_only_target`` is how a file that this process may not write is read without writing anything beside
it: ``immutable=1`` when there is no log to replay (nothing else can be writing it then), else ``mode=ro``.

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

import os
import sqlite3
from pathlib import Path

from orchestrator.ledger.errors import LedgerError
from vocabulary.domain import SetupError

__all__ = ["SQLITE_HEADER", "CorruptDatabase", "UnreadableDatabase", "check_sqlite_file", "is_writable",
           "read_only_target", "sidecars"]

SQLITE_HEADER = b"SQLite format 3\x00"
_N_PROBLEMS_SHOWN = 3
_DAMAGE_CODES = {"SQLITE_CORRUPT", "SQLITE_NOTADB"}
"""SQLite's result codes that mean the file itself is damaged; any other failure to read it is not damage."""


class CorruptDatabase(LedgerError, SetupError):
    """A database file is damaged or is not a SQLite database; nothing was written to it."""


class UnreadableDatabase(LedgerError, SetupError):
    """A database file could not be read (permissions, locks, the medium), which says nothing about its content."""


def sidecars(path: Path) -> tuple[Path, Path, Path]:
    """The files SQLite keeps beside a database: its write-ahead log, its shared-memory index and its rollback
    journal."""
    return tuple(path.with_name(path.name + suffix) for suffix in ("-wal", "-shm", "-journal"))  # type: ignore[return-value]


def is_writable(path: Path) -> bool:
    """Whether this process may write ``path``, its folder and the sidecars already there (False on a read-only
    mount, for root too: ``access`` reports ``EROFS``)."""
    existing = [p for p in (path, *sidecars(path)) if p.exists()]
    return all(os.access(p, os.W_OK) for p in (path.parent, *existing))


def read_only_target(path: Path, *, what: str = "ledger") -> str:
    """The ``file:`` URI that reads ``path`` without writing anything: not the file, not a -wal or -shm beside it.

    With no log to replay (no -wal with content, no rollback journal) the file is opened ``immutable=1``, since a
    read-only ``mode=ro`` open of a WAL database needs a -shm index it would create. With a log it is opened
    ``mode=ro``, which reads the log through its -shm (a read-only -shm is enough, SQLite >= 3.22); a log without its
    -shm in a folder that cannot hold one cannot be read there, and is refused with one line.
    """
    wal, shm, journal = sidecars(path)
    has_log = (wal.exists() and wal.stat().st_size > 0) or journal.exists()
    uri = path.resolve().as_uri()  # percent-encodes ``?``, ``#``, ``%`` and the rest: a path stays a path
    if not has_log:
        return f"{uri}?mode=ro&immutable=1"
    if wal.exists() and not shm.exists() and not os.access(path.parent, os.W_OK):
        raise UnreadableDatabase(
            f"{what} {path} has a write-ahead log ({wal.name}) but no {shm.name}, and its folder is read-only, so "
            f"SQLite cannot read the log there: copy {path.name} and {wal.name} together to a writable folder and "
            f"read the copy")
    return f"{uri}?mode=ro"


def check_sqlite_file(path: Path, *, what: str, read_only: bool = False) -> None:
    """Raise ``CorruptDatabase`` unless ``path`` is absent, empty, or a SQLite database that passes ``quick_check``.

    Args:
        path: the database file.
        what: what the file is, for the message ("ledger", "LangGraph checkpoint file").
        read_only: check it as a read-only command reads it (``read_only_target`` where it may not be written),
            so that nothing is created beside it.

    Raises:
        CorruptDatabase: the file is damaged or not a SQLite database.
        UnreadableDatabase: SQLite could not open or read it, for a reason that is not damage.
    """
    # The file is read through SQLite only. Opening and closing it any other way would drop every POSIX lock this
    # process holds on it (fcntl locks belong to the process, and any close releases them), so another process could
    # then check-point or delete the WAL under a live connection of ours.
    try:
        if path.stat().st_size == 0:
            return
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UnreadableDatabase(f"cannot read {what} {path}: {exc.strerror or exc}; check the path and that you "
                                 f"may read it") from None
    if path.is_dir():
        raise CorruptDatabase(f"{what} {path} is a directory, not a SQLite database; pass a file path")
    problems = _quick_check(path, what=what, read_only=read_only)
    if problems and any("not a database" in problem for problem in problems):
        header = _header(path, what)  # not a SQLite file, so no connection of ours holds a lock on it
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


def _header(path: Path, what: str) -> bytes:
    try:
        with path.open("rb") as handle:
            return handle.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise UnreadableDatabase(f"cannot read {what} {path}: {exc.strerror or exc}; check that you may read it "
                                 f"and its folder") from None


def _quick_check(path: Path, *, what: str, read_only: bool) -> list[str]:
    """The problems ``PRAGMA quick_check`` finds (an empty list when the file is sound).

    Raises ``UnreadableDatabase`` when SQLite fails for a reason other than damage.
    """
    wal, shm, _ = sidecars(path)
    had_sidecars = [p.exists() for p in (wal, shm)]
    # ``mode=ro`` never writes the file (a plain connection would check-point a -wal into it when it closes); where
    # the folder cannot even hold the -shm that needs, the read-only target. A -wal and -shm this makes in a writable
    # folder go when the ledger's own connection, the last one, closes.
    target = read_only_target(path, what=what) if read_only and not is_writable(path) else \
        f"{path.resolve().as_uri()}?mode=ro"
    try:
        connection = sqlite3.connect(target, uri=True, timeout=30)
    except sqlite3.Error as exc:
        return _as_problems(exc, path, what)
    try:
        connection.execute("PRAGMA query_only=ON")
        rows = [row[0] for row in connection.execute("PRAGMA quick_check")]
    except sqlite3.Error as exc:
        rows = _as_problems(exc, path, what)
    finally:
        connection.close()
    if rows == ["ok"]:
        return []
    # A read-only open of a WAL database still creates an empty -wal and its -shm index; leave the folder as it was.
    if not any(had_sidecars) and wal.exists() and wal.stat().st_size == 0:
        for created in (wal, shm):
            created.unlink(missing_ok=True)
    return rows


def _as_problems(exc: sqlite3.Error, path: Path, what: str) -> list[str]:
    """A SQLite error that means damage, as a problem; any other is ``UnreadableDatabase``."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    if "_".join(name.split("_")[:2]) in _DAMAGE_CODES or "not a database" in str(exc) or "malformed" in str(exc):
        return [str(exc)]  # the primary code: SQLITE_CORRUPT_INDEX is damage too
    raise UnreadableDatabase(f"cannot read {what} {path}: SQLite says {str(exc)!r} ({name or 'no code'}), which is "
                             f"not damage; {_unreadable_hint(name)}") from None


def _unreadable_hint(code: str) -> str:
    if code.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return "another process holds a lock on it; try again when it is done"
    if code.startswith("SQLITE_IOERR"):
        return "the disk or file system reported an error reading it; check the medium, or read a copy"
    return "check that you may read the file and its folder, or read a copy of it from a writable folder"


def _remedy(what: str, path: Path) -> str:
    if what == "ledger":
        return (f"Move it away and restore the campaign into a new file from its export "
                f"(`closedloop ledger import CAMPAIGN.jsonl --db NEW.db`), or start a new ledger with another --db; "
                f"`sqlite3 {path} .recover` may salvage what is left")
    return "Restore it from a backup, or start a new ledger with another --db"
