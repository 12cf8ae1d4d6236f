"""Tamper-evident ledger: every event carries a sha256 chained to the previous event of its campaign, and a
``ledger_note`` table records what the ledger itself did to a record (events chained after the fact, unverified
imports).

Events written before this revision are chained here, in seq order, and each campaign gets a ``chained_by_migration``
note: the chain then proves that nothing changed *since the migration*, not before it, and ``ledger verify`` says so.
The append-only triggers are lifted for the one UPDATE that fills the new column and restored in the same
transaction.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-26
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from orchestrator.ledger.chain import GENESIS, event_hash

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_BATCH = 5000
_SQLITE_TRIGGER = ("CREATE TRIGGER IF NOT EXISTS event_no_update BEFORE UPDATE ON event "
                   "BEGIN SELECT RAISE(ABORT, 'the event table is append-only'); END")
_event = sa.table(
    "event", sa.column("id", sa.Integer), sa.column("campaign_id", sa.String), sa.column("seq", sa.Integer),
    sa.column("type", sa.String), sa.column("schema_version", sa.Integer), sa.column("payload", sa.Text),
    sa.column("idempotency_key", sa.String), sa.column("actor", sa.String), sa.column("at", sa.DateTime),
    sa.column("hash", sa.String),
)
_note = sa.table(
    "ledger_note", sa.column("campaign_id", sa.String), sa.column("kind", sa.String),
    sa.column("first_seq", sa.Integer), sa.column("last_seq", sa.Integer), sa.column("detail", sa.Text),
    sa.column("at", sa.DateTime),
)


def upgrade() -> None:
    op.add_column("event", sa.Column("hash", sa.String(), nullable=False, server_default=""))
    op.create_table(
        "ledger_note",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("campaign_id", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("first_seq", sa.Integer(), nullable=False),
        sa.Column("last_seq", sa.Integer(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_ledger_note_campaign_id", "ledger_note", ["campaign_id"])
    _chain_existing_events()


def _chain_existing_events() -> None:
    bind = op.get_bind()
    campaigns = [row[0] for row in bind.execute(sa.select(_event.c.campaign_id).distinct())]
    if not campaigns:
        return
    dialect = bind.dialect.name
    if dialect == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS event_no_update")
    elif dialect == "postgresql":
        op.execute("ALTER TABLE event DISABLE TRIGGER event_append_only")
    now = datetime.now(UTC).replace(tzinfo=None)
    for campaign_id in campaigns:
        previous, last_seq, after = GENESIS, 0, 0
        while True:
            rows = bind.execute(
                sa.select(_event).where(_event.c.campaign_id == campaign_id, _event.c.seq > after)
                .order_by(_event.c.seq).limit(_BATCH)
            ).all()
            if not rows:
                break
            updates = []
            for row in rows:
                previous = event_hash(previous, campaign_id, row.seq, row.type, row.schema_version, row.payload,
                                      row.idempotency_key, row.actor, row.at)
                updates.append({"row_id": row.id, "new_hash": previous})
            bind.execute(_event.update().where(_event.c.id == sa.bindparam("row_id"))
                         .values(hash=sa.bindparam("new_hash")), updates)
            after = last_seq = rows[-1].seq
        bind.execute(_note.insert().values(
            campaign_id=campaign_id, kind="chained_by_migration", first_seq=1, last_seq=last_seq, at=now,
            detail="events 1..%d were written before the ledger chained its events (migration 0003); their hashes "
                   "prove nothing changed since the migration, not before it" % last_seq,
        ))
    if dialect == "sqlite":
        op.execute(_SQLITE_TRIGGER)
    elif dialect == "postgresql":
        op.execute("ALTER TABLE event ENABLE TRIGGER event_append_only")


def downgrade() -> None:
    op.drop_index("ix_ledger_note_campaign_id", table_name="ledger_note")
    op.drop_table("ledger_note")
    with op.batch_alter_table("event") as batch:
        batch.drop_column("hash")
