"""The campaign ledger: an append-only event log with projections kept in the same transaction.

Example:
    >>> from orchestrator.events import CampaignStarted
    >>> ledger = Ledger.open(":memory:")
    >>> e = ledger.append("c1", CampaignStarted(name="demo", seed=0, spec={}), key="start")
    >>> (e.seq, e.type), ledger.append("c1", CampaignStarted(name="demo", seed=0, spec={}), key="start").seq
    ((1, 'CampaignStarted'), 1)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import event as sa_event
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlalchemy.pool import StaticPool
from sqlmodel import Session, SQLModel, create_engine, select

from ..events import Event, EventPayload
from .errors import LedgerConflict, LedgerError
from .projections import apply_event
from .tables import PROJECTION_TABLES, CampaignRow, CandidateRow, EventRow, LabJobRow, ObservationRow, ScoreRow

__all__ = ["Ledger", "LedgerConflict", "LedgerError", "database_url"]


_APPEND_ONLY_TRIGGERS = (
    "CREATE TRIGGER IF NOT EXISTS event_no_update BEFORE UPDATE ON event "
    "BEGIN SELECT RAISE(ABORT, 'the event table is append-only'); END",
    "CREATE TRIGGER IF NOT EXISTS event_no_delete BEFORE DELETE ON event "
    "BEGIN SELECT RAISE(ABORT, 'the event table is append-only'); END",
)


def database_url(db: str | Path) -> str:
    """Turn a path (or ``:memory:``) into an SQLAlchemy URL; URLs pass through unchanged."""
    text = str(db)
    if "://" in text:
        return text
    if text == ":memory:":
        return "sqlite://"
    return f"sqlite:///{Path(text).expanduser().resolve()}"


def _canonical(payload: EventPayload) -> str:
    return json.dumps(payload.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))


def _to_event(row: EventRow) -> Event:
    return Event(
        campaign_id=row.campaign_id,
        seq=row.seq,
        type=row.type,
        schema_version=row.schema_version,
        payload=json.loads(row.payload),
        idempotency_key=row.idempotency_key,
        actor=row.actor,
        at=row.at,
    )


class Ledger:
    """Append-only event store plus projections, on SQLite (WAL) by default.

    Idempotency keys are scoped to the campaign: ``append(cid, payload, key=k)`` stores ``f"{cid}:{k}"``. Appending
    an existing key with the same payload returns the stored event; with a different payload it raises
    ``LedgerConflict``, which is how a non-deterministic resume is caught.
    """

    def __init__(self, engine: Engine, url: str):
        self.engine = engine
        self.url = url
        SQLModel.metadata.create_all(engine, tables=[EventRow.__table__, *(t.__table__ for t in PROJECTION_TABLES)])
        if engine.dialect.name == "sqlite":
            with engine.begin() as conn:
                for statement in _APPEND_ONLY_TRIGGERS:
                    conn.exec_driver_sql(statement)

    @classmethod
    def open(cls, db: str | Path) -> Ledger:
        """Open (creating if needed) the ledger at a path, ``:memory:`` or an SQLAlchemy URL."""
        url = database_url(db)
        if url.startswith("sqlite"):
            if url == "sqlite://":
                engine = create_engine(url, connect_args={"check_same_thread": False}, poolclass=StaticPool)
            else:
                path = Path(url.removeprefix("sqlite:///"))
                if not path.parent.exists():
                    raise LedgerError(f"database directory {path.parent} does not exist; create it or pick another --db")
                engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
            _configure_sqlite(engine, is_file=url != "sqlite://")
        else:
            engine = create_engine(url, pool_pre_ping=True)
        return cls(engine, url)

    def close(self) -> None:
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
    ) -> list[Event]:
        """Append several events in one transaction, projections included. All or nothing.

        An item is ``(payload, key)``, recorded with ``actor`` and the current time, or ``(payload, key, actor, at)``,
        which keeps an envelope recorded elsewhere (a JSONL import).
        """
        out: list[Event] = []
        with Session(self.engine) as session:
            next_seq = (
                session.exec(select(func.max(EventRow.seq)).where(EventRow.campaign_id == campaign_id)).one() or 0
            ) + 1
            for payload, key, *envelope in items:
                item_actor, item_at = envelope if envelope else (actor, datetime.now(UTC))
                full_key = f"{campaign_id}:{key}"
                text = _canonical(payload)
                existing = session.exec(select(EventRow).where(EventRow.idempotency_key == full_key)).first()
                if existing is not None:
                    if existing.type != payload.type or existing.payload != text:
                        stored, new = json.loads(existing.payload), json.loads(text)
                        differing = {k: (stored.get(k), new.get(k)) for k in sorted(set(stored) | set(new))
                                     if stored.get(k) != new.get(k)}
                        raise LedgerConflict(
                            f"idempotency key {full_key!r} already holds a different {existing.type} event "
                            f"(seq {existing.seq}); the step that wrote it is not deterministic. "
                            f"Differing fields (stored, new): {differing}"
                        )
                    out.append(_to_event(existing))
                    continue
                row = EventRow(
                    campaign_id=campaign_id,
                    seq=next_seq,
                    type=payload.type,
                    schema_version=payload.schema_version,
                    payload=text,
                    idempotency_key=full_key,
                    actor=item_actor,
                    at=item_at,
                )
                session.add(row)
                session.flush()
                apply_event(session, campaign_id, next_seq, payload)
                session.flush()
                out.append(_to_event(row))
                next_seq += 1
            session.commit()
        return out

    # ----------------------------------------------------------------------------------------------- reading
    def events(
        self, campaign_id: str, *, types: Iterable[str] | None = None, after_seq: int = 0
    ) -> list[Event]:
        """Events of a campaign in seq order, optionally filtered by type."""
        with Session(self.engine) as session:
            query = select(EventRow).where(EventRow.campaign_id == campaign_id, EventRow.seq > after_seq)
            if types is not None:
                query = query.where(EventRow.type.in_(list(types)))
            return [_to_event(row) for row in session.exec(query.order_by(EventRow.seq))]

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

    def rows(self, table: type, campaign_id: str) -> list:
        """All projection rows of one table for a campaign, in primary-key order."""
        with Session(self.engine) as session:
            pk = [c for c in table.__table__.primary_key.columns]
            column = CampaignRow.id if table is CampaignRow else table.campaign_id
            return list(session.exec(select(table).where(column == campaign_id).order_by(*pk)))

    def candidates(self, campaign_id: str) -> list[CandidateRow]:
        return self.rows(CandidateRow, campaign_id)

    def observations(self, campaign_id: str) -> list[ObservationRow]:
        return self.rows(ObservationRow, campaign_id)

    def lab_jobs(self, campaign_id: str) -> list[LabJobRow]:
        return self.rows(LabJobRow, campaign_id)

    def scores(self, campaign_id: str) -> list[ScoreRow]:
        return self.rows(ScoreRow, campaign_id)


def _configure_sqlite(engine: Engine, *, is_file: bool) -> None:
    """WAL, a busy timeout, and BEGIN IMMEDIATE so that seq allocation cannot race between writers."""

    @sa_event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):  # pragma: no cover - exercised by every test
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        if is_file:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @sa_event.listens_for(engine, "begin")
    def _on_begin(conn):  # pragma: no cover
        conn.exec_driver_sql("BEGIN IMMEDIATE")
