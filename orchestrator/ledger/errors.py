"""Ledger errors."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from contextlib import contextmanager

from vocabulary.domain import ClosedLoopError

__all__ = ["LedgerConflict", "LedgerError", "LedgerFull", "LedgerNeedsMigration", "LedgerTooNew", "full_disk_refused",
           "is_disk_full"]


class LedgerError(ClosedLoopError):
    """The ledger cannot be opened, read or appended to as asked."""


class LedgerConflict(LedgerError):
    """An append contradicts the ledger: a reused idempotency key with another payload, or a second start."""


class LedgerTooNew(LedgerError):
    """The ledger's schema is at a revision this closedloop does not know: a newer closedloop wrote it."""


class LedgerNeedsMigration(LedgerError):
    """A read-only open met a ledger whose schema is older than this closedloop reads (a read-only open never
    migrates)."""


class LedgerFull(LedgerError):
    """The disk (or the database's quota) is full: the write was refused whole, and the ledger is as it was."""


_SQLITE_FULL = 13
_POSTGRES_DISK_FULL = "53100"


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc``, or an error it was raised from or while handling, says the disk (or a quota) is full:
    SQLite's ``SQLITE_FULL``, PostgreSQL's ``disk_full`` (53100), or ``OSError`` ``ENOSPC`` / ``EDQUOT``.

    Example:
        >>> import errno
        >>> is_disk_full(RuntimeError("step failed")), is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
        (False, True)
    """
    import errno

    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        code = getattr(current, "sqlite_errorcode", None)
        if code is not None and code & 0xFF == _SQLITE_FULL:
            return True
        if getattr(current, "sqlstate", None) == _POSTGRES_DISK_FULL:
            return True
        todo.extend([getattr(current, "orig", None), current.__cause__, current.__context__])
    return False


@contextmanager
def full_disk_refused(location: str, campaign_id: str | None = None) -> Iterator[None]:
    """Turn a full disk met by a ledger write inside into ``LedgerFull``: one line naming the ledger and the fix
    (the write was one transaction, so nothing of it was kept)."""
    try:
        yield
    except Exception as exc:
        if not is_disk_full(exc):
            raise
        resume = (f"; the campaign continues with `closedloop run --resume {shlex.quote(campaign_id)} --db "
                  f"{shlex.quote(location)}`" if campaign_id else "")
        detail = " ".join(str(getattr(exc, "orig", None) or exc).split())
        raise LedgerFull(f"the disk holding ledger {location} is full ({detail}): the write was refused whole and "
                         f"the ledger is as it was; free space there (or copy the ledger to a disk with room), then "
                         f"run the command again{resume}") from None
