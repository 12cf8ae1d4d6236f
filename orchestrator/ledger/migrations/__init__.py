"""Alembic migrations of the ledger schema, applied when a ledger is opened.

``upgrade(engine)`` brings a database to the newest revision. It is safe to call from many processes at once: on
SQLite the check and the upgrade run in one ``BEGIN IMMEDIATE`` transaction, on PostgreSQL under a transaction-level
advisory lock, and DDL is transactional on both, so a second opener waits and then finds the schema current.

A ledger created before Alembic managed it (tables present, no ``alembic_version``) is stamped at the first
revision, whose schema it has, and upgraded from there. A ledger at a revision this closedloop does not know was
written by a newer closedloop: it is refused with one line (``LedgerTooNew``) naming both versions, from the
``ledger_info`` row each migration leaves (``schema_written_by``). A read-only open never migrates
(``check_readable``).

Operators can run the same migrations with the ``alembic`` command::

    alembic -c "$(python -c 'import orchestrator.ledger.migrations as m; print(m.INI)')" -x db=postgresql://… upgrade head
"""

from __future__ import annotations

import time
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import OperationalError

from orchestrator.ledger.errors import LedgerNeedsMigration, LedgerTooNew
from vocabulary.domain import import_optional

__all__ = ["BASELINE", "HEAD", "INI", "SCRIPT_LOCATION", "alembic_config", "check_readable", "closedloop_version",
           "current_revision", "head_revision", "known_revisions", "recorded_writer", "upgrade", "upgrade_when_free"]

SCRIPT_LOCATION = Path(__file__).resolve().parent
INI = SCRIPT_LOCATION / "alembic.ini"
BASELINE = "0001"
"""The schema of ledgers written before Alembic (and of a fresh database after the first migration)."""
HEAD = "0006"
"""The newest revision in ``versions/`` (a test pins it to Alembic's own head). A ledger already there is opened
without importing Alembic, which would cost every command a quarter of a second."""

# Any fixed 64-bit number: the key of the advisory lock that serialises migrations on PostgreSQL.
_MIGRATION_LOCK_KEY = 0x636C6F7365646C6F  # "closedlo"
_PURPOSE = "opening a ledger (its schema migrations)"
_WRITER_KEY = "schema_written_by"


@cache
def closedloop_version() -> str:
    """This closedloop's version, as installed ("unknown" when run from a tree that was never installed)."""
    try:
        return version("closedloop")
    except PackageNotFoundError:
        return "unknown"


def alembic_config(connection: Connection | None = None):
    """An Alembic ``Config`` for these migrations, optionally bound to an open connection."""
    Config = import_optional("alembic.config", "", _PURPOSE).Config

    config = Config()
    config.set_main_option("script_location", str(SCRIPT_LOCATION))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@cache
def head_revision() -> str:
    """The newest revision shipped with this version of closedloop."""
    ScriptDirectory = import_optional("alembic.script", "", _PURPOSE).ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(connection: Connection) -> str | None:
    """The revision a database is at (None for an empty or pre-Alembic one)."""
    MigrationContext = import_optional("alembic.runtime.migration", "", _PURPOSE).MigrationContext

    return MigrationContext.configure(connection).get_current_revision()


@cache
def known_revisions() -> frozenset[str]:
    """Every revision shipped with this version of closedloop."""
    ScriptDirectory = import_optional("alembic.script", "", _PURPOSE).ScriptDirectory

    return frozenset(script.revision for script in ScriptDirectory.from_config(alembic_config()).walk_revisions())


def upgrade(engine: Engine, *, where: str | None = None) -> str:
    """Migrate the database behind ``engine`` to the head revision; return the revision it was at before.

    Raises ``LedgerTooNew`` (nothing written) when the database is at a revision this closedloop does not know;
    ``where`` names the ledger in that message (default: the engine's URL, password masked).
    """
    with engine.begin() as connection:  # SQLite: BEGIN IMMEDIATE (see ledger.store), so openers queue here
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK_KEY})
        if _recorded_revision(connection) == HEAD:
            return HEAD
        command = import_optional("alembic.command", "", _PURPOSE)
        before = current_revision(connection)
        _refuse_unknown(connection, before, where or _where(engine))
        if before == head_revision():
            return before
        config = alembic_config(connection)
        if before is None and inspect(connection).has_table("event"):
            command.stamp(config, BASELINE)  # written before Alembic: it has the baseline schema
            before = BASELINE
        command.upgrade(config, "head")
        _record_writer(connection)
        return before or "empty"


