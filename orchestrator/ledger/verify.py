"""Rebuild the projections from the events alone and compare them with the stored ones; check that the campaign's
sequence numbers run 1..n without a gap, that every event matches its link in the hash chain (``ledger.chain``), and
that the chain reaches the head anchored outside the event table (``ledger.anchor``) and, when given, a head the user
kept (``expect_head``): a chain cut after its last event is still a sound chain, and only a head kept elsewhere shows
that events were removed from its end.

One streaming fold: the events come in batches of driver rows (``Ledger.chain_batches``), and each is hashed,
parsed and folded as it passes, so memory holds one batch of events plus the rebuilt projections. The comparison
is of column tuples keyed by primary key; only rows that differ become dicts.
"""

from __future__ import annotations

import functools
import gc
import operator
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from orchestrator.ledger.anchor import KEY_ENV, SignedHead, ledger_key
from orchestrator.ledger.chain import ChainBreak, ChainWalk
from orchestrator.ledger.driver import column_names, row_dicts
from orchestrator.ledger.errors import LedgerError
from orchestrator.ledger.projections import ProjectionBatch, primary_key
from orchestrator.ledger.store import Ledger
from orchestrator.ledger.tables import PROJECTION_TABLES, CampaignRow
from vocabulary.events import parse_payload

__all__ = ["VerifyReport", "check_expected_head", "check_signed_head", "rebuild_projections", "verify"]


@dataclass
class VerifyReport:
    """Outcome of a verify: ``is_identical`` (the hash chain holds and the projections rebuilt from the events equal
    the stored ones) and, when not, what differs (table, key, stored, rebuilt). ``head_hash`` is the chain's newest
    hash, worth keeping outside the ledger; ``notes`` say what the ledger itself did to the record (``LedgerNoteRow``).
    ``anchor`` says where the head is anchored outside the event table and how it compares; ``head_problems`` are the
    one-line reasons the chain does not reach that anchor or the expected head (each also one of ``differences``).
    """

    campaign_id: str
    n_events: int
    is_identical: bool
    differences: list[dict] = field(default_factory=list)
    head_hash: str = ""
    chain_break: str | None = None
    notes: list[str] = field(default_factory=list)
    anchor: str = ""
    head_problems: list[str] = field(default_factory=list)


