"""The hash chain that makes a campaign's events tamper-evident.

Every event stores ``hash = sha256(previous event's hash, campaign id, seq, type, schema version, payload, key, actor,
time)``; the first event of a campaign chains to ``GENESIS``. Changing any field of any stored or exported event, or
removing, inserting or reordering one, breaks the chain from that event on, and ``ledger verify`` and ``ledger import``
name the first event that does not match.

A chain proves that nothing changed since each event was hashed; it cannot stop someone who rewrites an event *and*
recomputes every hash after it, nor someone who removes the newest events (a cut chain is a sound chain). Against
both, the head is kept outside the event table: anchored in the checkpoint store at every commit and signed in every
export header (``ledger.anchor``, keyed with ``CLOSEDLOOP_LEDGER_KEY`` when set), and, for a head the ledger's writers
cannot reach at all, kept by the user (a lab notebook, a commit, a signed e-mail) and checked with
``ledger verify --expect-head`` and ``ledger import --expect-head``.

Example:
    >>> from datetime import datetime
    >>> h1 = event_hash(GENESIS, "c1", 1, "CampaignStarted", 1, '{"name":"demo"}', "c1:start", "orchestrator",
    ...                 datetime(2026, 1, 1))
    >>> len(h1), h1 == event_hash(GENESIS, "c1", 1, "CampaignStarted", 1, '{"name":"demo!"}', "c1:start",
    ...                           "orchestrator", datetime(2026, 1, 1))
    (64, False)
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

__all__ = ["CHAIN_ALGORITHM", "GENESIS", "ChainBreak", "ChainWalk", "canonical_time", "event_hash", "first_break",
           "stored_time_text"]

_string = json.encoder.encode_basestring  # a JSON string literal, non-ASCII kept (ensure_ascii=False)

CHAIN_ALGORITHM = "sha256-v1"
"""Names the hash and the field layout below; exports carry it so a later layout is told apart."""
GENESIS = "0" * 64
"""What the first event of every campaign chains to."""


def canonical_time(moment: datetime) -> str:
    """An event time as hashed: naive UTC, ISO 8601 with microseconds (what SQLite and PostgreSQL both keep)."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment.isoformat(timespec="microseconds")


_SQLITE_TIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}")
"""How SQLAlchemy stores a DateTime in SQLite: naive, a space before the time, always six fraction digits."""


def stored_time_text(value: str | datetime) -> str:
    """``canonical_time`` of an event time as the database driver returns it: a datetime (PostgreSQL) or text
    (SQLite). SQLite's usual text becomes the canonical one by swapping its space for ``T``, without a round trip
    through ``datetime``; any other text is parsed first."""
    if isinstance(value, str):
        if _SQLITE_TIME.fullmatch(value):
            return f"{value[:10]}T{value[11:]}"
        value = datetime.fromisoformat(value)
    return canonical_time(value)


def event_hash(previous: str, campaign_id: str, seq: int, event_type: str, schema_version: int, payload: str,
               idempotency_key: str, actor: str, at: datetime) -> str:
    """The 64-hex-digit sha256 of one event chained to ``previous``. ``payload`` is the stored canonical JSON text."""
    # The bytes of ``json.dumps([...], ensure_ascii=False, separators=(",", ":"))`` over these fields, written out
    # with the json module's own string encoder: the same text, at a third of the cost (``tests`` pin the equality).
    text = (f"[{_string(previous)},{_string(campaign_id)},{int(seq)},{_string(event_type)},{int(schema_version)},"
            f"{_string(payload)},{_string(idempotency_key)},{_string(actor)},{_string(canonical_time(at))}]")
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class ChainBreak:
    """The first event whose stored hash is not the hash of its content chained to the event before it."""

    seq: int
    stored: str
    expected: str

    def describe(self) -> str:
        if not self.stored:
            return f"event seq {self.seq} carries no hash (written before the chain existed and never chained)"
        return (f"event seq {self.seq} does not match its hash: it, or an event before it, was altered, removed or "
                f"reordered after it was written (stored {self.stored[:12]}…, its content hashes to "
                f"{self.expected[:12]}…)")


class ChainWalk:
    """Recompute one campaign's chain link after link, in seq order; the hashes are ``event_hash``'s.

    ``head`` is the hash the next event must chain to (``GENESIS`` before the first); the caller moves it on when a
    stored hash matches. A long walk (``verify``) costs about half of ``event_hash`` per event this way: the campaign
    id is encoded once, ``head`` (64 hex digits) needs no escaping, and SQLite's time text is rewritten rather than
    parsed (``stored_time_text``).
    """

    def __init__(self, campaign_id: str):
        self.head = GENESIS
        self._campaign = _string(campaign_id)

    def expected(self, seq: int, event_type: str, schema_version: int, payload: str, idempotency_key: str,
                 actor: str, at: str | datetime) -> str:
        """The hash of an event chained to ``head``; ``at`` as the driver returns it (text or datetime)."""
        text = (f'["{self.head}",{self._campaign},{int(seq)},{_string(event_type)},{int(schema_version)},'
                f'{_string(payload)},{_string(idempotency_key)},{_string(actor)},"{stored_time_text(at)}"]')
        return hashlib.sha256(text.encode()).hexdigest()


def first_break(campaign_id: str, rows: Iterable) -> tuple[ChainBreak | None, str]:
    """Walk a campaign's events in seq order; return the first break (or None) and the head hash recomputed.

    ``rows`` carry ``seq, type, schema_version, payload`` (stored text), ``idempotency_key, actor, at, hash``.
    """
    previous = GENESIS
    for row in rows:
        expected = event_hash(previous, campaign_id, row.seq, row.type, row.schema_version, row.payload,
                              row.idempotency_key, row.actor, row.at)
        if row.hash != expected:
            return ChainBreak(row.seq, row.hash, expected), previous
        previous = expected
    return None, previous
