"""``CampaignView``: the loop's one read model of the ledger.

The nodes never read the ledger themselves. Before each node runs, the graph refreshes the view (``refresh``): it
reads the events after its cursor in one query and hands each, once and in ledger order, to the folds that take its
type, as Bluesky's callbacks take the documents of a run. The nodes then ask the folds. A resumed campaign builds a new
view and refreshes it from the start through the same folds, so it sees exactly what the original run saw.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from orchestrator.loop.trajectory_fold import TrajectoryFold
from orchestrator.loop.view.batch_request import BatchRequest
from orchestrator.loop.view.calls import RecordedCalls
from orchestrator.loop.view.entered import EnteredResults
from orchestrator.loop.view.failures import FailureDecisions
from orchestrator.loop.view.fits import SurrogateFits
from orchestrator.loop.view.lab_jobs import LabHistory, LabJobs
from orchestrator.loop.view.proposals import Proposals
from orchestrator.loop.view.rungs import RungResults
from vocabulary.events import CampaignStarted, Event, FailureHandled, PoolExtended

__all__ = ["CampaignView", "LadderView"]


@dataclass(frozen=True)
class LadderView:
    """Surveyed proxy rungs: rung name -> proxy value per pool row (NaN where it failed), cheapest rung first.

    Example:
        >>> view = LadderView(values={"cheap": np.array([1.0, np.nan])}, cost_s={"cheap": 0.5})
        >>> view.cheapest, view.dearest, view.n_known("cheap")
        ('cheap', 'cheap', 1)
    """

    values: dict[str, np.ndarray]
    cost_s: dict[str, float]
    """Mean cost of one evaluation of each rung, seconds."""

    @property
    def cheapest(self) -> str | None:
        return next(iter(self.values), None)

    @property
    def dearest(self) -> str | None:
        """The surveyed rung of highest fidelity, by the ladder's premise that a dearer rung is the truer one: what to
        trust before the lab has said which rung tracks it."""
        return next(reversed(self.values), None)

    def n_known(self, rung: str) -> int:
        return int(np.isfinite(self.values[rung]).sum())


class _PoolGrowth:
    """An open space's candidates added by ``PoolExtended`` events, put back into the pool in their order (a no-op
    for those the running campaign added already)."""

    types = frozenset({PoolExtended.type})

    def __init__(self, pool):
        self._pool = pool

    def on(self, event: Event) -> None:
        from vocabulary.domain import candidate_from_dict

        self._pool.extend([candidate_from_dict(c) for c in event.payload["candidates"]])


class CampaignView:
    """The campaign as its events say, folded once per step from a single cursor.

    ``lab`` (jobs and results), ``failures`` (what was decided about failed jobs), ``rungs`` (the ladder's results
    and surveys), ``proposals``, ``fits`` (the lab surrogate's), ``calls`` (recorded chat-model calls) and
    ``trajectories`` (each proposal's path, for the rewards) are the folds; the methods below combine them.
    ``n_reads`` counts the ledger reads the view made (one per refresh that found new events).
    """

    def __init__(self, ledger, campaign_id: str, spec, pool, rungs):
        self.ledger, self.campaign_id, self.spec, self.pool = ledger, campaign_id, spec, pool
        self._rungs = list(rungs)
        self.cursor = 0
        """The newest seq the folds have taken."""
        self.n_reads = 0
        self.started_at: datetime | None = None
        """When ``CampaignStarted`` was recorded (the wall-clock origin of a real lab's clock)."""
        self.lab = LabJobs(spec.objective.utility, property=spec.objective.property,
                           learns_failures=spec.lab.failure_policy == "learn")
        self.failures = FailureDecisions()
        self.rungs = RungResults(self._rungs, pool)
        self.proposals = Proposals()
        self.fits = SurrogateFits()
        self.calls = RecordedCalls()
        self.entered = EnteredResults()
        """Results entered by hand for a manual lab's jobs."""
        self.batch_request = BatchRequest()
        """The size a person asked the next batch to have (``campaign.suggest(n)``), or None."""
        self.trajectories = TrajectoryFold(spec)
        folds = [self.lab, self.failures, self.rungs, self.proposals, self.fits, self.calls, self.entered,
                 self.batch_request]
        if spec.space.generate:
            folds.append(_PoolGrowth(pool))
        self._routes: dict[str, list] = defaultdict(list)
        for fold in folds:
            for event_type in fold.types:
                self._routes[event_type].append(fold)
        self._ladder: tuple[tuple[int, int], LadderView | None] | None = None
        self._survey_failures: tuple[tuple[int, int], set[str]] | None = None
        self.calibration_memo: dict[str, tuple] = {}
        """One rung calibration per rung with the inputs it was computed from (``beliefs.rung_calibrations``)."""

    # ------------------------------------------------------------------------------------------------ refreshing
    def refresh(self) -> int:
        """Fold the events recorded since the last refresh; returns how many there were. One index lookup when there
        are none, one read of the new events otherwise."""
        if self.ledger.head_seq(self.campaign_id) <= self.cursor:
            return 0
        events = self.ledger.events(self.campaign_id, after_seq=self.cursor)
        self.n_reads += 1
        if not events:
            return 0
        routes = self._routes
        for event in events:
            if event.type == CampaignStarted.type and self.started_at is None:
                self.started_at = event.at
            for fold in routes.get(event.type, ()):
                fold.on(event)
        self.trajectories.feed(events)
        self.cursor = events[-1].seq
        return len(events)

    # ------------------------------------------------------------------------------------------------ the lab
    def history(self) -> LabHistory:
        """The lab so far (``LabHistory``)."""
        return self.lab.history()

    def pending_retries(self) -> list[FailureHandled]:
        """Retries decided but not yet dispatched, oldest first."""
        return self.failures.pending_retries(self.lab.keys)

    def unhandled_failures(self) -> list:
        """Failed lab results (``Observed``) that no ``FailureHandled`` has answered yet, oldest first."""
        handled = self.failures.handled_keys
        return [f for key, f in self.lab.failed.items() if key not in handled]

    # ------------------------------------------------------------------------------------------------ the ladder
    @property
    def ladder(self) -> LadderView | None:
        """The surveyed rungs as pool-aligned arrays; None without any survey."""
        key = (len(self.pool), len(self.rungs.surveys))
        if self._ladder is None or self._ladder[0] != key:
            self._ladder = (key, self._ladder_view())
        return self._ladder[1]

    def _ladder_view(self) -> LadderView | None:
        surveys = self.rungs.surveys
        if not surveys:
            return None
        by_name = {r.name: r for r in self._rungs}
        pool = self.pool
        values: dict[str, np.ndarray] = {}
        cost_s: dict[str, float] = {}
        for p in sorted(surveys, key=lambda p: p["cost_s"] / max(p["n_candidates"], 1)):
            rung = by_name.get(p["rung"])
            if rung is None:
                continue
            if rung.spec.simulator == "table":
                column = pool.columns.get(rung.spec.column)
                row = np.full(len(pool), np.nan) if column is None else np.asarray(column, dtype=float)[: len(pool)]
            else:
                row = np.asarray([np.nan if p["values"].get(cid) is None else p["values"][cid] for cid in pool.ids])
            values[p["rung"]] = row
            cost_s[p["rung"]] = p["cost_s"] / max(p["n_candidates"], 1)
        return LadderView(values=values, cost_s=cost_s)

    def survey_failures(self) -> set[str]:
        """Candidates a computed rung's survey has no value for."""
        ladder = self.ladder
        key = (len(self.pool), len(self.rungs.surveys))
        if self._survey_failures is None or self._survey_failures[0] != key:
            computed = {r.name for r in self._rungs if r.is_computed}
            missing = [np.flatnonzero(~np.isfinite(v)) for name, v in (ladder.values.items() if ladder else ())
                       if name in computed]
            rows = np.unique(np.concatenate(missing)).tolist() if missing else []
            self._survey_failures = (key, {self.pool.ids[row] for row in rows})
        return self._survey_failures[1]
