"""The campaign's head, anchored outside the event table: a signed head in the manner of Certificate Transparency's
signed tree heads.

The hash chain (``ledger.chain``) shows that no event was changed, inserted or reordered, but a chain cut after its
last event is still a sound chain: deleting a campaign's newest events leaves nothing inside the event table to
notice. So every commit of a campaign's events also records its head, ``SignedHead(campaign_id, n_events,
head_hash, signed_at)``, somewhere else:

- for a SQLite ledger, the table ``closedloop_ledger_head`` of the checkpoint store beside it
  (``<db>.checkpoints.sqlite``, ``checkpoint_store_path``); for PostgreSQL, that table in the same database, apart
  from the event table; an in-memory ledger has no anchor;
- in the header of every export (``ledger.jsonl``).

With a secret in ``CLOSEDLOOP_LEDGER_KEY`` the head carries an HMAC-SHA256 over its fields (``is_keyed``), so that
whoever can write the ledger and its checkpoint store but does not hold the key cannot forge a head for a cut
chain. ``verify`` (``ledger.verify``) fails when the anchor is ahead of the events or names a hash that the event at
its seq does not have; a missing anchor is reported, not failed, because a ledger copied without its checkpoint
store is a normal thing to have. ``--expect-head HASH`` closes that gap: a head kept outside the machine.

The anchor only moves forward, and only from a head that agrees with the events: a process that finds the stored
anchor disagreeing with the ledger (events removed or rewritten) leaves it as it is, as evidence, and writes none.

Example:
    >>> head = SignedHead.sign("c1", 3, "ab" * 32, key=b"secret", signed_at="2026-01-01T00:00:00+00:00")
    >>> head.is_keyed, head.signature_problem(b"secret"), head.signature_problem(b"other") is not None
    (True, None, True)
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from orchestrator.ledger.chain import CHAIN_ALGORITHM
from orchestrator.ledger.integrity import check_sqlite_file, read_only_target

__all__ = ["ANCHOR_TABLE", "KEY_ENV", "AnchorStore", "HeadAnchor", "SignedHead", "anchor_store_for",
           "checkpoint_store_path", "key_id", "ledger_key"]

KEY_ENV = "CLOSEDLOOP_LEDGER_KEY"
"""The environment variable holding the secret that keys signed heads (any text; unset or empty: unkeyed)."""
ANCHOR_TABLE = "closedloop_ledger_head"
_HEAD_FORMAT = "closedloop.head"
_HEAD_VERSION = 1
_COLUMNS = ("campaign_id", "n_events", "head_hash", "signed_at", "is_keyed", "key_id", "mac")
_CREATE = (f"CREATE TABLE IF NOT EXISTS {ANCHOR_TABLE} (campaign_id TEXT PRIMARY KEY, n_events INTEGER NOT NULL, "
           "head_hash TEXT NOT NULL, signed_at TEXT NOT NULL, is_keyed INTEGER NOT NULL, key_id TEXT NOT NULL, "
           "mac TEXT NOT NULL)")
# Only forward: of two writers committing one after the other, the later head wins whichever anchors first.
_ADVANCE = (f"INSERT INTO {ANCHOR_TABLE} ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))}) "
            "ON CONFLICT (campaign_id) DO UPDATE SET "
            + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS[1:])
            + f" WHERE excluded.n_events > {ANCHOR_TABLE}.n_events")
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM {ANCHOR_TABLE} WHERE campaign_id = ?"
_PG_SETUP_LOCK = 0x636C686561640001  # the advisory lock under which the Postgres anchor table is created

log = logging.getLogger(__name__)


def ledger_key() -> bytes | None:
    """The configured signing secret (``CLOSEDLOOP_LEDGER_KEY``), or None."""
    value = os.environ.get(KEY_ENV, "")
    return value.encode() if value else None


@functools.lru_cache(maxsize=8)
def key_id(key: bytes) -> str:
    """A short public name for a key (an HMAC of a constant: it tells keys apart and reveals nothing of them)."""
    return hmac.new(key, b"closedloop ledger key id", hashlib.sha256).hexdigest()[:16]


@dataclass(frozen=True)
class SignedHead:
    """A campaign's head at one moment: its number of events (the head's seq), the head's hash, when it was signed,
    and, when keyed, the HMAC-SHA256 of those fields under the secret named by ``key_id``."""

    campaign_id: str
    n_events: int
    head_hash: str
    signed_at: str
    is_keyed: bool = False
    key_id: str = ""
    mac: str = ""

    @classmethod
    def sign(cls, campaign_id: str, n_events: int, head_hash: str, *, key: bytes | None,
             signed_at: str | None = None) -> SignedHead:
        """The head of ``campaign_id`` at ``n_events``, keyed with ``key`` when one is given."""
        at = signed_at or datetime.now(UTC).isoformat(timespec="seconds")
        head = cls(campaign_id, int(n_events), head_hash, at)
        if key is None:
            return head
        return cls(campaign_id, head.n_events, head_hash, at, True, key_id(key), head._mac(key))

    def _message(self) -> bytes:
        return json.dumps([_HEAD_FORMAT, _HEAD_VERSION, CHAIN_ALGORITHM, self.campaign_id, self.n_events,
                           self.head_hash, self.signed_at], ensure_ascii=False, separators=(",", ":")).encode()

    def _mac(self, key: bytes) -> str:
        return hmac.new(key, self._message(), hashlib.sha256).hexdigest()

    def signature_problem(self, key: bytes | None) -> str | None:
        """Why the signature does not hold under ``key``; None when it holds or cannot be checked (unkeyed, or no
        key given)."""
        if not self.is_keyed or key is None:
            return None
        if self.key_id != key_id(key):
            return (f"it was signed with another key (key id {self.key_id}; {KEY_ENV} has key id {key_id(key)}): "
                    "set the key it was signed with")
        if not hmac.compare_digest(self.mac, self._mac(key)):
            return "its signature does not match its fields: the head was altered after it was signed"
        return None

    def describe(self) -> str:
        """The head in words: seq and full hash."""
        return f"seq {self.n_events} (hash {self.head_hash})"

    def to_json(self) -> dict[str, Any]:
        return {"format": _HEAD_FORMAT, "version": _HEAD_VERSION, "chain": CHAIN_ALGORITHM, **asdict(self)}

    @classmethod
    def from_json(cls, data: Any) -> SignedHead:
        """A head as ``to_json`` wrote it; ``ValueError`` naming what is wrong otherwise."""
        if not isinstance(data, dict) or data.get("format") != _HEAD_FORMAT:
            raise ValueError(f"is not a {_HEAD_FORMAT!r} object")
        if data.get("version") != _HEAD_VERSION or data.get("chain") != CHAIN_ALGORITHM:
            raise ValueError(f"has version {data.get('version')!r} and chain {data.get('chain')!r}; this closedloop "
                             f"reads version {_HEAD_VERSION} over {CHAIN_ALGORITHM!r}")
        types = {"campaign_id": str, "n_events": int, "head_hash": str, "signed_at": str, "is_keyed": bool,
                 "key_id": str, "mac": str}
        for name, kind in types.items():
            value = data.get(name)
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise ValueError(f"field {name!r} is {value!r}, not a {kind.__name__}")
        return cls(**{name: data[name] for name in types})

    @classmethod
    def from_row(cls, row: tuple) -> SignedHead:
        campaign_id, n_events, head_hash, signed_at, is_keyed, key_id_, mac = row
        return cls(campaign_id, int(n_events), head_hash, signed_at, bool(is_keyed), key_id_, mac)

    def row(self) -> tuple:
        return (self.campaign_id, self.n_events, self.head_hash, self.signed_at, int(self.is_keyed), self.key_id,
                self.mac)


def checkpoint_store_path(database: str | Path) -> Path:
    """The checkpoint store beside a SQLite ledger file: ``<db>.checkpoints.sqlite`` (as ``loop.campaign``'s
    ``checkpoint_path``; the ledger floor cannot import the loop, so the rule is stated here too)."""
    db = Path(database)
    return db.with_name(db.name + ".checkpoints.sqlite")


class AnchorStore(Protocol):
    """Where a ledger's signed heads are kept, outside its event table."""

    where: str

    def read(self, campaign_id: str) -> SignedHead | None:
        """The stored head of a campaign (None when none); raises ``OSError``/database errors when unreadable."""

    def advance(self, head: SignedHead) -> None:
        """Store ``head`` unless the stored one is further on."""

    def close(self) -> None: ...


