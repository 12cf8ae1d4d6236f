"""A ``ledger_info`` table of facts about the ledger itself, first of all which closedloop brought its schema to the
revision it is at (``schema_written_by``), so that an older closedloop that meets the ledger can name the version
to upgrade to rather than only the revision it does not know.

The row is written by ``orchestrator.ledger.migrations.upgrade`` after every migration (a new ledger included); the
table is keyed by name so later facts need no new revision.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if sa.inspect(op.get_bind()).has_table("ledger_info"):
        return  # already there (a database whose version stamp was set back by hand)
    op.create_table(
        "ledger_info",
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("value", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("key", name="pk_ledger_info"),
    )


def downgrade() -> None:
    op.drop_table("ledger_info")
