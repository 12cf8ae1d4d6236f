"""A screening round is one ``Screened`` event holding every rung result and decision of the round, so the
``observation`` table's key gains the result's place in its event (``ordinal``).

Before this revision the screen wrote one ``Simulated`` event per rung result and one ``Promoted`` per decision (about
40% of a campaign's events); those events stay in old ledgers and still project here, each result at ``ordinal`` 0,
as do lab results (``Observed``). No event is rewritten, so the hash chain is untouched. The table is rebuilt (a new
primary key) on SQLite and PostgreSQL alike.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_COLUMNS = ("campaign_id", "seq", "candidate_id", "source", "fidelity", "is_lab", "status", "value", "properties",
            "reason", "cost_s", "provenance", "sim_time_s", "updated_seq")


def _observation_table(name: str, key: list[str], with_ordinal: bool) -> None:
    op.create_table(
        name,
        sa.Column("campaign_id", sa.String(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        *([sa.Column("ordinal", sa.Integer(), nullable=False, server_default="0")] if with_ordinal else []),
        sa.Column("candidate_id", sa.String(), nullable=False),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("fidelity", sa.Integer(), nullable=False),
        sa.Column("is_lab", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("properties", sa.Text(), nullable=False),
        sa.Column("reason", sa.String(), nullable=True),
        sa.Column("cost_s", sa.Float(), nullable=False),
        sa.Column("provenance", sa.String(), nullable=False),
        sa.Column("sim_time_s", sa.Float(), nullable=True),
        sa.Column("updated_seq", sa.Integer(), nullable=False, server_default="0"),
        sa.PrimaryKeyConstraint(*key, name="pk_observation_" + "_".join(key[1:])),
    )


def _rebuild(key: list[str], with_ordinal: bool, where: str = "") -> None:
    """Copy ``observation`` into a table with the new key, then put it in the old one's place, indexes included."""
    _observation_table("observation_rebuilt", key, with_ordinal)
    columns = ", ".join(_COLUMNS)
    op.execute(sa.text(f"INSERT INTO observation_rebuilt ({columns}) SELECT {columns} FROM observation {where}"))
    op.drop_table("observation")
    op.rename_table("observation_rebuilt", "observation")
    op.create_index("ix_observation_candidate_id", "observation", ["candidate_id"])
    op.create_index("ix_observation_updated", "observation", ["campaign_id", "updated_seq"])


def upgrade() -> None:
    if "ordinal" in {column["name"] for column in sa.inspect(op.get_bind()).get_columns("observation")}:
        return  # already keyed so (a database whose version stamp was set back by hand)
    _rebuild(["campaign_id", "seq", "ordinal"], with_ordinal=True)


def downgrade() -> None:
    """Back to one row per event: a ``Screened`` round keeps only its first result (the ledger can re-project)."""
    _rebuild(["campaign_id", "seq"], with_ordinal=False, where="WHERE ordinal = 0")
