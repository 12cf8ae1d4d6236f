"""The ledger as first released: the append-only event table and its projections.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_SQLITE_TRIGGERS = (
    "CREATE TRIGGER IF NOT EXISTS event_no_update BEFORE UPDATE ON event "
    "BEGIN SELECT RAISE(ABORT, 'the event table is append-only'); END",
    "CREATE TRIGGER IF NOT EXISTS event_no_delete BEFORE DELETE ON event "
    "BEGIN SELECT RAISE(ABORT, 'the event table is append-only'); END",
)
_POSTGRES_TRIGGERS = (
    "CREATE OR REPLACE FUNCTION closedloop_event_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ "
    "BEGIN RAISE EXCEPTION 'the event table is append-only'; END $$",
    "CREATE TRIGGER event_append_only BEFORE UPDATE OR DELETE ON event "
    "FOR EACH ROW EXECUTE FUNCTION closedloop_event_append_only()",
    "CREATE TRIGGER event_no_truncate BEFORE TRUNCATE ON event "
    "FOR EACH STATEMENT EXECUTE FUNCTION closedloop_event_append_only()",
)


def upgrade() -> None:
    op.create_table(
        "event",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("campaign_id", sa.String(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("type", sa.String(), nullable=False),
        sa.Column("schema_version", sa.Integer(), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("idempotency_key", sa.String(), nullable=False),
        sa.Column("actor", sa.String(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("campaign_id", "seq", name="uq_event_campaign_seq"),
        sa.UniqueConstraint("idempotency_key", name="uq_event_idempotency_key"),
    )
    op.create_index("ix_event_campaign_id", "event", ["campaign_id"])
    op.create_index("ix_event_type", "event", ["type"])
    op.create_table(
        "campaign",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("n_lab", sa.Integer(), nullable=False),
        sa.Column("best_candidate_id", sa.String(), nullable=True),
        sa.Column("best_value", sa.Float(), nullable=True),
        sa.Column("stop_reason", sa.String(), nullable=True),
        sa.Column("started_seq", sa.Integer(), nullable=False),
        sa.Column("objective", sa.Text(), nullable=False),
    )
    op.create_table(
        "candidate",
        sa.Column("campaign_id", sa.String(), primary_key=True),
        sa.Column("candidate_id", sa.String(), primary_key=True),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("canonical", sa.Text(), nullable=False),
        sa.Column("arm", sa.String(), nullable=False),
        sa.Column("iteration", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("highest_rung", sa.String(), nullable=True),
        sa.Column("first_seq", sa.Integer(), nullable=False),
    )
    op.create_table(
        "observation",
        sa.Column("campaign_id", sa.String(), primary_key=True),
        sa.Column("seq", sa.Integer(), primary_key=True),
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
    )
    op.create_index("ix_observation_candidate_id", "observation", ["candidate_id"])
    op.create_table(
        "lab_job",
        sa.Column("campaign_id", sa.String(), primary_key=True),
        sa.Column("job_key", sa.String(), primary_key=True),
        sa.Column("candidate_id", sa.String(), nullable=False),
        sa.Column("arm", sa.String(), nullable=False),
        sa.Column("iteration", sa.Integer(), nullable=False),
        sa.Column("driver", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("dispatched_seq", sa.Integer(), nullable=False),
        sa.Column("observed_seq", sa.Integer(), nullable=True),
        sa.Column("submitted_s", sa.Float(), nullable=False),
        sa.Column("completed_s", sa.Float(), nullable=True),
        sa.Column("value", sa.Float(), nullable=True),
    )
    op.create_table(
        "score",
        sa.Column("campaign_id", sa.String(), primary_key=True),
        sa.Column("seq", sa.Integer(), primary_key=True),
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
    )
    op.create_index("ix_score_subject", "score", ["subject"])
    dialect = op.get_bind().dialect.name
    for statement in {"sqlite": _SQLITE_TRIGGERS, "postgresql": _POSTGRES_TRIGGERS}.get(dialect, ()):
        op.execute(statement)


def downgrade() -> None:
    for table in ("score", "lab_job", "observation", "candidate", "campaign", "event"):
        op.drop_table(table)
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS closedloop_event_append_only()")
