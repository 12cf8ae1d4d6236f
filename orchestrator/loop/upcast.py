"""Old event shapes, read in one place: every fold of the view takes a ledger event's records in today's shape.

Ledgers from before the batch events hold one ``Simulated`` per rung result and one ``Promoted`` per decision; today a
round is one ``Screened`` event whose steps are those records (and ``RungsAssessed``, ``RungsValidated`` batch their
per-rung records likewise). ``records`` gives either as the per-item ``(type, payload)`` pairs, so no fold reads the
stored shape. Fields added to a payload later are read with their defaults here (``observe_iteration``).

Example:
    >>> from vocabulary.events import Event
    >>> from datetime import UTC, datetime
    >>> step = {"kind": "promoted", "candidate_id": "X", "from_rung": "a", "to_rung": "lab", "decision": "hold"}
    >>> event = Event(campaign_id="c", seq=3, type="Screened", schema_version=1, payload={"iteration": 2,
    ...               "steps": [step]}, idempotency_key="k", actor="screen", at=datetime(2026, 1, 1, tzinfo=UTC))
    >>> records(event)[0][0]
    'Promoted'
"""

from __future__ import annotations

from typing import Any

from vocabulary.events import Event, batch_records

__all__ = ["observe_iteration", "records", "records_of"]


def records(event: Event) -> list[tuple[str, dict[str, Any]]]:
    """The event as per-item records of today's types, in order (the event itself when it is not a batch)."""
    return batch_records(event.type, event.payload)


def observe_iteration(payload: dict[str, Any]) -> int | None:
    """The observe round that recorded an ``Observed`` result (None: an imported result, or a ledger from before the
    field was recorded)."""
    return payload.get("observe_iteration")


def records_of(event_type: str, payload: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``records`` of a stored event given as its type and payload."""
    return batch_records(event_type, payload)
