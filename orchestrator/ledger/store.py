"""The campaign ledger: an append-only event log with projections kept in the same transaction.

SQLite by default (WAL, ``BEGIN IMMEDIATE``), PostgreSQL by URL (``postgresql://user:pass@host/db``, through
psycopg 3). The schema is managed by Alembic (``orchestrator.ledger.migrations``) and migrated when a ledger is opened.

A path is a path: only a string that starts with a URL scheme (``postgresql://``, ``sqlite:///``) is read as a URL,
and a SQLite URL is built with ``URL.create``, so ``?``, ``#``, ``%20`` or ``@`` in a file name stay in it; the file is
``Ledger.path``, never a prefix stripped off the URL. ``Ledger.open(db, read_only=True)`` reads without writing
anything, on read-only media too (``ledger.integrity.read_only_target``), and never migrates. A full disk is
``LedgerFull``: one line naming the ledger, the write refused whole.

Reads are incremental: the event table is append-only and every projection row records the seq of the event that
last changed it (``updated_seq``), so a ``Ledger`` keeps what it has read and asks the database only for what is
newer. Sequence numbers are allocated under a per-campaign lock and committed in order, so whatever a reader can see
is always a prefix of the campaign; other writers (another worker, another process) are picked up on the next read.

Example:
    >>> from vocabulary.events import CampaignStarted
    >>> ledger = Ledger.open(":memory:")
    >>> e = ledger.append("c1", CampaignStarted(name="demo", seed=0, spec={}), key="start")
    >>> (e.seq, e.type), ledger.append("c1", CampaignStarted(name="demo", seed=0, spec={}), key="start").seq
    ((1, 'CampaignStarted'), 1)
"""

from __future__ import annotations

import bisect
import functools
import heapq
import json
import operator
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from sqlalchemy import insert, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import StaticPool
from sqlmodel import Session, create_engine, select

from orchestrator.ledger.anchor import HeadAnchor, anchor_store_for
from orchestrator.ledger.chain import GENESIS, event_hash
from orchestrator.ledger.driver import column_names, driver_read, row_views
from orchestrator.ledger.errors import (
    LedgerConflict,
    LedgerError,
    full_disk_refused,
)
from orchestrator.ledger.location import (
    configure_sqlite,
    create_server_engine,
    database_url,
    is_postgres_url,
    is_url,
    parse_url,
    safe_url,
    sqlite_file,
    sqlite_file_engine,
)
from orchestrator.ledger.projections import ProjectionBatch
from orchestrator.ledger.tables import (
    CampaignRow,
    CandidateRow,
    EventRow,
    LabJobRow,
    LedgerNoteRow,
    ObservationRow,
    ScoreRow,
)
from vocabulary.events import Event, EventPayload

__all__ = ["Ledger", "LedgerConflict", "LedgerError", "database_url", "is_postgres_url", "is_url",
           "safe_url", "sqlite_file"]

_IN_CHUNK = 500
_HEAD_SEQ_SQL = "SELECT max(seq) FROM event WHERE campaign_id = ?"
_EVENT_SELECT = "seq, type, schema_version, payload, idempotency_key, actor, at"
_TYPED_EVENTS_SQL = f"SELECT {_EVENT_SELECT} FROM event WHERE campaign_id = ? AND type = ? AND seq > ? ORDER BY seq"
_LAST_EVENT_SQL = "SELECT seq, hash FROM event WHERE campaign_id = ? ORDER BY seq DESC LIMIT 1"
_EVENTS_BY_KEY_SQL = f"SELECT {_EVENT_SELECT} FROM event WHERE idempotency_key IN ({{marks}})"


def _stored_time(value: Any) -> datetime:
    """An event time as the driver returns it: a datetime (PostgreSQL) or SQLite's ISO text."""
    return value if isinstance(value, datetime) else datetime.fromisoformat(value)


@functools.cache
def _row_key(table: type) -> Callable[[Any], tuple]:
    """The primary key of a row view, as a tuple."""
    positions = [column_names(table).index(c.name) for c in table.__table__.primary_key.columns]
    return (lambda row, at=positions[0]: (row[at],)) if len(positions) == 1 else operator.itemgetter(*positions)


