"""Chat-model calls recorded in the ledger (``LLMCall``), by call key: a planner or a judge looks a call up here
before making it, so a resumed step or a replay is answered from the record."""

from __future__ import annotations

from typing import Any

from vocabulary.events import Event, LLMCall

__all__ = ["RecordedCalls"]


class RecordedCalls:
    """Fold of ``LLMCall`` payloads by key (the first record of a key wins)."""

    types = frozenset({LLMCall.type})

    def __init__(self) -> None:
        self.by_key: dict[str, dict[str, Any]] = {}

    def on(self, event: Event) -> None:
        self.by_key.setdefault(event.payload["key"], event.payload)
