"""Rebuild the projections from the events alone and compare them with the stored ones; check that the campaign's
sequence numbers run 1..n without a gap and that every event matches its link in the hash chain (``ledger.chain``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from collections.abc import Iterable

from ..events import parse_payload
from .chain import GENESIS, ChainBreak, event_hash
from .driver import column_names, typed_rows
from .projections import ProjectionBatch, primary_key
from .store import Ledger
from .tables import PROJECTION_TABLES, CampaignRow

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


def _stored(ledger: Ledger, table: type, campaign_id: str) -> dict[tuple, dict]:
    """The stored rows of one table, by primary key, without ``updated_seq`` (read bookkeeping: rows migrated from
    before it existed hold 0, not projected content)."""
    column = "id" if table is CampaignRow else "campaign_id"
    pk = primary_key(table)
    names = column_names(table)
    at = [names.index(name) for name in pk]
    keep = [i for i, name in enumerate(names) if name != "updated_seq"]
    found = ledger._read(f"SELECT {', '.join(names)} FROM {table.__tablename__} WHERE {column} = ?", (campaign_id,))
    return {tuple(row[i] for i in at): {names[i]: row[i] for i in keep} for row in typed_rows(table, found)}


def _fold(campaign_id: str, rows: Iterable) -> ProjectionBatch:
    batch = ProjectionBatch(campaign_id)
    for row in rows:
        batch.apply(row.seq, parse_payload(row.type, row.payload))
    return batch


def rebuild_projections(ledger: Ledger, campaign_id: str, events: list | None = None) -> Ledger:
    """Fold the campaign's events (read from ``ledger`` unless given) into a fresh in-memory ledger and return it."""
    fresh = Ledger.open(":memory:")
    source = ledger.chain_rows(campaign_id) if events is None else events
    batch = _fold(campaign_id, source)
    with fresh.engine.begin() as conn:
        batch.write(conn)
    return fresh


class _Walk:
    """One pass over a campaign's stored events: checks the hash chain and counts them as they stream by."""

    def __init__(self, campaign_id: str, rows: Iterable):
        self.campaign_id, self.rows = campaign_id, rows
        self.n_events, self.seqs_ok, self.head = 0, True, GENESIS
        self.broken: ChainBreak | None = None

    def __iter__(self):
        for row in self.rows:
            self.n_events += 1
            self.seqs_ok = self.seqs_ok and row.seq == self.n_events
            if self.broken is None:
                expected = event_hash(self.head, self.campaign_id, row.seq, row.type, row.schema_version, row.payload,
                                      row.idempotency_key, row.actor, row.at)
                if row.hash == expected:
                    self.head = expected
                else:
                    self.broken = ChainBreak(row.seq, row.hash, expected)
            yield row


def verify(ledger: Ledger, campaign_id: str) -> VerifyReport:
    """Check the hash chain and compare stored projections with projections rebuilt from the events, in one
    streaming pass over the events (fetched in batches).

    Example:
        >>> from orchestrator.events import CampaignStarted
        >>> ledger = Ledger.open(":memory:")
        >>> _ = ledger.append("c1", CampaignStarted(name="demo", seed=0, spec={}), key="start")
        >>> verify(ledger, "c1").is_identical
        True
    """
    walk = _Walk(campaign_id, ledger.chain_rows(campaign_id))
    differences: list[dict] = []
    try:
        rebuilt = _fold(campaign_id, walk).final_rows()
    except ValueError as exc:  # an event that no longer parses (pydantic's ValidationError is a ValueError)
        for _ in walk:  # finish the walk: count the events and find the chain's break
            pass
        differences.append({"table": "event", "key": ["payload"], "stored": "an event that does not parse",
                            "rebuilt": f"nothing: {str(exc).splitlines()[0]}"})
        rebuilt = None
    if walk.broken is not None:
        differences.insert(0, {"table": "event", "key": ["hash", walk.broken.seq],
                               "stored": walk.broken.stored or "(none)", "rebuilt": walk.broken.expected})
    if not walk.seqs_ok:
        differences.append({"table": "event", "key": ["seq"], "stored": "seqs with gaps or repeats",
                            "rebuilt": f"1..{walk.n_events}"})
    for table in PROJECTION_TABLES if rebuilt is not None else ():
        stored = _stored(ledger, table, campaign_id)
        fresh = {key: {k: v for k, v in row.items() if k != "updated_seq"} for key, row in rebuilt[table].items()}
        for key in sorted(set(stored) | set(fresh), key=str):
            if stored.get(key) != fresh.get(key):
                differences.append({"table": table.__tablename__, "key": list(key), "stored": stored.get(key),
                                    "rebuilt": fresh.get(key)})
    notes = [f"{n.kind} (seq {n.first_seq}..{n.last_seq}, {n.at:%Y-%m-%d %H:%M} UTC): {n.detail}"
             for n in ledger.notes(campaign_id)]
    return VerifyReport(campaign_id, walk.n_events, not differences, differences, head_hash=walk.head,
                        chain_break=None if walk.broken is None else walk.broken.describe(), notes=notes)
