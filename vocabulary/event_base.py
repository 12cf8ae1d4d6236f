"""The event envelope and the payload base: the registry every payload class joins, parsing and batch expansion.

A leaf below ``vocabulary.events`` (which defines the payloads and re-exports all of this); import from there, so
every payload class is registered before one is parsed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

__all__ = [
    "EVENT_TYPES",
    "SCHEMA_VERSION",
    "Event",
    "EventPayload",
    "batch_records",
    "expand_batches",
    "parse_payload",
]

SCHEMA_VERSION = 1


EVENT_TYPES: dict[str, type[EventPayload]] = {}
"""Every payload class by its ``type``; a subclass registers itself when it is defined."""


class EventPayload(BaseModel):
    """Base of every event payload. ``type`` and ``schema_version`` are class-level constants."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    type: ClassVar[str]
    schema_version: ClassVar[int] = SCHEMA_VERSION

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        name = cls.__dict__.get("type")
        if name is None:
            return  # an abstract intermediate class
        if name in EVENT_TYPES and EVENT_TYPES[name].__qualname__ != cls.__qualname__:
            raise TypeError(f"event type {name!r} is defined twice ({EVENT_TYPES[name].__qualname__}, {cls.__qualname__})")
        EVENT_TYPES[name] = cls


def parse_payload(event_type: str, payload: str | dict[str, Any]) -> EventPayload:
    """Rebuild a typed payload from its type name and JSON text (or dict)."""
    try:
        cls = EVENT_TYPES[event_type]
    except KeyError as exc:
        raise ValueError(f"event type {event_type!r} is unknown; known types: {sorted(EVENT_TYPES)}") from exc
    return cls.model_validate_json(payload) if isinstance(payload, str) else cls.model_validate(payload)


def batch_records(event_type: str, payload: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A stored batch event (``Screened``, ``RungsAssessed``, ``RungsValidated``) as ``(type, payload)`` pairs of the
    per-item events older ledgers hold, in order: each item with the batch's other fields (its iteration, ...); any
    other event as itself. Works on the stored dicts, without validating them.

    Example:
        >>> step = {"kind": "promoted", "candidate_id": "X", "from_rung": "a", "to_rung": "lab", "decision": "hold"}
        >>> batch_records("Screened", {"iteration": 2, "steps": [step]})[0]
        ('Promoted', {'iteration': 2, 'candidate_id': 'X', 'from_rung': 'a', 'to_rung': 'lab', 'decision': 'hold'})
    """
    cls = EVENT_TYPES.get(event_type)
    field = getattr(cls, "items_field", None)
    if field is None:
        return [(event_type, payload)]
    common = {k: v for k, v in payload.items() if k != field}
    return [(cls.item_types[item.get("kind", "")], {**common, **{k: v for k, v in item.items() if k != "kind"}})
            for item in payload[field]]


class Event(BaseModel):
    """The envelope of one ledger entry, as read back."""

    model_config = ConfigDict(frozen=True)
    campaign_id: str
    seq: int
    type: str
    schema_version: int
    payload: dict[str, Any]
    idempotency_key: str
    actor: str
    at: datetime

    def typed(self) -> EventPayload:
        """The payload as its typed model."""
        return parse_payload(self.type, self.payload)


def expand_batches(events: Iterable[Event]) -> Iterator[Event]:
    """Events with every batch event (``Screened``, ``RungsAssessed``, ``RungsValidated``) replaced by its items as
    the per-item events older ledgers hold (same envelope and seq), so a reader written for those reads both shapes."""
    for event in events:
        if getattr(EVENT_TYPES.get(event.type), "items_field", None) is None:
            yield event
            continue
        for event_type, payload in batch_records(event.type, event.payload):
            yield event.model_copy(update={"type": event_type, "payload": payload})
