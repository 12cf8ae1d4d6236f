"""Criterion scores travel inside the reward records: one ``score`` row per criterion of each step of a
``RewardEstimated``/``RewardFinalised`` record, so the table's key gains the score's place in its record.

Before this revision the reward node wrote one ``Scored`` event per criterion and step (about half of a campaign's
events); those events stay in old ledgers and still project here, each at ``ordinal`` 0. No event is rewritten, so
the hash chain is untouched. The table is rebuilt (a new primary key) on SQLite and PostgreSQL alike.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_COLUMNS = ("campaign_id", "seq", "iteration", "stage", "subject", "rubric_id", "rubric_version", "criterion_id",
            "value", "weight", "is_provisional", "superseded_by_seq", "updated_seq")


def _score_table(name: str, key: list[str], with_ordinal: bool) -> None:
    op.create_table(
        name,
        sa.Column("campaign_id", sa.String(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        *([sa.Column("ordinal", sa.Integer(), nullable=False, server_default="0")] if with_ordinal else []),
        sa.Column("iteration", sa.Integer(), nullable=False),
        sa.Column("stage", sa.String(), nullable=False),
        sa.Column("subject", sa.String(), nullable=False),
        sa.Column("rubric_id", sa.String(), nullable=False),
        sa.Column("rubric_version", sa.String(), nullable=False),
        sa.Column("criterion_id", sa.String(), nullable=False),
        sa.Column("value", sa.Float(), nullable=False),
        sa.Column("weight", sa.Float(), nullable=False),
        sa.Column("is_provisional", sa.Boolean(), nullable=False),
        sa.Column("superseded_by_seq", sa.Integer(), nullable=True),
        sa.Column("updated_seq", sa.Integer(), nullable=False, server_default="0"),
        sa.PrimaryKeyConstraint(*key, name="pk_score_" + "_".join(key[1:])),
    )


def _rebuild(key: list[str], with_ordinal: bool, where: str = "") -> None:
    """Copy ``score`` into a table with the new key, then put it in the old one's place, indexes included."""
    _score_table("score_rebuilt", key, with_ordinal)
    columns = ", ".join(_COLUMNS)
    op.execute(sa.text(f"INSERT INTO score_rebuilt ({columns}) SELECT {columns} FROM score {where}"))
    op.drop_table("score")
    op.rename_table("score_rebuilt", "score")
    op.create_index("ix_score_subject", "score", ["subject"])
    op.create_index("ix_score_updated", "score", ["campaign_id", "updated_seq"])


def upgrade() -> None:
    if "ordinal" in {column["name"] for column in sa.inspect(op.get_bind()).get_columns("score")}:
        return  # already keyed so (a database whose version stamp was set back by hand)
    _rebuild(["campaign_id", "seq", "ordinal"], with_ordinal=True)


def downgrade() -> None:
    _rebuild(["campaign_id", "seq"], with_ordinal=False, where="WHERE ordinal = 0")
