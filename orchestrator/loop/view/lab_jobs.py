"""The lab's jobs as a fold of ``Dispatched`` and ``Observed`` events: open jobs, results in the order they were
observed, failures with their reasons, and past results imported from a CSV.

A job is opened by its ``Dispatched`` event and closed by the ``Observed`` event of its key; the fold keeps a few
numbers per finished job, not its row, so a long campaign's loop stays small.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from orchestrator.loop.upcast import observe_iteration
from vocabulary.events import Dispatched, Event, Observed

__all__ = ["JobRecord", "LabHistory", "LabJobs"]


@dataclass(frozen=True, slots=True)
class JobRecord:
    """A job the lab holds now: what dispatched it and when (``submitted_s``: lab clock, seconds)."""

    job_key: str
    candidate_id: str
    arm: str
    iteration: int
    driver: str
    dispatched_seq: int
    submitted_s: float


@dataclass(frozen=True)
class LabHistory:
    """Lab jobs so far.

    ``results`` holds (candidate id, arm, value, utility) of successful jobs in the order they were observed, and
    ``iterations`` the iteration each of them was dispatched in and ``dispatched_seqs`` the ledger sequence of its
    dispatch (-1 for an imported past result); ``failures`` holds (job key, candidate id, arm, reason) of failed
    ones. ``tested`` are candidates with at least one job; ``pending`` candidates have a job in the lab now.
    ``last_dispatch_iteration`` is the latest iteration that dispatched a job (-1 before any), ``lab_time_s`` the lab
    time used from the first dispatch to the latest dispatch or result, seconds.
    """

    tested: frozenset[str]
    pending: tuple[str, ...]
    results: tuple[tuple[str, str, float, float], ...]
    failures: tuple[tuple[str, str, str, str], ...]
    n_dispatched: int
    n_by_arm: dict[str, int] = field(default_factory=dict)
    iterations: tuple[int, ...] = ()
    dispatched_seqs: tuple[int, ...] = ()
    last_dispatch_iteration: int = -1
    lab_time_s: float = 0.0
    measured: tuple[dict[str, float], ...] = ()
    """Per result (same order as ``results``): every measured property, the first objective's included."""
    learned_failures: tuple[str, ...] = ()
    """Candidates whose failure the campaign learns from (an infeasible result, or any lab failure under the
    failure policy ``learn``), oldest first, each once."""

    @property
    def best(self) -> tuple[str, str, float, float] | None:
        """The result with the highest utility (earliest wins ties)."""
        return max(self.results, key=lambda r: r[3], default=None)

    @property
    def n_finished(self) -> int:
        return len(self.results) + len(self.failures)


