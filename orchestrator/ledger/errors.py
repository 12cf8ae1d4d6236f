"""Ledger errors."""

from __future__ import annotations

from vocabulary.domain import ClosedLoopError

__all__ = ["LedgerConflict", "LedgerError"]


class LedgerError(ClosedLoopError):
    """The ledger cannot be opened, read or appended to as asked."""


class LedgerConflict(LedgerError):
    """An append contradicts the ledger: a reused idempotency key with another payload, or a second start."""
