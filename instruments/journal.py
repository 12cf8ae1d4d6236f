"""``LabJournal``: the lab server's memory of accepted jobs and their results, in one small SQLite file.

The journal is what lets a restarted lab server keep its promises. It records every job the server accepted and,
once the job is finished, its ``LabResult`` (or that it was cancelled). After a restart the server serves finished
results from the journal and resubmits the accepted-but-unfinished jobs to its fresh driver. Those jobs never
completed, so nothing runs twice. A job completes at most once in the journal: a second completion of the same key
is ignored. The ``events`` table is an append-only audit trail (``accepted``, ``resubmitted``, ``completed``,
``cancelled``) that tests and operators can count.

Example:
    >>> from vocabulary.domain import Conditions
    >>> from instruments.base import LabJob, LabResult
    >>> journal = LabJournal(":memory:")
    >>> job = LabJob(job_key="k1", candidate=Conditions(values={"x": 1.0}, id="c1"))
    >>> journal.accept(job, lab_time_s=0.0)
    True
    >>> journal.accept(job, lab_time_s=5.0)  # already known: nothing new
    False
    >>> [entry.job_key for entry in journal.unfinished()]
    ['k1']
    >>> result = LabResult(job_key="k1", candidate_id="c1", value=1.0, submitted_s=0.0, completed_s=9.0)
    >>> journal.complete(result), journal.complete(result)
    (True, False)
    >>> journal.get("k1").state, journal.count_events("completed")
    ('done', 1)
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from instruments.base import LabJob, LabResult

__all__ = ["JournalEntry", "JournalState", "LabJournal"]

#: ``accepted`` is a job the server took and has not seen finish; the rest are terminal.
JournalState = Literal["accepted", "done", "failed", "cancelled"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    job_key TEXT PRIMARY KEY,
    job_json TEXT NOT NULL,
    state TEXT NOT NULL,
    result_json TEXT,
    accepted_s REAL NOT NULL,
    finished_s REAL
);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    job_key TEXT NOT NULL,
    kind TEXT NOT NULL,
    lab_time_s REAL,
    recorded_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


@dataclass(frozen=True)
class JournalEntry:
    """One journaled job: the job as accepted, its state and, when finished, its result."""

    job_key: str
    job: LabJob
    state: JournalState
    result: LabResult | None


class LabJournal:
    """Accepted jobs and results in SQLite (``":memory:"`` for a server that need not survive a restart).

    Every write commits at once, so a server killed at any moment loses at most the write under way. Safe to share
    between threads (one lock around the connection).
    """

    def __init__(self, path: str | Path = ":memory:") -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        if self.path != ":memory:":
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")  # with WAL: durable across a killed process
        self._db.executescript(_SCHEMA)

    # ------------------------------------------------------------------------------------------- writes
    def accept(self, job: LabJob, lab_time_s: float | None) -> bool:
        """Record ``job`` as accepted; False (and no change) if its key is already journaled."""
        with self._transaction():
            cursor = self._db.execute(
                "INSERT OR IGNORE INTO jobs (job_key, job_json, state, accepted_s) VALUES (?, ?, 'accepted', ?)",
                (job.job_key, job.model_dump_json(), lab_time_s if lab_time_s is not None else 0.0),
            )
            is_new = cursor.rowcount == 1
            if is_new:
                self._event(job.job_key, "accepted", lab_time_s)
            return is_new

    def complete(self, result: LabResult) -> bool:
        """Record the result of an accepted job; False if the job is unknown or already finished."""
        state = "done" if result.status == "ok" else "failed"
        with self._transaction():
            cursor = self._db.execute(
                "UPDATE jobs SET state = ?, result_json = ?, finished_s = ? WHERE job_key = ? AND state = 'accepted'",
                (state, result.model_dump_json(), result.completed_s, result.job_key),
            )
            is_new = cursor.rowcount == 1
            if is_new:
                self._event(result.job_key, "completed", result.completed_s)
            return is_new

    def cancel(self, job_key: str, lab_time_s: float | None) -> bool:
        """Record an accepted job as cancelled; False if it is unknown or already finished."""
        with self._transaction():
            cursor = self._db.execute(
                "UPDATE jobs SET state = 'cancelled', finished_s = ? WHERE job_key = ? AND state = 'accepted'",
                (lab_time_s, job_key),
            )
            is_new = cursor.rowcount == 1
            if is_new:
                self._event(job_key, "cancelled", lab_time_s)
            return is_new

    def note_resubmitted(self, job_key: str, lab_time_s: float | None) -> None:
        """Audit a job handed again to a fresh driver after a restart."""
        with self._transaction():
            self._event(job_key, "resubmitted", lab_time_s)

    def set_lab_time(self, lab_time_s: float) -> None:
        """Remember how far the lab clock got, so a restarted simulated lab continues from there."""
        with self._transaction():
            self._db.execute(
                "INSERT INTO meta (name, value) VALUES ('lab_time_s', ?) "
                "ON CONFLICT(name) DO UPDATE SET value = excluded.value",
                (repr(float(lab_time_s)),),
            )

    # ------------------------------------------------------------------------------------------- reads
    def get(self, job_key: str) -> JournalEntry | None:
        """The journaled job under ``job_key``, or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT job_key, job_json, state, result_json FROM jobs WHERE job_key = ?", (job_key,)
            ).fetchone()
        return None if row is None else _entry(row)

    def unfinished(self) -> list[JournalEntry]:
        """Accepted jobs without a result, in the order they were accepted."""
        with self._lock:
            rows = self._db.execute(
                "SELECT job_key, job_json, state, result_json FROM jobs WHERE state = 'accepted' ORDER BY rowid"
            ).fetchall()
        return [_entry(row) for row in rows]

    def lab_time_s(self) -> float | None:
        """The last lab clock recorded, or None."""
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE name = 'lab_time_s'").fetchone()
        return None if row is None else float(row[0])

    def count_states(self) -> dict[str, int]:
        """Journaled jobs by state."""
        counts = dict.fromkeys(("accepted", "done", "failed", "cancelled"), 0)
        with self._lock:
            for state, n in self._db.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state"):
                counts[state] = n
        return counts

    def count_events(self, kind: str, job_key: str | None = None) -> int:
        """How many ``kind`` events the journal holds (for one job when ``job_key`` is given)."""
        query, args = "SELECT COUNT(*) FROM events WHERE kind = ?", [kind]
        if job_key is not None:
            query, args = query + " AND job_key = ?", [kind, job_key]
        with self._lock:
            return int(self._db.execute(query, args).fetchone()[0])

    def events(self) -> list[tuple[str, str, float | None]]:
        """Every audit event as ``(job_key, kind, lab_time_s)``, oldest first."""
        with self._lock:
            return [tuple(row) for row in self._db.execute("SELECT job_key, kind, lab_time_s FROM events ORDER BY seq")]

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """One atomic write: a job row and its audit event land together or not at all."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _event(self, job_key: str, kind: str, lab_time_s: float | None) -> None:
        self._db.execute(
            "INSERT INTO events (job_key, kind, lab_time_s, recorded_at) VALUES (?, ?, ?, ?)",
            (job_key, kind, lab_time_s, datetime.now(UTC).isoformat()),
        )

    def __repr__(self) -> str:
        return f"LabJournal({self.path!r})"


def _entry(row: tuple) -> JournalEntry:
    job_key, job_json, state, result_json = row
    result = LabResult.model_validate_json(result_json) if result_json else None
    return JournalEntry(job_key=job_key, job=LabJob.model_validate_json(job_json), state=state, result=result)
