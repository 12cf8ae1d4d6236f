"""Where a ledger lives: a ``--db`` value read as a file path or a database URL, and the engine that opens it.

A path is a path: only a string that starts with a URL scheme (``postgresql://``, ``sqlite:///``) is read as a URL.
A SQLite URL is built with ``URL.create`` (the path quoted), so ``?``, ``#``, ``%20``, ``@`` or ``:`` in a file name
stay in it; the file itself is ``Ledger.path``, never a prefix stripped off a URL string. A read-only engine writes
nothing to the file or beside it (``ledger.integrity.read_only_target``).

Example:
    >>> database_url("/runs/screen?1 #2.db")
    'sqlite:////runs/screen%3F1 %232.db'
    >>> str(sqlite_file(database_url("/runs/screen?1 #2.db")))
    '/runs/screen?1 #2.db'
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

from sqlalchemy import event as sa_event
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError
from sqlmodel import create_engine

from orchestrator.ledger.errors import LedgerError
from orchestrator.ledger.integrity import (
    check_sqlite_file,
    is_writable,
    read_only_target,
)

__all__ = ["configure_sqlite", "create_server_engine", "database_url", "is_postgres_url", "is_url", "parse_url",
           "safe_url", "sqlite_file", "sqlite_file_engine"]

_POSTGRES_HINT = "pip install 'closedloop[postgres]'"
_URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_READ_ONLY_COMMANDS = "ls, show, ledger verify, ledger export, report, replay"


def is_postgres_url(db: str | Path | URL) -> bool:
    text_ = str(db) if not isinstance(db, URL) else db.drivername
    return text_.split(":", 1)[0].split("+", 1)[0] in {"postgresql", "postgres"}


def is_url(db: str | Path | URL) -> bool:
    """Whether ``db`` is a database URL (it starts with a scheme, ``postgresql://``); anything else is a file path.

    Example:
        >>> is_url("postgresql://db.example/lab"), is_url("runs/a?b#c.db"), is_url(Path("x.db"))
        (True, False, False)
    """
    return isinstance(db, URL) or (isinstance(db, str) and _URL_SCHEME.match(db) is not None)


def sqlite_file(db: str | Path) -> Path | None:
    """The SQLite file a ``--db`` value names (a path, or a ``sqlite:///`` URL), resolved; None for ``:memory:`` and
    for a server's URL.

    Example:
        >>> str(sqlite_file("/runs/screen?1 #2 %20.db"))
        '/runs/screen?1 #2 %20.db'
    """
    if not is_url(db):
        return None if str(db) == ":memory:" else Path(db).expanduser().resolve()
    url = parse_url(str(db))
    if url.get_backend_name() != "sqlite":
        return None
    if "?" in str(db):  # SQLAlchemy drops a bare ``?x``; either way it is not part of the file's name
        raise LedgerError(f"the SQLite URL {safe_url(str(db))!r} has a query part ({str(db).split('?', 1)[1]}), "
                          f"which closedloop does not read; pass the ledger's file path as it is (--db PATH)")
    return None if url.database in (None, "", ":memory:") else Path(url.database).expanduser().resolve()


def database_url(db: str | Path) -> str:
    """Turn a path (or ``:memory:``) into an SQLAlchemy URL, the path quoted so that it reads back as itself.
    ``postgresql://`` and ``postgres://`` URLs get the psycopg 3 driver (``postgresql+psycopg://``); other URLs
    pass through unchanged.

    Example:
        >>> database_url("postgres://me:pw@db.example/lab")
        'postgresql+psycopg://me:pw@db.example/lab'
        >>> database_url("/runs/a?b.db")
        'sqlite:////runs/a%3Fb.db'
    """
    text_ = str(db)
    if not is_url(db):
        path = sqlite_file(db)
        return "sqlite://" if path is None else URL.create("sqlite", database=str(path)).render_as_string()
    if not is_postgres_url(text_):
        return text_
    url = parse_url(text_)
    if url.drivername in {"postgresql", "postgres"}:
        url = url.set(drivername="postgresql+psycopg")
    return url.render_as_string(hide_password=False)


def safe_url(db: str | Path | URL) -> str:
    """A database URL fit for messages and logs: the password replaced by ``***``.

    Example:
        >>> safe_url("postgresql://me:pw@db.example/lab")
        'postgresql://me:***@db.example/lab'
    """
    if isinstance(db, URL):
        return db.render_as_string(hide_password=True)
    if "://" not in str(db):
        return str(db)
    try:
        return make_url(str(db)).render_as_string(hide_password=True)
    except ArgumentError:
        return "<unparseable database URL>"


def parse_url(text_: str) -> URL:
    try:
        return make_url(text_)
    except ArgumentError:
        raise LedgerError(f"{safe_url(text_)!r} is not a database URL; give a file path or e.g. "
                          "postgresql://user:password@127.0.0.1:5432/closedloop") from None


def sqlite_file_engine(path: Path, *, read_only: bool) -> Engine:
    """An engine on a SQLite file, named by ``URL.create`` (the path is never parsed out of a URL string again).

    Read-only: a folder this process may write gets a plain connection made ``query_only`` (SQLite then removes the
    -wal and -shm it makes when the last connection closes); elsewhere ``read_only_target`` reads it writing nothing.
    """
    if not path.parent.exists():
        raise LedgerError(f"database directory {path.parent} does not exist; create it or pick another --db")
    url = URL.create("sqlite", database=str(path))
    if read_only:
        if not path.is_file():
            raise LedgerError(f"no ledger database at {path}; run a campaign first or pass --db PATH")
        check_sqlite_file(path, what="ledger", read_only=True)
        target, is_uri = (str(path), False) if is_writable(path) else (read_only_target(path), True)
        return create_engine(url, creator=lambda: sqlite3.connect(target, uri=is_uri, timeout=30,
                                                                  check_same_thread=False))
    if not is_writable(path):
        raise LedgerError(f"ledger {path} cannot be written here (a read-only file, folder or file system), and this "
                          f"command writes to it: copy the ledger (with its -wal and -shm files, if any) to a writable "
                          f"folder and pass that --db, or use a command that only reads ({_READ_ONLY_COMMANDS})")
    check_sqlite_file(path, what="ledger")  # before SQLite may write to it (WAL, migrations)
    return create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})


def create_server_engine(url: str, *, read_only: bool = False) -> Engine:
    """An engine for a database server. PostgreSQL sessions run in UTC, so event times read back unchanged; a
    read-only one's transactions are read-only."""
    parsed = parse_url(url)
    connect_args: dict[str, Any] = {}
    if parsed.get_backend_name() == "postgresql":
        connect_args["options"] = "-c timezone=UTC" + (" -c default_transaction_read_only=on" if read_only else "")
    try:
        return create_engine(parsed, pool_pre_ping=True, connect_args=connect_args)
    except ModuleNotFoundError as exc:
        hint = _POSTGRES_HINT if parsed.get_backend_name() == "postgresql" else f"install the {exc.name!r} driver"
        raise LedgerError(f"the database driver for {safe_url(parsed)} is not installed ({exc.name}); {hint}") from None
    except ArgumentError as exc:
        raise LedgerError(f"cannot use {safe_url(parsed)} as a ledger database: {exc}") from None


def configure_sqlite(engine: Engine, *, is_file: bool, read_only: bool = False) -> None:
    """WAL, a busy timeout, and BEGIN IMMEDIATE so that seq allocation cannot race between writers; read-only: no
    WAL switch (it writes the file header), ``query_only``, and plain (deferred) transactions that take no write
    lock."""

    @sa_event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):  # pragma: no cover - exercised by every test
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        # The busy timeout first: switching a new file to WAL waits for a lock too, and another process may hold it
        # for seconds while it creates the schema (several campaigns opening one new ledger at once).
        cursor.execute("PRAGMA busy_timeout=30000")
        if read_only:
            cursor.execute("PRAGMA query_only=ON")
        elif is_file:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @sa_event.listens_for(engine, "begin")
    def _on_begin(conn):  # pragma: no cover
        conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")