class LabJobs:
    """Fold of the lab's jobs (``Dispatched``, ``Observed``)."""

    types = frozenset({Dispatched.type, Observed.type})

    def __init__(self, utility, *, property: str = "value", learns_failures: bool = False):
        self._utility = utility
        self._property = property
        self._learns_failures = learns_failures
        self.open: dict[str, JobRecord] = {}
        self.keys: set[str] = set()
        """Every job key ever dispatched (whatever became of the job)."""
        self.tested: set[str] = set()
        self.n_dispatched = 0
        self.n_by_arm: dict[str, int] = {}
        self.n_observed = 0
        """``Observed`` events of every kind (lab, cancelled, imported)."""
        self.last_observe_iteration: int | None = None
        """The observe round of the newest ``Observed`` event (None before any, or for an imported one)."""
        self.failed: dict[str, Observed] = {}
        """Failed lab results by job key, as recorded."""
        self._done: list[tuple[str, str, float, float]] = []
        self._done_iterations: list[int] = []
        self._done_seqs: list[int] = []
        self._failures: list[tuple[str, str, str, str]] = []
        self._imported: list[tuple[str, str, float, float]] = []
        self._done_measured: list[dict[str, float]] = []
        self._imported_measured: list[dict[str, float]] = []
        self._learned: dict[str, None] = {}
        self._last_dispatch_iteration = -1
        self._first_submitted_s: float | None = None
        self._last_s: float | None = None
        self._n_changes = 0
        self._history: tuple[int, LabHistory] | None = None

    def on(self, event: Event) -> None:
        p = event.payload
        self._n_changes += 1
        if event.type == Dispatched.type:
            candidate_id, arm = sys.intern(p["candidate_id"]), sys.intern(p["arm"])
            self.open[p["job_key"]] = JobRecord(p["job_key"], candidate_id, arm, p["iteration"], p["driver"],
                                                event.seq, p["sim_time_s"])
            self.keys.add(p["job_key"])
            self.tested.add(candidate_id)
            self.n_dispatched += 1
            self.n_by_arm[arm] = self.n_by_arm.get(arm, 0) + 1
            self._last_dispatch_iteration = max(self._last_dispatch_iteration, p["iteration"])
            submitted = p["sim_time_s"]
            self._first_submitted_s = submitted if self._first_submitted_s is None else min(self._first_submitted_s,
                                                                                          submitted)
            self._see_time(submitted)
            return
        self.n_observed += 1
        self.last_observe_iteration = observe_iteration(p)
        if p.get("provenance") == "imported" and p["status"] == "ok" and p["value"] is not None:
            self._imported.append((p["candidate_id"], "imported", p["value"], self._utility(p["value"])))
            self._imported_measured.append({self._property: p["value"], **p.get("values", {})})
        job = self.open.pop(p["job_key"], None)
        if job is None:
            if p.get("provenance") == "imported" and p["status"] == "failed" and (p.get("infeasible")
                                                                                  or self._learns_failures):
                self._learned[p["candidate_id"]] = None  # an off-plan run that failed: learned as the lab's are
            return
        if p.get("sim_time_s") is not None:
            self._see_time(p["sim_time_s"])
        if p["status"] == "ok":
            if p["value"] is not None:
                self._done.append((job.candidate_id, job.arm, p["value"], self._utility(p["value"])))
                self._done_iterations.append(job.iteration)
                self._done_seqs.append(job.dispatched_seq)
                self._done_measured.append({self._property: p["value"], **p.get("values", {})})
            return
        self._failures.append((job.job_key, job.candidate_id, job.arm, p.get("reason") or ""))
        if p.get("infeasible") or (self._learns_failures and p.get("provenance", "lab") == "lab"
                                   and not (p.get("reason") or "").startswith("cancelled")):
            self._learned[job.candidate_id] = None
        if p.get("provenance", "lab") == "lab":
            self.failed[job.job_key] = Observed.model_construct(**p)

    def _see_time(self, at_s: float) -> None:
        self._last_s = at_s if self._last_s is None else max(self._last_s, at_s)

    def open_jobs(self) -> list[JobRecord]:
        """The jobs in the lab now, oldest dispatch first."""
        return sorted(self.open.values(), key=lambda j: j.dispatched_seq)

    def history(self) -> LabHistory:
        """The lab so far; past results imported from a CSV come first (the planner learns from them, the budget
        does not count them)."""
        if self._history is not None and self._history[0] == self._n_changes:
            return self._history[1]
        imported = tuple(self._imported)
        pending = self.open_jobs()
        history = LabHistory(
            tested=frozenset(self.tested) | {r[0] for r in imported},
            pending=tuple(j.candidate_id for j in pending),
            results=imported + tuple(self._done),
            failures=tuple(self._failures),
            n_dispatched=self.n_dispatched,
            n_by_arm=dict(self.n_by_arm),
            iterations=(-1,) * len(imported) + tuple(self._done_iterations),
            dispatched_seqs=(-1,) * len(imported) + tuple(self._done_seqs),
            last_dispatch_iteration=self._last_dispatch_iteration,
            lab_time_s=0.0 if self._first_submitted_s is None else self._last_s - self._first_submitted_s,
            measured=tuple(self._imported_measured) + tuple(self._done_measured),
            learned_failures=tuple(self._learned),
        )
        self._history = (self._n_changes, history)
        return history