class SqliteAnchorStore:
    """The ``closedloop_ledger_head`` table of the checkpoint store beside a SQLite ledger file."""

    def __init__(self, path: Path):
        self.path = path
        self.where = str(path)
        self._writer: sqlite3.Connection | None = None

    def read(self, campaign_id: str) -> SignedHead | None:
        if self._writer is not None:
            return self._select(self._writer, campaign_id)
        if not self.path.exists() or self.path.stat().st_size == 0:
            return None
        # read-only and without creating anything beside it: verify and export may read an archive
        conn = sqlite3.connect(read_only_target(self.path, what="checkpoint store"), uri=True, timeout=30.0)
        try:
            return self._select(conn, campaign_id)
        finally:
            conn.close()

    @staticmethod
    def _select(conn: sqlite3.Connection, campaign_id: str) -> SignedHead | None:
        has_table = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                                 (ANCHOR_TABLE,)).fetchone()
        found = conn.execute(_SELECT, (campaign_id,)).fetchone() if has_table else None
        return None if found is None else SignedHead.from_row(found)

    def advance(self, head: SignedHead) -> None:
        if self._writer is None:
            check_sqlite_file(self.path, what="checkpoint store")  # never write into a damaged file
            conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30.0, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode=WAL")  # as LangGraph's saver opens it
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute(_CREATE)
            except BaseException:
                conn.close()
                raise
            self._writer = conn
        self._writer.execute(_ADVANCE, head.row())

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