def _changed_rows_sql(table: type) -> str:
    return (f"SELECT {', '.join(column_names(table))} FROM {table.__tablename__} "
            "WHERE campaign_id = ? AND updated_seq > ?")


_EVENT_COLUMNS = (EventRow.seq, EventRow.type, EventRow.schema_version, EventRow.payload, EventRow.idempotency_key,
                  EventRow.actor, EventRow.at)


def _canonical(payload: EventPayload) -> str:
    return json.dumps(payload.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))


def _naive_utc(moment: datetime) -> datetime:
    """Event times read back as naive UTC on every backend (SQLite stores no offset; PostgreSQL returns one)."""
    return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo is not None else moment


class _EventValues(NamedTuple):
    """One event row as written (the columns ``event_from_row`` reads, and its hash)."""

    seq: int
    type: str
    schema_version: int
    payload: str
    idempotency_key: str
    actor: str
    at: datetime
    hash: str


def event_from_row(campaign_id: str, row: Any) -> Event:
    # The row was validated when it was written; constructing without validation keeps long reads cheap.
    return Event.model_construct(campaign_id=campaign_id, seq=row.seq, type=row.type, schema_version=row.schema_version,
                                 payload=json.loads(row.payload), idempotency_key=row.idempotency_key, actor=row.actor,
                                 at=_naive_utc(row.at))


@dataclass
class _TypeCache:
    """The events of one type of one campaign read so far, in seq order, and the campaign's head seq then."""

    events: list[Event] = field(default_factory=list)
    seqs: list[int] = field(default_factory=list)
    head: int = -1


@dataclass
class _RowCache:
    """The projection rows of one table of one campaign, and the highest ``updated_seq`` read."""

    seen_seq: int = -1
    rows: dict[tuple, Any] = field(default_factory=dict)
    ordered: tuple | None = None
    head: int = -1
    """The campaign's head seq when the rows were last refreshed: while it stands, nothing can have changed."""


