"""Incremental reads: every projection row records the seq of the event that last changed it, and events are
indexed by (campaign, type, seq).

A ledger reader then fetches only what changed since it last looked (``WHERE updated_seq > :seen``), so a long
campaign's nodes stop re-reading whole tables every step. Rows written before this revision get ``updated_seq = 0``
and are read in full once.

Revision ID: 0002
Revises: 0001
Create Date: 2025-01-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_PROJECTIONS = ("campaign", "candidate", "observation", "lab_job", "score")


def _campaign_column(table: str) -> str:
    return "id" if table == "campaign" else "campaign_id"


def upgrade() -> None:
    for table in _PROJECTIONS:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("updated_seq", sa.Integer(), nullable=False, server_default="0"))
        op.create_index(f"ix_{table}_updated", table, [_campaign_column(table), "updated_seq"])
    op.create_index("ix_event_campaign_type_seq", "event", ["campaign_id", "type", "seq"])


def downgrade() -> None:
    op.drop_index("ix_event_campaign_type_seq", table_name="event")
    for table in _PROJECTIONS:
        op.drop_index(f"ix_{table}_updated", table_name=table)
        with op.batch_alter_table(table) as batch:
            batch.drop_column("updated_seq")
