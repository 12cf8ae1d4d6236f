"""The size a person asked the next lab batch to have (``BatchRequested``, from ``campaign.suggest(n)``)."""

from __future__ import annotations

from vocabulary.events import BatchRequested, Dispatched, Event

__all__ = ["BatchRequest"]


class BatchRequest:
    """Fold of ``BatchRequested`` and ``Dispatched``: ``n`` is the requested size of the next batch, or None (the
    spec's ``batch_size``); a request holds until a job is dispatched after it.

    Example:
        >>> from datetime import UTC, datetime
        >>> def event(seq, kind, payload):
        ...     return Event(campaign_id="c", seq=seq, type=kind, schema_version=1, payload=payload,
        ...                  idempotency_key=str(seq), actor="human", at=datetime.now(UTC))
        >>> fold = BatchRequest()
        >>> fold.on(event(1, "BatchRequested", {"n": 3, "by": "human"})); fold.n
        3
        >>> fold.on(event(2, "Dispatched", {})); fold.n is None
        True
    """

    types = frozenset({BatchRequested.type, Dispatched.type})

    def __init__(self) -> None:
        self.n: int | None = None

    def on(self, event: Event) -> None:
        self.n = event.payload["n"] if event.type == BatchRequested.type else None
