"""Fold one event into the projection tables. The same function serves live appends and replays.

Every row the event adds or changes is stamped with the event's seq (``updated_seq``), which is what lets a reader
fetch only the rows that changed since it last looked.
"""

from __future__ import annotations

import json

from sqlalchemy import event as sa_event
from sqlalchemy.orm import Session

from ..domain import objective_utility
from ..events import (
    CampaignStarted,
    CampaignStopped,
    Dispatched,
    EventPayload,
    Observed,
    Promoted,
    Proposed,
    Rejected,
    Scored,
    Simulated,
)
from .errors import LedgerConflict
from .tables import PROJECTION_TABLES, CampaignRow, CandidateRow, LabJobRow, ObservationRow, ScoreRow

__all__ = ["apply_event"]


def _set_candidate_status(session: Session, campaign_id: str, candidate_id: str | None, status: str, **extra) -> None:
    if candidate_id is None:
        return
    row = session.get(CandidateRow, (campaign_id, candidate_id))
    if row is None:
        return
    row.status = status
    for name, value in extra.items():
        setattr(row, name, value)
    session.add(row)


def _utility(objective_json: str, value: float | None) -> float | None:
    if value is None:
        return None
    objective = json.loads(objective_json or "{}")
    return objective_utility(objective.get("direction", "maximize"), value, objective.get("target"))


def apply_event(session: Session, campaign_id: str, seq: int, payload: EventPayload) -> None:
    """Update the projections for one event, inside the caller's transaction (which flushes after each event)."""
    session.info[_SEQ] = seq
    _fold(session, campaign_id, seq, payload)


_SEQ = "closedloop_event_seq"


@sa_event.listens_for(Session, "before_flush")
def _stamp_updated_seq(session: Session, _flush_context, _instances) -> None:
    """Stamp rows at flush time: the fold's own look-ups autoflush, so stamping after it would miss rows."""
    seq = session.info.get(_SEQ)
    if seq is None:
        return
    for row in (*session.new, *session.dirty):
        if isinstance(row, PROJECTION_TABLES):
            row.updated_seq = seq


def _fold(session: Session, campaign_id: str, seq: int, payload: EventPayload) -> None:
    match payload:
        case CampaignStarted():
            if session.get(CampaignRow, campaign_id) is not None:
                raise LedgerConflict(f"campaign {campaign_id!r} has already started; pick a new campaign id or resume it")
            objective = json.dumps(payload.spec.get("objective", {}), sort_keys=True)
            session.add(CampaignRow(id=campaign_id, name=payload.name, seed=payload.seed, started_seq=seq,
                                    objective=objective))
        case Proposed():
            if session.get(CandidateRow, (campaign_id, payload.candidate_id)) is None:
                session.add(
                    CandidateRow(
                        campaign_id=campaign_id,
                        candidate_id=payload.candidate_id,
                        kind=payload.candidate["type"],
                        canonical=json.dumps(payload.candidate, sort_keys=True),
                        arm=payload.arm,
                        iteration=payload.iteration,
                        status="proposed",
                        first_seq=seq,
                    )
                )
        case Rejected():
            row = session.get(CandidateRow, (campaign_id, payload.candidate_id)) if payload.candidate_id else None
            # A duplicate proposal of an already tested candidate must not demote the original.
            if row is not None and row.status in {"proposed", "screened"} and row.iteration == payload.iteration:
                _set_candidate_status(session, campaign_id, payload.candidate_id, "rejected")
        case Simulated():
            obs = payload.observation
            session.add(
                ObservationRow(
                    campaign_id=campaign_id,
                    seq=seq,
                    candidate_id=payload.candidate_id,
                    source=payload.rung,
                    fidelity=obs.get("fidelity", 0),
                    is_lab=False,
                    status=obs.get("status", "ok"),
                    properties=json.dumps(obs.get("properties", {}), sort_keys=True),
                    reason=obs.get("reason"),
                    cost_s=obs.get("cost_s", 0.0),
                    provenance="simulator",
                )
            )
            _set_candidate_status(session, campaign_id, payload.candidate_id, "screened", highest_rung=payload.rung)
        case Promoted():
            if payload.to_rung == "lab":
                status = {"promote": "screened", "hold": "held", "skip": "skipped"}[payload.decision]
                _set_candidate_status(session, campaign_id, payload.candidate_id, status)
        case Dispatched():
            session.add(
                LabJobRow(
                    campaign_id=campaign_id,
                    job_key=payload.job_key,
                    candidate_id=payload.candidate_id,
                    arm=payload.arm,
                    iteration=payload.iteration,
                    driver=payload.driver,
                    status="dispatched",
                    dispatched_seq=seq,
                    submitted_s=payload.sim_time_s,
                )
            )
            _set_candidate_status(session, campaign_id, payload.candidate_id, "dispatched")
        case Observed():
            session.add(
                ObservationRow(
                    campaign_id=campaign_id,
                    seq=seq,
                    candidate_id=payload.candidate_id,
                    source=payload.driver or "lab",
                    fidelity=-1,
                    is_lab=True,
                    status=payload.status,
                    value=payload.value,
                    properties=json.dumps({"value": payload.value, "uncertainty": payload.uncertainty}),
                    reason=payload.reason,
                    provenance=payload.provenance,
                    sim_time_s=payload.sim_time_s,
                )
            )
            job = session.get(LabJobRow, (campaign_id, payload.job_key))
            if job is not None:
                job.status = "done" if payload.status == "ok" else "failed"
                job.observed_seq, job.completed_s, job.value = seq, payload.sim_time_s, payload.value
                session.add(job)
            status = "observed" if payload.status == "ok" else "failed"
            _set_candidate_status(session, campaign_id, payload.candidate_id, status)
            campaign = session.get(CampaignRow, campaign_id)
            if campaign is not None:
                campaign.n_lab += 1
                utility = _utility(campaign.objective, payload.value) if payload.status == "ok" else None
                if utility is not None and (
                    campaign.best_value is None or utility > _utility(campaign.objective, campaign.best_value)
                ):
                    campaign.best_value, campaign.best_candidate_id = payload.value, payload.candidate_id
                session.add(campaign)
        case Scored():
            if payload.supersedes_seq is not None:
                old = session.get(ScoreRow, (campaign_id, payload.supersedes_seq))
                if old is not None:
                    old.superseded_by_seq = seq
                    session.add(old)
            session.add(
                ScoreRow(
                    campaign_id=campaign_id,
                    seq=seq,
                    iteration=payload.iteration,
                    stage=payload.stage,
                    subject=payload.subject,
                    rubric_id=payload.rubric_id,
                    rubric_version=payload.rubric_version,
                    criterion_id=payload.criterion_id,
                    value=payload.value,
                    weight=payload.weight,
                    is_provisional=payload.is_provisional,
                )
            )
        case CampaignStopped():
            campaign = session.get(CampaignRow, campaign_id)
            if campaign is not None:
                campaign.status = "stopped"
                campaign.stop_reason = payload.reason
                campaign.best_candidate_id = payload.best_candidate_id
                campaign.best_value = payload.best_value
                session.add(campaign)
        case _:
            pass  # events without a projection (ApprovalRequested, SurrogateUpdated, LLMCall, ...)