class Ledger:
    """Append-only event store plus projections, on SQLite (WAL) by default or PostgreSQL.

    Idempotency keys are scoped to the campaign: ``append(cid, payload, key=k)`` stores ``f"{cid}:{k}"``. Appending
    an existing key with the same payload returns the stored event; with a different payload it raises
    ``LedgerConflict``, which is how a non-deterministic resume is caught.

    Events and projection rows returned by the read methods are shared with the ledger's read cache: treat them as
    read-only.
    """

    def __init__(self, engine: Engine, url: str | None = None, *, migrate: bool = True, path: Path | None = None,
                 read_only: bool = False):
        self.engine = engine
        self.path = path
        """The SQLite file (resolved), or None for ``:memory:`` and a server: what the checkpoints and leases sit
        beside."""
        self.is_read_only = read_only
        try:
            if read_only:
                from orchestrator.ledger.migrations import check_readable

                with self._reading_schema(), engine.connect() as connection:
                    check_readable(connection, where=self.location)
            elif migrate:
                from orchestrator.ledger.migrations import upgrade_when_free

                with full_disk_refused(self.location), self._reading_schema():
                    upgrade_when_free(engine, where=self.location)
        except BaseException:
            engine.dispose()  # a refused ledger keeps no connection (nor the -wal and -shm one would hold)
            raise
        self._lock = threading.RLock()
        self.anchor = HeadAnchor(lambda: anchor_store_for(engine))  # the head, kept outside the event table
        self._events: dict[tuple[str, str], _TypeCache] = {}
        self._rows: dict[tuple[type, str, Any], _RowCache] = {}

    @property
    def url(self) -> str:
        """The database URL with any password masked (safe to print)."""
        return self.engine.url.render_as_string(hide_password=True)

    @property
    def location(self) -> str:
        """What names this ledger in a message or a ``--db``: its file path, ``:memory:``, or its URL with the
        password masked."""
        if self.path is not None:
            return str(self.path)
        return ":memory:" if self.url == "sqlite://" else self.url

    @property
    def is_postgres(self) -> bool:
        return self.engine.dialect.name == "postgresql"

    @classmethod
    def open(cls, db: str | Path, *, migrate: bool = True, read_only: bool = False) -> Ledger:
        """Open (creating and migrating if needed) the ledger at a path, ``:memory:`` or a database URL.

        A SQLite file that is not a database or fails ``PRAGMA quick_check`` is refused (``CorruptDatabase``) and left
        as it is (``ledger.integrity``).

        ``read_only=True`` opens an existing ledger for reading only: nothing is written to it or beside it (no
        migration, no -wal or -shm left behind), which works on read-only media (a snapshot, an archive, a read-only
        mount). A ledger at an older schema revision is then ``LedgerNeedsMigration``; one from a newer closedloop
        is ``LedgerTooNew`` either way.
        """
        if not is_url(db) or is_url(db) and parse_url(str(db)).get_backend_name() == "sqlite":
            path = sqlite_file(db)
            if path is None:
                engine = create_engine("sqlite://", connect_args={"check_same_thread": False}, poolclass=StaticPool)
            else:
                engine = sqlite_file_engine(path, read_only=read_only)
            configure_sqlite(engine, is_file=path is not None, read_only=read_only)
            return cls(engine, migrate=migrate, path=path, read_only=read_only)
        return cls(create_server_engine(database_url(db), read_only=read_only), migrate=migrate, read_only=read_only)

    @contextmanager
    def _reading_schema(self) -> Iterator[None]:
        try:
            yield
        except OperationalError as exc:
            raise LedgerError(f"cannot open the ledger database {self.location}: {exc.orig or exc}") from None

    def _refuse_if_read_only(self) -> None:
        if self.is_read_only:
            raise LedgerError(f"ledger {self.location} was opened read-only (for a command that only reads); open "
                              f"it with Ledger.open(db) to write to it")

    def close(self) -> None:
        self.anchor.close()
        self.engine.dispose()

    # ----------------------------------------------------------------------------------------------- writing
    def append(self, campaign_id: str, payload: EventPayload, *, key: str, actor: str = "orchestrator") -> Event:
        """Append one event (or return the stored one with the same key)."""
        return self.append_many(campaign_id, [(payload, key)], actor=actor)[0]

    def append_many(
        self,
        campaign_id: str,
        items: Sequence[tuple[EventPayload, str] | tuple[EventPayload, str, str, datetime]],
        *,
        actor: str = "orchestrator",
        written: list[Event] | None = None,
    ) -> list[Event]:
        """Append several events in one transaction, projections included. All or nothing.

        ``written``, when given, receives the events this call committed (not those already stored under their
        keys): what a writer racing another with the same events (two imports of one file) really added.

        An item is ``(payload, key)``, recorded with ``actor`` and the current time, or ``(payload, key, actor, at)``,
        which keeps an envelope recorded elsewhere (a JSONL import).

        Concurrent writers to one campaign (threads, processes, workers on other machines) are serialised: SQLite by
        ``BEGIN IMMEDIATE``, PostgreSQL by a transaction-level advisory lock on the campaign id. Sequence numbers are
        therefore gap-free and committed in order, and an idempotency key cannot be taken twice.
        """
        if not items:
            return []
        self._refuse_if_read_only()
        out: list[Event] = []
        with full_disk_refused(self.location, campaign_id), self.engine.begin() as conn:  # SQLite: BEGIN IMMEDIATE (configure_sqlite)
            self._lock_campaign(conn, campaign_id)
            last = driver_read(conn, _LAST_EVENT_SQL, (campaign_id,), is_postgres=self.is_postgres)
            next_seq, previous_hash = (last[0][0] + 1, last[0][1]) if last else (1, GENESIS)
            prior = (next_seq - 1, previous_hash)
            full_keys = [f"{campaign_id}:{item[1]}" for item in items]
            existing = self._existing(conn, full_keys)
            rows: list[dict[str, Any]] = []
            folds: list[tuple[int, EventPayload]] = []
            for (payload, _key, *envelope), full_key in zip(items, full_keys, strict=True):
                canonical = _canonical(payload)
                stored = existing.get(full_key)
                if stored is not None:
                    _check_same(stored, payload.type, canonical, full_key)
                    out.append(event_from_row(campaign_id, stored))
                    continue
                item_actor, item_at = envelope if envelope else (actor, datetime.now(UTC))
                row = _EventValues(seq=next_seq, type=payload.type, schema_version=payload.schema_version,
                                   payload=canonical, idempotency_key=full_key, actor=item_actor, at=item_at,
                                   hash=event_hash(previous_hash, campaign_id, next_seq, payload.type,
                                                   payload.schema_version, canonical, full_key, item_actor, item_at))
                rows.append({"campaign_id": campaign_id, **row._asdict()})
                folds.append((next_seq, payload))
                existing[full_key] = row
                out.append(event_from_row(campaign_id, row))
                next_seq, previous_hash = next_seq + 1, row.hash
            if rows:
                conn.execute(insert(EventRow.__table__), rows)
                batch = ProjectionBatch(campaign_id, conn)
                batch.prefetch(payload for _, payload in folds)
                for seq, payload in folds:
                    batch.apply(seq, payload)
                batch.write()
        if rows:  # after the commit: an anchor never runs ahead of committed events (ledger.anchor)
            self.anchor.committed(campaign_id, prior, (rows[-1]["seq"], rows[-1]["hash"]),
                                  functools.partial(self.event_hash_at, campaign_id))
        if written is not None:
            written.extend({e.seq: e for e in out if e.seq > prior[0]}.values())
        return out

    def event_hash_at(self, campaign_id: str, seq: int) -> str | None:
        """The stored hash of one event of a campaign (None when it has no event at ``seq``)."""
        found = self._read("SELECT hash FROM event WHERE campaign_id = ? AND seq = ?", (campaign_id, seq))
        return found[0][0] if found else None

    def _lock_campaign(self, conn: Connection, campaign_id: str) -> None:
        if self.is_postgres:
            conn.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:cid, 0))"), {"cid": campaign_id})
        # SQLite: the transaction began with BEGIN IMMEDIATE, which already excludes other writers.

    def _existing(self, conn: Connection, full_keys: list[str]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        unique = list(dict.fromkeys(full_keys))
        for start in range(0, len(unique), _IN_CHUNK):
            chunk = unique[start:start + _IN_CHUNK]
            sql = _EVENTS_BY_KEY_SQL.format(marks=", ".join("?" * len(chunk)))
            for raw in driver_read(conn, sql, chunk, is_postgres=self.is_postgres):
                row = _EventValues(*raw[:6], _stored_time(raw[6]), "")
                found[row.idempotency_key] = row
        return found

    # ----------------------------------------------------------------------------------------------- reading
    def events(
        self, campaign_id: str, *, types: Iterable[str] | None = None, after_seq: int = 0
    ) -> list[Event]:
        """Events of a campaign in seq order, optionally filtered by type.

        Typed reads are incremental: only events newer than the last read of that type are fetched, and what was
        read stays cached. The campaign loop therefore reads only low-volume types this way; per-experiment facts
        come from the projection rows (``lab_jobs``) or the uncached ``last_event``/``count_events``/``events_at``.
        """
        if types is None:
            return self._query_events(campaign_id, after_seq=after_seq)
        lists = []
        with self._lock:
            for event_type in dict.fromkeys(types):
                cache = self._refresh_type(campaign_id, event_type)
                start = bisect.bisect_right(cache.seqs, after_seq)
                lists.append(cache.events[start:])
        if len(lists) == 1:
            return lists[0]
        return list(heapq.merge(*lists, key=lambda e: e.seq))

    def _read(self, sql: str, params: Sequence[Any]) -> list[tuple]:
        """Rows of one read-only statement (``?`` placeholders) straight from the driver's cursor.

        The loop's hot reads go this way: SQLAlchemy's statement machinery costs about 150 us a call here, the
        driver 10 us, and on SQLite a read outside a SQLAlchemy transaction does not take the write lock that
        ``BEGIN IMMEDIATE`` would.
        """
        with self.engine.connect() as conn:
            return driver_read(conn, sql, params, is_postgres=self.is_postgres)

    def head_seq(self, campaign_id: str) -> int:
        """The campaign's newest seq (0 before its first event): one index lookup, which read caches check before
        they query, since nothing of a campaign changes without a new event."""
        return self._read(_HEAD_SEQ_SQL, (campaign_id,))[0][0] or 0

    def _refresh_type(self, campaign_id: str, event_type: str) -> _TypeCache:
        cache = self._events.setdefault((campaign_id, event_type), _TypeCache())
        head = self.head_seq(campaign_id)
        if head == cache.head:
            return cache
        cache.head = head
        after = cache.seqs[-1] if cache.seqs else 0
        for raw in self._read(_TYPED_EVENTS_SQL, (campaign_id, event_type, after)):
            row = _EventValues(*raw[:6], _stored_time(raw[6]), "")
            cache.events.append(event_from_row(campaign_id, row))
            cache.seqs.append(row.seq)
        return cache

    def _event_rows(self, campaign_id: str, where: str, params: Sequence[Any], *, tail: str = "ORDER BY seq"
                    ) -> list[Event]:
        """Events of a campaign matching ``where`` (``?`` placeholders), read through the driver."""
        sql = f"SELECT {_EVENT_SELECT} FROM event WHERE campaign_id = ? AND {where} {tail}"
        return [event_from_row(campaign_id, _EventValues(*raw[:6], _stored_time(raw[6]), ""))
                for raw in self._read(sql, (campaign_id, *params))]

    def _query_events(self, campaign_id: str, *, after_seq: int = 0) -> list[Event]:
        return self._event_rows(campaign_id, "seq > ?", (after_seq,))

    def read_events(self, campaign_id: str, types: Iterable[str], *, after_seq: int = 0) -> list[Event]:
        """Events of the given types newer than ``after_seq``, in seq order, without keeping them in the read cache
        (for readers that fold them into something smaller)."""
        types = list(dict.fromkeys(types))
        return self._event_rows(campaign_id, f"type IN ({', '.join('?' * len(types))}) AND seq > ?",
                                (*types, after_seq))

    def last_event(self, campaign_id: str, event_type: str) -> Event | None:
        """The newest event of one type (not cached: one indexed query)."""
        found = self._event_rows(campaign_id, "type = ?", (event_type,), tail="ORDER BY seq DESC LIMIT 1")
        return found[0] if found else None

    def iteration_events(self, campaign_id: str, event_type: str, iteration: int) -> list[Event]:
        """Events of one type whose payload's ``iteration`` is ``iteration``, in seq order (not cached; the JSON
        field is read by the database: ``json_extract`` on SQLite, ``->>`` on PostgreSQL)."""
        field_ = "CAST(payload::jsonb ->> 'iteration' AS INTEGER)" if self.is_postgres else \
            "json_extract(payload, '$.iteration')"
        return self._event_rows(campaign_id, f"type = ? AND {field_} = ?", (event_type, iteration))

    def count_events(self, campaign_id: str, event_type: str) -> int:
        """How many events of one type a campaign has (not cached)."""
        return self._read("SELECT count(*) FROM event WHERE campaign_id = ? AND type = ?",
                          (campaign_id, event_type))[0][0]

    def events_at(self, campaign_id: str, seqs: Iterable[int]) -> list[Event]:
        """The events at the given seqs, in seq order (not cached)."""
        wanted = sorted(set(seqs))
        out: list[Event] = []
        with self.engine.connect() as conn:
            for start in range(0, len(wanted), _IN_CHUNK):
                rows = conn.execute(select(*_EVENT_COLUMNS).where(
                    EventRow.campaign_id == campaign_id, EventRow.seq.in_(wanted[start:start + _IN_CHUNK]))
                    .order_by(EventRow.seq)).all()
                out.extend(event_from_row(campaign_id, row) for row in rows)
        return out

    def chain_rows(self, campaign_id: str, *, batch: int = 5000) -> Iterator[Any]:
        """Every event row of a campaign with its stored hash, in seq order, fetched in batches (not cached)."""
        for rows in self.chain_batches(campaign_id, batch=batch):
            yield from (_EventValues(*raw[:6], _stored_time(raw[6]), raw[7]) for raw in rows)

    def chain_batches(self, campaign_id: str, *, batch: int = 5000) -> Iterator[list[tuple]]:
        """A campaign's event rows in seq order, ``batch`` at a time, as the driver returns them: tuples of ``seq,
        type, schema_version, payload, idempotency_key, actor, at, hash`` with ``at`` as stored (SQLite's text, or a
        datetime). Each batch is one indexed range read, so memory stays bounded on every backend (not cached)."""
        after = 0
        sql = f"SELECT {_EVENT_SELECT}, hash FROM event WHERE campaign_id = ? AND seq > ? ORDER BY seq LIMIT ?"
        while rows := self._read(sql, (campaign_id, after, batch)):
            yield rows
            after = rows[-1][0]

    def head_hash(self, campaign_id: str) -> str:
        """The hash of the campaign's newest event (``GENESIS`` before the first)."""
        with self.engine.connect() as conn:
            found = conn.execute(select(EventRow.hash).where(EventRow.campaign_id == campaign_id)
                                 .order_by(EventRow.seq.desc()).limit(1)).scalar()
        return GENESIS if found is None else found

    def add_note(self, campaign_id: str, kind: str, first_seq: int, last_seq: int, detail: str) -> None:
        """Record something the ledger did to a campaign's record (``LedgerNoteRow``)."""
        self._refuse_if_read_only()
        with full_disk_refused(self.location, campaign_id), Session(self.engine) as session:
            session.add(LedgerNoteRow(campaign_id=campaign_id, kind=kind, first_seq=first_seq, last_seq=last_seq,
                                      detail=detail, at=datetime.now(UTC)))
            session.commit()

    def notes(self, campaign_id: str) -> list[LedgerNoteRow]:
        with Session(self.engine) as session:
            return list(session.exec(select(LedgerNoteRow).where(LedgerNoteRow.campaign_id == campaign_id)
                                     .order_by(LedgerNoteRow.id)))

    def candidate(self, campaign_id: str, candidate_id: str) -> CandidateRow | None:
        """One candidate's projection row (not cached)."""
        with Session(self.engine) as session:
            return session.get(CandidateRow, (campaign_id, candidate_id))

    def n_events(self, campaign_id: str) -> int:
        """How many events a campaign has (its last seq)."""
        return self.head_seq(campaign_id)

    def campaign(self, campaign_id: str) -> CampaignRow:
        with Session(self.engine) as session:
            row = session.get(CampaignRow, campaign_id)
            if row is None:
                known = [c.id for c in session.exec(select(CampaignRow))]
                raise LedgerError(f"campaign {campaign_id!r} is not in {self.url}; known campaigns: {known}")
            return row

    def campaigns(self) -> list[CampaignRow]:
        with Session(self.engine) as session:
            return list(session.exec(select(CampaignRow).order_by(CampaignRow.started_seq, CampaignRow.id)))

    def campaign_ids_with_events(self) -> list[str]:
        with Session(self.engine) as session:
            return list(session.exec(select(EventRow.campaign_id).distinct().order_by(EventRow.campaign_id)))

    def rows(self, table: type, campaign_id: str, *, keep: Callable[[Any], bool] | None = None) -> Sequence[Any]:
        """All projection rows of one table for a campaign, in primary-key order (incrementally refreshed), as
        read-only views (``ledger.driver.row_view``) in a tuple shared with the read cache.

        ``keep`` (a module-level function, so the same one each call) limits the rows to those it accepts, in a
        cache of their own: a long campaign's reader that needs a few rows of a large table (the failed lab
        results among every observation) holds only those, read by indexed range as the table changes.
        """
        if table is CampaignRow:
            return self.stored_rows(table, campaign_id)
        with self._lock:
            cache = self._rows.setdefault((table, campaign_id, keep), _RowCache())
            head = self.head_seq(campaign_id)
            if head == cache.head and cache.ordered is not None:
                return cache.ordered
            cache.head = head
            key_of = _row_key(table)
            found = self._read(_changed_rows_sql(table), (campaign_id, cache.seen_seq))
            changed = row_views(table, found)
            is_reordered = cache.ordered is None
            for row in changed:
                cache.seen_seq = max(cache.seen_seq, row.updated_seq)
                key = key_of(row)
                if keep is None or keep(row):
                    is_reordered = is_reordered or key not in cache.rows
                    cache.rows[key] = row
                elif cache.rows.pop(key, None) is not None:
                    is_reordered = True
            if is_reordered:
                cache.rows = dict(sorted(cache.rows.items()))
            if changed or cache.ordered is None:
                cache.ordered = tuple(cache.rows.values())
            return cache.ordered

    def n_cached_rows(self, table: type, campaign_id: str) -> dict[str | None, int]:
        """How many rows of one table the read cache holds for a campaign, by ``keep`` filter name (None: the
        cache of every row): what a long campaign keeps in memory."""
        with self._lock:
            return {getattr(keep, "__name__", None) if keep else None: len(cache.rows)
                    for (t, cid, keep), cache in self._rows.items() if t is table and cid == campaign_id}

    def changed_rows(self, table: type, campaign_id: str, after_seq: int) -> list[Any]:
        """Rows of one projection table that an event after ``after_seq`` changed, in the order they changed, read
        by indexed range and not cached: a reader that folds a table as it grows (``loop.history``) keeps only what
        it needs."""
        return sorted(row_views(table, self._read(_changed_rows_sql(table), (campaign_id, after_seq))),
                      key=operator.attrgetter("updated_seq"))

    def dispatched_keys(self, campaign_id: str, job_keys: Iterable[str]) -> set[str]:
        """Which of ``job_keys`` have a lab job (dispatched, whatever became of it), by primary-key lookups."""
        keys = list(dict.fromkeys(job_keys))
        found: set[str] = set()
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            sql = (f"SELECT job_key FROM {LabJobRow.__tablename__} WHERE campaign_id = ? "
                   f"AND job_key IN ({', '.join('?' * len(chunk))})")
            found.update(r[0] for r in self._read(sql, (campaign_id, *chunk)))
        return found

    def stored_rows(self, table: type, campaign_id: str) -> list:
        """Projection rows read straight from the database, bypassing the read cache (``verify`` uses this)."""
        with Session(self.engine) as session:
            pk = [c for c in table.__table__.primary_key.columns]
            column = CampaignRow.id if table is CampaignRow else table.campaign_id
            return list(session.exec(select(table).where(column == campaign_id).order_by(*pk)))

    def candidates(self, campaign_id: str) -> Sequence[Any]:
        return self.rows(CandidateRow, campaign_id)

    def observations(self, campaign_id: str, *, keep: Callable[[Any], bool] | None = None) -> Sequence[Any]:
        return self.rows(ObservationRow, campaign_id, keep=keep)

    def lab_jobs(self, campaign_id: str) -> Sequence[Any]:
        return self.rows(LabJobRow, campaign_id)

    def scores(self, campaign_id: str) -> Sequence[Any]:
        return self.rows(ScoreRow, campaign_id)


def _check_same(stored: EventRow, event_type: str, canonical: str, full_key: str) -> None:
    if stored.type == event_type and stored.payload == canonical:
        return
    old, new = json.loads(stored.payload), json.loads(canonical)
    differing = {k: (old.get(k), new.get(k)) for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)}
    raise LedgerConflict(
        f"idempotency key {full_key!r} already holds a different {stored.type} event (seq {stored.seq}): the step "
        f"that wrote it computed something else this time, because it is not deterministic or because the code or "
        f"its inputs changed since (resume a campaign with the closedloop version that started it). "
        f"Differing fields (stored, new): {differing}"
    )
