"""The lab surrogate's fits (``SurrogateUpdated``), one per learn step."""

from __future__ import annotations

from typing import Any

from vocabulary.events import Event, SurrogateUpdated

__all__ = ["SurrogateFits"]


class SurrogateFits:
    """Fold of ``SurrogateUpdated`` payloads, in ledger order."""

    types = frozenset({SurrogateUpdated.type})

    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []

    def on(self, event: Event) -> None:
        self.updates.append(event.payload)

    @property
    def latest_state(self) -> dict | None:
        """The newest fitted hyperparameters (None before any fit)."""
        return next((u["hyperparameters"] for u in reversed(self.updates) if u["hyperparameters"]), None)