class PostgresAnchorStore:
    """The ``closedloop_ledger_head`` table in a PostgreSQL ledger's database (not the event table)."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.where = f"table {ANCHOR_TABLE} of {engine.url.render_as_string(hide_password=True)}"
        self._is_set_up = False

    def read(self, campaign_id: str) -> SignedHead | None:
        with self.engine.connect() as conn:
            if conn.execute(text(f"SELECT to_regclass('{ANCHOR_TABLE}')")).scalar() is None:
                return None
            found = conn.execute(text(_SELECT.replace("?", ":cid")), {"cid": campaign_id}).fetchone()
        return None if found is None else SignedHead.from_row(tuple(found))

    def advance(self, head: SignedHead) -> None:
        with self.engine.begin() as conn:
            if not self._is_set_up:  # concurrent CREATE TABLE IF NOT EXISTS can collide in PostgreSQL's catalog
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_SETUP_LOCK})
                conn.execute(text(_CREATE))
            names = [f"p{i}" for i in range(len(_COLUMNS))]
            sql = _ADVANCE.replace(", ".join("?" * len(_COLUMNS)), ", ".join(f":{n}" for n in names))
            conn.execute(text(sql), dict(zip(names, head.row(), strict=True)))
        self._is_set_up = True

    def close(self) -> None:
        pass


def _sqlite_file(engine: Engine) -> Path | None:
    """The file a SQLite engine's main database lives in, as SQLite itself names it (None in memory): this holds
    however the path was spelled in the URL."""
    with engine.connect() as conn:  # the driver's cursor: SQLAlchemy's autobegin would take the write lock
        cursor = conn.connection.cursor()
        try:
            rows = cursor.execute("PRAGMA database_list").fetchall()
        finally:
            cursor.close()
    found = next((row[2] for row in rows if row[1] == "main"), "")
    return Path(found) if found else None


def anchor_store_for(engine: Engine) -> AnchorStore | None:
    """The anchor store of a ledger's engine: beside a SQLite file, in a PostgreSQL database, none in memory."""
    if engine.dialect.name == "postgresql":
        return PostgresAnchorStore(engine)
    if engine.dialect.name == "sqlite":
        database = _sqlite_file(engine)
        return None if database is None else SqliteAnchorStore(checkpoint_store_path(database))
    return None


