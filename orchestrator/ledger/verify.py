"""Rebuild the projections from the events alone and compare them with the stored ones; check that the campaign's
sequence numbers run 1..n without a gap and that every event matches its link in the hash chain (``ledger.chain``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlmodel import Session

from ..events import parse_payload
from .chain import ChainBreak, first_break
from .projections import apply_event
from .store import Ledger, event_from_row
from .tables import PROJECTION_TABLES

__all__ = ["VerifyReport", "rebuild_projections", "verify"]


@dataclass
class VerifyReport:
    """Outcome of a verify: ``is_identical`` (the hash chain holds and the projections rebuilt from the events equal
    the stored ones) and, when not, what differs (table, key, stored, rebuilt). ``head_hash`` is the chain's newest
    hash, worth keeping outside the ledger; ``notes`` say what the ledger itself did to the record (``LedgerNoteRow``).
    """

    campaign_id: str
    n_events: int
    is_identical: bool
    differences: list[dict] = field(default_factory=list)
    head_hash: str = ""
    chain_break: str | None = None
    notes: list[str] = field(default_factory=list)


def _dump(rows) -> dict[tuple, dict]:
    out = {}
    for row in rows:
        # updated_seq is read bookkeeping (rows migrated from before it existed hold 0), not projected content
        data = row.model_dump(exclude={"updated_seq"})
        pk = tuple(data[c.name] for c in type(row).__table__.primary_key.columns)
        out[pk] = data
    return out


def rebuild_projections(ledger: Ledger, campaign_id: str, events: list | None = None) -> Ledger:
    """Fold the campaign's events (read from ``ledger`` unless given) into a fresh in-memory ledger and return it."""
    fresh = Ledger.open(":memory:")
    events = ledger.events(campaign_id) if events is None else events
    with Session(fresh.engine) as session:
        for event in events:
            apply_event(session, campaign_id, event.seq, parse_payload(event.type, event.payload))
            session.flush()
        session.commit()
    return fresh


def verify(ledger: Ledger, campaign_id: str) -> VerifyReport:
    """Compare stored projections with projections rebuilt from the events.

    Example:
        >>> from orchestrator.events import CampaignStarted
        >>> ledger = Ledger.open(":memory:")
        >>> _ = ledger.append("c1", CampaignStarted(name="demo", seed=0, spec={}), key="start")
        >>> verify(ledger, "c1").is_identical
        True
    """
    rows = list(ledger.chain_rows(campaign_id))
    broken, head = first_break(campaign_id, rows)
    events = [event_from_row(campaign_id, row) for row in rows]
    differences: list[dict] = []
    if broken is not None:
        differences.append({"table": "event", "key": ["hash", broken.seq], "stored": broken.stored or "(none)",
                            "rebuilt": broken.expected})
    try:
        rebuilt = rebuild_projections(ledger, campaign_id, events)
    except ValueError as exc:  # an event that no longer parses (pydantic's ValidationError is a ValueError)
        differences.append({"table": "event", "key": ["payload"], "stored": "an event that does not parse",
                            "rebuilt": f"nothing: {str(exc).splitlines()[0]}"})
        return _report(ledger, campaign_id, len(events), differences, head, broken)
    seqs = [e.seq for e in events]
    if seqs != list(range(1, len(seqs) + 1)):
        missing = sorted(set(range(1, max(seqs, default=0) + 1)) - set(seqs))
        differences.append({"table": "event", "key": ["seq"], "stored": f"gaps at {missing[:10]}",
                            "rebuilt": f"1..{len(seqs)}"})
    for table in PROJECTION_TABLES:
        stored, fresh = _dump(ledger.stored_rows(table, campaign_id)), _dump(rebuilt.stored_rows(table, campaign_id))
        for key in sorted(set(stored) | set(fresh), key=str):
            if stored.get(key) != fresh.get(key):
                differences.append(
                    {"table": table.__tablename__, "key": list(key), "stored": stored.get(key), "rebuilt": fresh.get(key)}
                )
    rebuilt.close()
    return _report(ledger, campaign_id, len(events), differences, head, broken)


def _report(ledger: Ledger, campaign_id: str, n_events: int, differences: list[dict], head: str,
            broken: ChainBreak | None) -> VerifyReport:
    notes = [f"{n.kind} (seq {n.first_seq}..{n.last_seq}, {n.at:%Y-%m-%d %H:%M} UTC): {n.detail}"
             for n in ledger.notes(campaign_id)]
    return VerifyReport(campaign_id, n_events, not differences, differences, head_hash=head,
                        chain_break=None if broken is None else broken.describe(), notes=notes)