_gc_lock = threading.Lock()
_gc_pausers = 0
_gc_was_enabled = False


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Hold off Python's cyclic garbage collector while a verify runs, in every thread at once (the last verify to
    finish turns it back on, if it was on).

    A verify allocates a few containers per event (the rebuilt rows, the compared tuples) and frees no cycles, yet
    each allocation burst sets off collections, and a full one walks the whole heap: a third of a verify's time on
    a 15,000-event ledger, more in a process holding a campaign. Reference counting still frees everything.
    """
    global _gc_pausers, _gc_was_enabled
    with _gc_lock:
        if _gc_pausers == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pausers += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pausers -= 1
            if _gc_pausers == 0 and _gc_was_enabled:
                gc.enable()


def _stored(ledger: Ledger, table: type, campaign_id: str) -> list[tuple]:
    """The stored rows of one table as the driver returns them, columns in ``column_names(table)`` order."""
    column = "id" if table is CampaignRow else "campaign_id"
    return ledger._read(f"SELECT {', '.join(column_names(table))} FROM {table.__tablename__} WHERE {column} = ?",
                        (campaign_id,))


def _getter(positions: list) -> operator.itemgetter | Callable[[Any], tuple]:
    """``itemgetter`` that always returns a tuple (a one-item ``itemgetter`` returns the item)."""
    if len(positions) == 1:
        return lambda row, at=positions[0]: (row[at],)
    return operator.itemgetter(*positions)


def _table_differences(table: type, stored_rows: list[tuple], rebuilt: dict[tuple, dict]) -> list[dict]:
    """The rows that differ between a stored table and its rebuilt rows, by primary key, sorted by key as text.

    ``updated_seq`` is left out: it is read bookkeeping (rows migrated from before it existed hold 0), not projected
    content. Rows compare as tuples of their other columns; SQLite's 0/1 for a boolean equals ``False``/``True``
    there, as it did in the dicts this compared before, and differing rows are shown as dicts with booleans.
    """
    names = column_names(table)
    kept = [name for name in names if name != "updated_seq"]
    key_of = _getter([names.index(name) for name in primary_key(table)])
    stored_values = _getter([names.index(name) for name in kept])
    rebuilt_values = _getter(kept)
    # map over C getters: no Python frame per row (these tables hold a row per candidate, job and score)
    stored = dict(zip(map(key_of, stored_rows), map(stored_values, stored_rows), strict=True))
    fresh = dict(zip(rebuilt.keys(), map(rebuilt_values, rebuilt.values()), strict=True))
    if stored == fresh:
        return []
    raw = {key_of(row): row for row in stored_rows}

    def shown_stored(key: tuple) -> dict | None:
        return None if key not in raw else {k: v for k, v in row_dicts(table, [raw[key]])[0].items()
                                            if k != "updated_seq"}

    def shown_rebuilt(key: tuple) -> dict | None:
        return None if key not in rebuilt else {k: v for k, v in rebuilt[key].items() if k != "updated_seq"}

    differing = sorted((key for key in stored.keys() | fresh.keys() if stored.get(key) != fresh.get(key)), key=str)
    return [{"table": table.__tablename__, "key": list(key), "stored": shown_stored(key),
             "rebuilt": shown_rebuilt(key)} for key in differing]


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


@dataclass
class _Walk:
    """What one pass over a campaign's stored events found: their count, whether seqs ran 1..n, the chain's head
    (the last hash that matched) and its first break, the rebuilt projections and the first event that did not
    parse."""

    n_events: int = 0
    is_seq_ok: bool = True
    head: str = ""
    broken: ChainBreak | None = None
    rebuilt: ProjectionBatch | None = None
    parse_error: ValueError | None = None


def _walk(ledger: Ledger, campaign_id: str) -> _Walk:
    """Hash, parse and fold every event of the campaign in one streaming pass."""
    chain, batch, out = ChainWalk(campaign_id), ProjectionBatch(campaign_id), _Walk()
    n, is_chained = 0, True
    apply = batch.apply
    for rows in ledger.chain_batches(campaign_id):
        for seq, event_type, schema_version, payload, key, actor, at, stored_hash in rows:
            n += 1
            if seq != n:
                out.is_seq_ok = False
            if is_chained:
                expected = chain.expected(seq, event_type, schema_version, payload, key, actor, at)
                if stored_hash == expected:
                    chain.head = expected
                else:
                    out.broken, is_chained = ChainBreak(seq, stored_hash, expected), False
            if batch is not None:
                try:
                    apply(seq, parse_payload(event_type, payload))
                except ValueError as exc:  # an event that no longer parses (pydantic's ValidationError is one)
                    out.parse_error, batch = exc, None
    out.n_events, out.head, out.rebuilt = n, chain.head, batch
    return out


def verify(ledger: Ledger, campaign_id: str, *, expect_head: str | None = None) -> VerifyReport:
    """Check the hash chain and compare stored projections with projections rebuilt from the events, in one
    streaming pass over the events (fetched in batches); then check the chain against the campaign's anchored head
    (``ledger.anchor``: one ahead of the events, or naming another hash at its seq, is a difference) and against
    ``expect_head``, a head hash kept outside the ledger, which must be the hash of one of its events (the head, or
    an earlier one when the campaign went on since).

    Example:
        >>> from vocabulary.events import CampaignStarted
        >>> ledger = Ledger.open(":memory:")
        >>> _ = ledger.append("c1", CampaignStarted(name="demo", seed=0, spec={}), key="start")
        >>> verify(ledger, "c1").is_identical
        True
    """
    with _gc_paused():
        return _verify(ledger, campaign_id, None if expect_head is None else expect_head.strip().lower())


def _verify(ledger: Ledger, campaign_id: str, expect_head: str | None) -> VerifyReport:
    anchored, anchor_error, where = _read_anchor(ledger, campaign_id)  # before the walk, which it never passes
    walk = _walk(ledger, campaign_id)
    differences: list[dict] = []
    if walk.broken is not None:
        differences.append({"table": "event", "key": ["hash", walk.broken.seq],
                            "stored": walk.broken.stored or "(none)", "rebuilt": walk.broken.expected})
    if walk.parse_error is not None:
        differences.append({"table": "event", "key": ["payload"], "stored": "an event that does not parse",
                            "rebuilt": f"nothing: {str(walk.parse_error).splitlines()[0]}"})
    if not walk.is_seq_ok:
        differences.append({"table": "event", "key": ["seq"], "stored": "seqs with gaps or repeats",
                            "rebuilt": f"1..{walk.n_events}"})
    if walk.rebuilt is not None:
        rebuilt = walk.rebuilt.final_rows()
        for table in PROJECTION_TABLES:
            differences += _table_differences(table, _stored(ledger, table, campaign_id), rebuilt[table])
    notes = [f"{n.kind} (seq {n.first_seq}..{n.last_seq}, {n.at:%Y-%m-%d %H:%M} UTC): {n.detail}"
             for n in ledger.notes(campaign_id)]
    is_sound = walk.broken is None and walk.is_seq_ok
    head = (walk.n_events, walk.head) if is_sound else (ledger.head_seq(campaign_id), ledger.head_hash(campaign_id))
    anchor, problems = anchor_error or "", []
    if anchor_error is None:
        anchor, problems = check_signed_head(anchored, head, functools.partial(ledger.event_hash_at, campaign_id),
                                             where=where, has_store=bool(where))
    kinds = ["anchor"] * len(problems)
    if expect_head is not None:
        status, problem = check_expected_head(expect_head, head, _seq_of_hash(ledger, campaign_id, expect_head))
        anchor = "; ".join(part for part in (anchor, status) if part)
        if problem is not None:
            problems, kinds = [*problems, problem], [*kinds, "expected"]
    differences += [{"table": "head", "key": [kind], "stored": line, "rebuilt": f"seq {head[0]} (hash {head[1]})"}
                    for kind, line in zip(kinds, problems, strict=True)]
    return VerifyReport(campaign_id, walk.n_events, not differences, differences, head_hash=walk.head,
                        chain_break=None if walk.broken is None else walk.broken.describe(), notes=notes,
                        anchor=anchor, head_problems=problems)


def _read_anchor(ledger: Ledger, campaign_id: str) -> tuple[SignedHead | None, str | None, str]:
    """The campaign's anchored head, why it could not be read (which is reported, not failed: a checkpoint store
    that is damaged or unreadable says nothing of the events), and where it is kept ("" for an in-memory ledger)."""
    where = ""
    try:
        store = ledger.anchor.store
        if store is None:
            return None, None, ""
        where = store.where
        return store.read(campaign_id), None, where
    except (OSError, ValueError, sqlite3.Error, SQLAlchemyError, LedgerError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return None, f"the head anchor {('in ' + where + ' ') if where else ''}cannot be read ({reason}), so it " \
                     "was not checked", where or "?"


def _seq_of_hash(ledger: Ledger, campaign_id: str, head_hash: str) -> int | None:
    found = ledger._read("SELECT min(seq) FROM event WHERE campaign_id = ? AND hash = ?", (campaign_id, head_hash))
    return found[0][0] if found else None


_REPLACED = " (or, if this ledger replaced another on purpose, move {where} away: it belongs to the other)"


def check_signed_head(anchored: SignedHead | None, head: tuple[int, str], hash_at: Callable[[int], str | None], *,
                      where: str, has_store: bool = True, key: bytes | None = None) -> tuple[str, list[str]]:
    """Compare a signed head with a campaign's events, whose head is ``head`` (seq, hash; ``hash_at(seq)`` reads
    another event's hash): a status line, and the problems (one line each, naming both heads).

    ``key`` defaults to ``CLOSEDLOOP_LEDGER_KEY``. A keyed head is checked when the key is known; an unkeyed one,
    or none, is reported as such and is no problem: only a head that was kept (anchored or expected) and is
    contradicted is.
    """
    key = ledger_key() if key is None else key
    if not has_store:
        return "no anchor: an in-memory ledger keeps none", []
    if anchored is None:
        return (f"no anchor in {where} (the ledger was copied without it, or written before anchors): nothing outside "
                "the event table shows where the chain ends; check a kept head with --expect-head"), []
    ours = f"seq {head[0]} (hash {head[1]})"
    if anchored.n_events > head[0]:
        return "", [f"the head anchored in {where} is {anchored.describe()}, but the ledger's events end at {ours}: "
                    f"{anchored.n_events - head[0]} event(s) were removed from the end after they were anchored; "
                    "restore the campaign from a backup or an export" + _REPLACED.format(where=where)]
    found = head[1] if anchored.n_events == head[0] else hash_at(anchored.n_events)
    if found != anchored.head_hash:
        return "", [f"the head anchored in {where} is {anchored.describe()}, but the ledger's event at seq "
                    f"{anchored.n_events} has hash {found} (its head: {ours}): the events were rewritten after they "
                    "were anchored; restore the campaign from a backup or an export" + _REPLACED.format(where=where)]
    problem = anchored.signature_problem(key)
    if problem is not None:
        return "", [f"the head anchored in {where} ({anchored.describe()}) does not verify: {problem}; the ledger's "
                    f"head is {ours}"]
    if not anchored.is_keyed:
        signed = "not keyed" + (f" (it was written without {KEY_ENV})" if key is not None else "")
    elif key is None:
        signed = f"keyed (key id {anchored.key_id}), signature not checked: set {KEY_ENV} to check it"
    else:
        signed = "keyed, signature verified"
    later = "" if anchored.n_events == head[0] else f", {head[0] - anchored.n_events} event(s) after it"
    return f"anchored in {where} at seq {anchored.n_events}{later}, {signed}", []


def check_expected_head(expected: str, head: tuple[int, str], seq: int | None) -> tuple[str, str | None]:
    """Compare a head hash the user kept with a chain whose head is ``head`` (seq, hash) and in which ``expected``
    is the hash of the event at ``seq`` (None: of none): a status, or the problem (one line naming both heads)."""
    if seq is None:
        return "", (f"the expected head {expected} is not the hash of any event of the chain, whose head is seq "
                    f"{head[0]} (hash {head[1]}): events were removed or rewritten since that head was kept, or this "
                    "is another campaign")
    if seq == head[0]:
        return "the expected head is the head", None
    return f"the expected head is seq {seq}, {head[0] - seq} event(s) were appended since", None
