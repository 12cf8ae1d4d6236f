"""One writer per campaign: the campaign **lease**, held by whoever drives a campaign (``closedloop run``, a resume,
a worker's turn, a Ray task).

Leases use the databases' own locks, not a lock table of ours, so a process that dies cannot keep one:

- PostgreSQL: a session-level advisory lock (``pg_try_advisory_lock(hashtextextended(campaign_id, 1))``) held on a
  dedicated connection; the server drops it with the connection. The holder's pid, host and start time are written
  into that connection's ``application_name``, where another process finds them through ``pg_locks``.
- SQLite: an OS file lock (filelock: ``flock`` on Unix, a byte-range lock on Windows) on a lock file beside the
  database (``<db>.lease.<campaign>.<crc32>``), which the OS drops with the process. The holder writes its host, pid
  and start time into ``<lock file>.holder`` and empties it on release, so a holder file that still names someone
  when the lock is free was left by a process that died: the next holder takes it over and logs so.

Example:
    >>> import tempfile, pathlib
    >>> from orchestrator.ledger import Ledger
    >>> ledger = Ledger.open(pathlib.Path(tempfile.mkdtemp()) / "l.db")
    >>> first, second = CampaignLease(ledger, "c1"), CampaignLease(ledger, "c1")
    >>> first.try_acquire(), second.try_acquire()
    (True, False)
    >>> second.holder().pid == os.getpid()
    True
    >>> first.release(); second.try_acquire()
    True
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
import socket
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import text

from orchestrator.ledger import Ledger
from vocabulary.domain import ClosedLoopError, SetupError

__all__ = ["CampaignBusy", "CampaignLease", "LeaseHolder", "LeaseLost"]

log = logging.getLogger(__name__)

_APP_PREFIX = "closedloop-lease"
# pg_locks splits a bigint advisory key into classid (high 32 bits) and objid (low 32 bits); objsubid 1 marks a
# bigint key. Seed 1 keeps the lease key apart from the per-append lock (seed 0).
_PG_HOLDER_QUERY = text(
    "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
    "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
    "AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended(:cid, 1)"
)


class LeaseLost(ClosedLoopError):
    """The lease on a campaign ended while its holder was driving it (its database connection went)."""


class CampaignBusy(SetupError):
    """Another process holds the campaign's lease: it is running the campaign now."""


@dataclass(frozen=True)
class LeaseHolder:
    """Who holds (or last held) a campaign's lease. ``since`` is UTC, ISO 8601, to the second."""

    host: str
    pid: int
    since: str

    @classmethod
    def this_process(cls) -> LeaseHolder:
        return cls(socket.gethostname(), os.getpid(), datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))

    def describe(self) -> str:
        return f"host {self.host}, pid {self.pid}, since {self.since}"

    def as_app_name(self) -> str:
        """A PostgreSQL ``application_name`` (at most 63 bytes: a long host name is cut)."""
        return f"{_APP_PREFIX} {self.pid} {self.since} {self.host}"[:63]

    @classmethod
    def from_app_name(cls, name: str) -> LeaseHolder | None:
        parts = name.split(" ", 3)
        if len(parts) != 4 or parts[0] != _APP_PREFIX or not parts[1].isdigit():
            return None
        return cls(host=parts[3], pid=int(parts[1]), since=parts[2])