def check_readable(connection: Connection, *, where: str) -> None:
    """Check, reading only, that this closedloop can read the ledger behind ``connection`` as it is.

    Raises:
        LedgerTooNew: a newer closedloop wrote it.
        LedgerNeedsMigration: it is older than this closedloop's schema, or holds no ledger yet; reading it needs a
            migration, which a read-only open never does.
    """
    revision = _recorded_revision(connection)
    if revision == HEAD:
        return
    if revision is None and not inspect(connection).has_table("event"):
        raise LedgerNeedsMigration(f"{where} holds no ledger yet (no closedloop tables); run a campaign into it, or "
                                   f"pass the --db of an existing ledger")
    _refuse_unknown(connection, revision, where)
    raise LedgerNeedsMigration(
        f"ledger {where} is at schema revision {revision or 'from before Alembic'} and this closedloop "
        f"({closedloop_version()}) reads revision {HEAD}: it must be migrated first, which needs write access; open it "
        f"once where it can be written (any command, e.g. `closedloop ls --db COPY` on a writable copy)")


def recorded_writer(connection: Connection) -> str | None:
    """The closedloop version that brought the ledger's schema to its revision, if the ledger records it."""
    if not inspect(connection).has_table("ledger_info"):
        return None
    return connection.execute(text("SELECT value FROM ledger_info WHERE key = :key"), {"key": _WRITER_KEY}).scalar()


def _refuse_unknown(connection: Connection, revision: str | None, where: str) -> None:
    if revision is None or revision in known_revisions():
        return
    writer = recorded_writer(connection)
    raise LedgerTooNew(
        f"ledger {where} was written by a newer closedloop (schema revision {revision}"
        f"{f', closedloop {writer}' if writer else ''}); this closedloop ({closedloop_version()}) reads up to "
        f"revision {HEAD}: upgrade closedloop (pip install -U closedloop{f'=={writer}' if writer else ''}) to "
        f"read or write it; nothing was written to it")


def _record_writer(connection: Connection) -> None:
    connection.execute(text("DELETE FROM ledger_info WHERE key = :key"), {"key": _WRITER_KEY})
    connection.execute(text("INSERT INTO ledger_info (key, value) VALUES (:key, :value)"),
                       {"key": _WRITER_KEY, "value": closedloop_version()})


def _where(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=True)


def _recorded_revision(connection: Connection) -> str | None:
    """The revision in ``alembic_version``, read with plain SQL (None when the table is missing or holds several)."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    found = connection.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    return found[0] if len(found) == 1 else None


OPEN_ATTEMPTS = 8
"""Tries at migrating a ledger that SQLite reports locked; the waits between them double from 0.1 s to 2 s (about
7 s in all) on top of the busy timeout."""


def upgrade_when_free(engine: Engine, *, where: str | None = None) -> str:
    """``upgrade``, tried again while SQLite says the database is locked; other errors are raised at once.

    Several processes opening one new SQLite ledger at once (campaigns fanned out over Ray) race to create its
    schema. Most waits go through the busy timeout, but SQLite reports some lock conflicts at once (a WAL switch, or
    a read turned write meeting another writer), and those are worth another try rather than a failed campaign.
    """
    for attempt in range(OPEN_ATTEMPTS):
        try:
            return upgrade(engine, where=where)
        except OperationalError as exc:
            if "locked" not in str(exc.orig or exc) or attempt + 1 == OPEN_ATTEMPTS:
                raise
            time.sleep(min(0.1 * 2**attempt, 2.0))
    raise AssertionError("unreachable")