_ANCHOR_ERRORS = (OSError, sqlite3.Error, SQLAlchemyError, ValueError)


class HeadAnchor:
    """Moves a ledger's anchors on as it commits (``Ledger.append_many`` calls ``committed`` after each commit).

    A commit that extends the head this object anchored last is anchored straight away: one upsert. Otherwise (the
    first commit of a campaign by this process, or another writer came between) the stored anchor is read first and
    checked against the events; one that disagrees (its seq is past the ledger's head, the event at its seq has
    another hash, or its signature fails) is kept as evidence for ``ledger verify`` and not overwritten. An anchor
    store that cannot be written (a read-only or damaged checkpoint store) costs the anchor, never the commit.
    """

    def __init__(self, store_factory: Callable[[], AnchorStore | None]):
        self._factory = store_factory
        self._store: AnchorStore | None = None
        self._has_store = False
        self._lock = threading.Lock()
        self._anchored: dict[str, tuple[int, str] | None] = {}
        """campaign -> the head this object anchored last; None: not anchored by this object (disputed or failed)"""

    @property
    def store(self) -> AnchorStore | None:
        """The anchor store (resolved on first use; None for an in-memory ledger)."""
        if not self._has_store:
            self._store, self._has_store = self._factory(), True
        return self._store

    def committed(self, campaign_id: str, prior: tuple[int, str], head: tuple[int, str],
                  hash_at: Callable[[int], str | None]) -> None:
        """Anchor ``head`` (seq, hash) of ``campaign_id``, whose commit extended ``prior`` (seq, hash);
        ``hash_at(seq)`` reads the stored hash of the campaign's event at ``seq``."""
        with self._lock:
            try:
                store = self.store
            except _ANCHOR_ERRORS as exc:
                self._skip(campaign_id, f"its anchor store cannot be found ({exc})")
                return
            if store is None or (campaign_id in self._anchored and self._anchored[campaign_id] is None):
                return
            key = ledger_key()
            if self._anchored.get(campaign_id) != prior:
                try:
                    stored = store.read(campaign_id)
                except _ANCHOR_ERRORS as exc:
                    self._skip(campaign_id, f"its anchor in {store.where} cannot be read ({exc})")
                    return
                problem = None if stored is None else disagreement(stored, head, hash_at, key)
                if problem is not None:
                    self._skip(campaign_id, f"its anchor in {store.where} disagrees with the ledger ({problem}); it "
                                            "is kept as evidence and not moved on: run `closedloop ledger verify`")
                    return
            try:
                store.advance(SignedHead.sign(campaign_id, head[0], head[1], key=key))
            except _ANCHOR_ERRORS as exc:
                self._skip(campaign_id, f"its anchor in {store.where} cannot be written ({exc})")
                return
            self._anchored[campaign_id] = head

    def _skip(self, campaign_id: str, why: str) -> None:
        self._anchored[campaign_id] = None
        log.warning("the head of campaign %r is not anchored: %s", campaign_id, why)

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()


def disagreement(stored: SignedHead, head: tuple[int, str], hash_at: Callable[[int], str | None],
                 key: bytes | None) -> str | None:
    """Why a stored anchor disagrees with the ledger's events; None when it agrees. ``head`` (seq, hash) is a head
    this process just committed, ``hash_at`` reads any other: the stored anchor may be further on than ``head`` when
    another writer committed and anchored since, and agrees then as long as the ledger holds its event."""
    found = head[1] if stored.n_events == head[0] else hash_at(stored.n_events)
    if found is None:
        return f"it records {stored.describe()}, but the ledger has no event at seq {stored.n_events}"
    if found != stored.head_hash:
        return f"it records {stored.describe()}, but the event at seq {stored.n_events} has hash {found}"
    return stored.signature_problem(key)