class CampaignLease:
    """The exclusive right to drive one campaign: an advisory lock (PostgreSQL) or a file lock (SQLite)."""

    def __init__(self, ledger: Ledger, campaign_id: str):
        self.ledger, self.campaign_id = ledger, campaign_id
        self._connection: Any = None
        self._file: Any = None

    @property
    def is_held(self) -> bool:
        return self._connection is not None or self._file is not None

    def acquire(self) -> None:
        """Take the lease, or raise ``CampaignBusy`` naming the campaign and its holder; never waits."""
        if self.try_acquire():
            return
        holder = self.holder()
        who = holder.describe() if holder is not None else "a process that has not said who it is yet"
        where = f"lock file {self.lock_path()}" if not self.ledger.is_postgres else f"database {self.ledger.url}"
        raise CampaignBusy(
            f"campaign {self.campaign_id!r} is being run by another process ({who}; {where}); wait for it to "
            f"finish or stop it, then `closedloop run --resume {shlex.quote(self.campaign_id)}`")

    def try_acquire(self) -> bool:
        """Take the lease if nobody holds it; never waits."""
        if self.is_held:
            return True
        if self.ledger.is_postgres:
            return self._try_advisory_lock()
        return self._try_file_lock()

    def holder(self) -> LeaseHolder | None:
        """Who holds the lease now (None if nobody does, or the holder has not written its name yet)."""
        if self.ledger.is_postgres:
            with self.ledger.engine.connect() as connection:
                names = connection.execute(_PG_HOLDER_QUERY, {"cid": self.campaign_id}).scalars().all()
            return next((h for h in map(LeaseHolder.from_app_name, names) if h is not None), None)
        return _read_holder(self.holder_path())

    def check(self) -> None:
        """Raise ``LeaseLost`` unless the lease is still held (PostgreSQL: its connection still answers)."""
        if self._file is not None:
            return
        if self._connection is None:
            raise LeaseLost(f"no lease held on campaign {self.campaign_id!r}")
        try:
            self._connection.execute(text("SELECT 1"))
            self._connection.commit()
        except Exception as exc:
            self._connection = None
            raise LeaseLost(f"the lease on campaign {self.campaign_id!r} was lost with its connection: {exc}") from exc

    def release(self) -> None:
        if self._connection is not None:
            with contextlib.suppress(Exception):
                self._connection.execute(text("SELECT pg_advisory_unlock(hashtextextended(:cid, 1))"),
                                         {"cid": self.campaign_id})
                self._connection.execute(text("RESET application_name"))
                self._connection.commit()
            self._connection.close()
            self._connection = None
        if self._file is not None:
            with contextlib.suppress(OSError):
                self.holder_path().write_text("")  # a clean release leaves no holder behind
            self._file.release()
            self._file = None

    def lock_path(self) -> Path:
        """The lock file of a SQLite ledger's campaign, beside the database."""
        db = self.ledger.path  # the file itself, never a prefix stripped off its URL (a path may hold ``?``)
        if db is None:
            raise ClosedLoopError("leases need a file or PostgreSQL ledger; an in-memory ledger has one process only")
        digest = zlib.crc32(self.campaign_id.encode())
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in self.campaign_id)[:60]
        return db.with_name(f"{db.name}.lease.{safe}.{digest:08x}")

    def _try_advisory_lock(self) -> bool:
        connection = self.ledger.engine.connect()
        try:
            is_ok = connection.execute(text("SELECT pg_try_advisory_lock(hashtextextended(:cid, 1))"),
                                       {"cid": self.campaign_id}).scalar()
            if is_ok:
                connection.execute(text("SELECT set_config('application_name', :name, false)"),
                                   {"name": LeaseHolder.this_process().as_app_name()})
            connection.commit()
        except Exception:
            connection.close()
            raise
        if not is_ok:
            connection.close()
            return False
        self._connection = connection
        return True

    def holder_path(self) -> Path:
        """The file beside the lock file where a SQLite lease's holder writes who it is (host, pid, since)."""
        lock = self.lock_path()
        return lock.with_name(lock.name + ".holder")

    def _try_file_lock(self) -> bool:
        from filelock import FileLock, Timeout

        # the OS lock only (flock, or a byte-range lock on Windows): a soft lock would outlive a killed holder
        lock = FileLock(self.lock_path(), timeout=0, thread_local=False, fallback_to_soft=False)
        try:
            lock.acquire()
        except Timeout:
            return False
        previous = _read_holder(self.holder_path())
        if previous is not None:
            log.warning("campaign %r: taking over the lease left by %s (that process is gone without releasing it)",
                        self.campaign_id, previous.describe())
        self.holder_path().write_text(json.dumps(LeaseHolder.this_process().__dict__))
        self._file = lock
        return True

    def __enter__(self) -> CampaignLease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_holder(path: Path) -> LeaseHolder | None:
    try:
        data = json.loads(path.read_text() or "null")
        return LeaseHolder(host=str(data["host"]), pid=int(data["pid"]), since=str(data["since"]))
    except (OSError, ValueError, TypeError, KeyError):
        return None
