"""The simulated lab's retired jobs, kept in about 17 bytes each so a long campaign's lab does not grow.

A retired job is one whose collected result the lab let go (``SimLabDriver(n_results_kept=...)``). The lab still
needs its key, a fingerprint of the job and its final state: ``submit`` stays idempotent on the key (and refuses
the key for another job) and ``status`` still answers. A Python dict of key strings and small objects costs about
190 bytes a job; this index keeps 64-bit digests of the key and of the job, and the state as one byte, in sorted
numpy arrays, with the newest few thousand in a dict until they are merged in (one O(n) merge per
``merge_every`` retirements).

Two different keys share a 64-bit digest with probability about n² / 2⁶⁵ (3 · 10⁻⁸ for a million jobs); the lab
would then refuse the newer key as "already submitted with a different job", the safe failure.

Example:
    >>> jobs = RetiredJobs(merge_every=2)
    >>> for n in range(5):
    ...     jobs.add(f"c/{n}", fingerprint=n, state="done")
    >>> jobs.get("c/3"), jobs.get("c/9"), len(jobs)
    (RetiredJob(fingerprint=3, state='done'), None, 5)
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import get_args

import numpy as np

from instruments.base import JobState, LabJob
from instruments.simlab_records import RetiredJob

__all__ = ["RetiredJobs", "job_fingerprint"]

_STATES: tuple[str, ...] = get_args(JobState)


def _digest(text: str) -> int:
    """A stable signed 64-bit digest of ``text`` (blake2b)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little", signed=True)


def job_fingerprint(job: LabJob) -> int:
    """A job's fingerprint: a retired key resubmitted with another job is refused by it."""
    return _digest(job.model_dump_json())


class RetiredJobs:
    """Key -> (fingerprint, final state) of retired jobs, about 17 bytes a job.

    Args:
        merge_every: retirements held in a dict before they are merged into the sorted arrays.
    """

    def __init__(self, *, merge_every: int = 1024) -> None:
        self.merge_every = merge_every
        self._recent: dict[int, tuple[int, int]] = {}
        self._keys = np.empty(0, dtype=np.int64)
        self._fingerprints = np.empty(0, dtype=np.int64)
        self._states = np.empty(0, dtype=np.uint8)
        self.n_by_state: Counter[str] = Counter()
        """Retired jobs by final state."""

    def add(self, key: str, *, fingerprint: int, state: JobState) -> None:
        self._recent[_digest(key)] = (fingerprint, _STATES.index(state))
        self.n_by_state[state] += 1
        if len(self._recent) >= self.merge_every:
            self._merge()

    def get(self, key: str) -> RetiredJob | None:
        digest = _digest(key)
        found = self._recent.get(digest)
        if found is not None:
            return RetiredJob(found[0], _STATES[found[1]])
        at = int(np.searchsorted(self._keys, digest))
        if at < len(self._keys) and self._keys[at] == digest:
            return RetiredJob(int(self._fingerprints[at]), _STATES[int(self._states[at])])
        return None

    def __len__(self) -> int:
        return len(self._keys) + len(self._recent)

    def _merge(self) -> None:
        keys = np.fromiter(self._recent, dtype=np.int64, count=len(self._recent))
        order = np.argsort(keys)
        values = list(self._recent.values())
        fingerprints = np.fromiter((values[i][0] for i in order), dtype=np.int64, count=len(order))
        states = np.fromiter((values[i][1] for i in order), dtype=np.uint8, count=len(order))
        at = np.searchsorted(self._keys, keys[order])
        self._keys = np.insert(self._keys, at, keys[order])
        self._fingerprints = np.insert(self._fingerprints, at, fingerprints)
        self._states = np.insert(self._states, at, states)
        self._recent.clear()
