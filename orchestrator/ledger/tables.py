"""SQLModel tables: the append-only ``event`` table and the projections folded from it.

Projections (``campaign``, ``candidate``, ``observation``, ``lab_job``, ``score``) are written in the same
transaction as the event that changes them, and can always be rebuilt from the events alone. Each projection row
records the seq of the event that last changed it (``updated_seq``), so readers can fetch only what changed.

The schema is created and migrated by Alembic (``orchestrator/ledger/migrations``); a test checks that the migrations
produce exactly these models.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Index, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

__all__ = [
    "PROJECTION_TABLES",
    "CampaignRow",
    "CandidateRow",
    "EventRow",
    "LedgerNoteRow",
    "LabJobRow",
    "ObservationRow",
    "ScoreRow",
]


class EventRow(SQLModel, table=True):
    """One immutable ledger entry. Triggers refuse UPDATE and DELETE (see ``store``)."""

    __tablename__ = "event"
    __table_args__ = (
        UniqueConstraint("campaign_id", "seq", name="uq_event_campaign_seq"),
        UniqueConstraint("idempotency_key", name="uq_event_idempotency_key"),
        Index("ix_event_campaign_type_seq", "campaign_id", "type", "seq"),
    )
    id: int | None = Field(default=None, primary_key=True)
    campaign_id: str = Field(index=True)
    seq: int = Field(description="1-based position within the campaign")
    type: str = Field(index=True)
    schema_version: int
    payload: str = Field(sa_column=Column(Text, nullable=False), description="canonical JSON")
    idempotency_key: str
    actor: str
    at: datetime = Field(description="wall-clock UTC time of the append; not part of replay equality")
    hash: str = Field(default="",
                      description="sha256 of this event chained to the previous one of its campaign (ledger.chain)")


class CampaignRow(SQLModel, table=True):
    __tablename__ = "campaign"
    __table_args__ = (Index("ix_campaign_updated", "id", "updated_seq"),)
    id: str = Field(primary_key=True)
    name: str
    seed: int
    status: str = Field(default="running",
                        description="running | waiting_for_approval | waiting_for_results | stopped")
    n_lab: int = Field(default=0, description="lab observations received (ok or failed)")
    best_candidate_id: str | None = None
    best_value: float | None = None
    stop_reason: str | None = None
    started_seq: int = 0
    objective: str = Field(default="{}", sa_column=Column(Text, nullable=False, default="{}"),
                           description="objective spec JSON, to keep the best result current")
    updated_seq: int = Field(default=0, description="seq of the event that last changed this row")


class CandidateRow(SQLModel, table=True):
    __tablename__ = "candidate"
    __table_args__ = (Index("ix_candidate_updated", "campaign_id", "updated_seq"),)
    campaign_id: str = Field(primary_key=True)
    candidate_id: str = Field(primary_key=True)
    kind: str
    canonical: str = Field(sa_column=Column(Text, nullable=False), description="candidate JSON")
    arm: str
    iteration: int
    status: str = Field(description="proposed | rejected | screened | held | skipped | dispatched | observed | failed")
    highest_rung: str | None = None
    first_seq: int
    updated_seq: int = Field(default=0, description="seq of the event that last changed this row")


class ObservationRow(SQLModel, table=True):
    __tablename__ = "observation"
    __table_args__ = (Index("ix_observation_updated", "campaign_id", "updated_seq"),)
    campaign_id: str = Field(primary_key=True)
    seq: int = Field(primary_key=True, description="the event holding the result: Observed, Simulated or Screened")
    ordinal: int = Field(default=0, primary_key=True,
                         description="the result's place among its Screened round's results")
    candidate_id: str = Field(index=True)
    source: str = Field(description="rung name, or the lab driver name")
    fidelity: int
    is_lab: bool
    status: str
    value: float | None = Field(default=None, description="objective value for the lab; None for rungs")
    properties: str = Field(sa_column=Column(Text, nullable=False), description="JSON of properties")
    reason: str | None = None
    cost_s: float = 0.0
    provenance: str = "lab"
    sim_time_s: float | None = None
    updated_seq: int = Field(default=0, description="seq of the event that last changed this row")


class LabJobRow(SQLModel, table=True):
    __tablename__ = "lab_job"
    __table_args__ = (Index("ix_lab_job_updated", "campaign_id", "updated_seq"),)
    campaign_id: str = Field(primary_key=True)
    job_key: str = Field(primary_key=True)
    candidate_id: str
    arm: str
    iteration: int
    driver: str
    status: str = Field(description="dispatched | done | failed")
    dispatched_seq: int
    observed_seq: int | None = None
    submitted_s: float
    completed_s: float | None = None
    value: float | None = None
    updated_seq: int = Field(default=0, description="seq of the event that last changed this row")


class ScoreRow(SQLModel, table=True):
    __tablename__ = "score"
    __table_args__ = (Index("ix_score_updated", "campaign_id", "updated_seq"),)
    campaign_id: str = Field(primary_key=True)
    seq: int = Field(primary_key=True, description="the event holding the score: a reward record, or an old Scored")
    ordinal: int = Field(default=0, primary_key=True, description="the score's place among its record's scores")
    iteration: int
    stage: str
    subject: str = Field(index=True)
    rubric_id: str
    rubric_version: str
    criterion_id: str
    value: float
    weight: float
    is_provisional: bool
    superseded_by_seq: int | None = None
    updated_seq: int = Field(default=0, description="seq of the event that last changed this row")


class LedgerNoteRow(SQLModel, table=True):
    """What the ledger itself did to a campaign's record, outside the campaign's own events: events chained by a
    migration after they were written, or imported from an export whose chain could not be verified."""

    __tablename__ = "ledger_note"
    id: int | None = Field(default=None, primary_key=True)
    campaign_id: str = Field(index=True)
    kind: str = Field(description="chained_by_migration | imported_unverified | imported_verified")
    first_seq: int
    last_seq: int
    detail: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    at: datetime = Field(description="wall-clock UTC time of the note")


PROJECTION_TABLES: tuple[type[SQLModel], ...] = (CampaignRow, CandidateRow, ObservationRow, LabJobRow, ScoreRow)
