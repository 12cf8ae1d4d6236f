"""What the ladder's rungs said: each proxy rung's first successful value per candidate, the compute seconds spent per
iteration, the candidates a computed rung failed on for good, the surveys over the pool, and the newest iteration's
rung results (for a screen re-run after a crash).

A ladder campaign screens several proposals per lab slot on several rungs, so rung results are the most numerous
records of a long campaign; the fold keeps only these. A ``RungSurveyed`` rung counts its values for every
candidate, and its cost is charged before the first iteration.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from orchestrator.loop.upcast import records
from vocabulary.events import Event, RungSurveyed, Screened, Simulated

__all__ = ["RungResults"]


class RungResults:
    """Fold of ``Screened`` (and older ``Simulated``) rounds and ``RungSurveyed`` surveys.

    ``rungs`` are the campaign's configured rungs (``context.Rung``), ``pool`` its design space (a table rung's survey
    values are the pool's column).
    """

    types = frozenset({Screened.type, Simulated.type, RungSurveyed.type})

    def __init__(self, rungs, pool):
        self._rungs = {r.name: r for r in rungs}
        self._pool = pool
        self.proxies = {r.name: r.spec.proxy for r in rungs if r.spec.proxy}
        self.values: dict[str, dict[str, float]] = {rung: {} for rung in self.proxies}
        """Per proxy rung, the first successful proxy value of each candidate."""
        self.cost_s_by_iteration: dict[int, float] = defaultdict(float)
        self.failed_for_good: set[str] = set()
        """Candidates a computed rung failed on in a run, for a reason of the calculation (not a timeout or a lost
        worker, which a retry may cure)."""
        self.surveys: list[dict[str, Any]] = []
        """``RungSurveyed`` payloads, in ledger order."""
        self.iteration = -1
        self._newest_runs: list[dict[str, Any]] = []

    def on(self, event: Event) -> None:
        if event.type == RungSurveyed.type:
            self._on_survey(event.payload)
            return
        for kind, p in records(event):
            if kind == Simulated.type:
                self._on_result(p)

    def _on_result(self, p: dict) -> None:
        from simulators.executor_batch import is_transient_failure
        from vocabulary.domain import Observation

        observation = p["observation"]
        self.cost_s_by_iteration[p["iteration"]] += observation.get("cost_s", 0.0)
        if p["iteration"] > self.iteration:
            self.iteration, self._newest_runs = p["iteration"], []
        if p["iteration"] == self.iteration:
            self._newest_runs.append(p)
        prop = self.proxies.get(p["rung"])
        if prop and observation["status"] == "ok" and prop in observation["properties"]:
            self.values[p["rung"]].setdefault(p["candidate_id"], observation["properties"][prop])
        rung = self._rungs.get(p["rung"])
        if rung is not None and rung.is_computed and observation.get("status") == "failed" \
                and observation.get("parameters", {}).get("read_from") != "survey" \
                and not is_transient_failure(Observation.model_construct(**observation)):
            self.failed_for_good.add(p["candidate_id"])

    def _on_survey(self, p: dict) -> None:
        self.surveys.append(p)
        self.cost_s_by_iteration[-1] += p["cost_s"]
        if p["rung"] not in self.values:
            return
        if p["values"]:
            known = {cid: v for cid, v in p["values"].items() if v is not None}
        else:  # a table rung: the pool's column
            known = self._pool.column(self._rungs[p["rung"]].spec.column)
        for cid, value in known.items():
            self.values[p["rung"]].setdefault(cid, value)

    def compute_s_before(self, iteration: int) -> float:
        """Compute seconds the ladder spent in iterations before ``iteration``."""
        return sum(cost for i, cost in self.cost_s_by_iteration.items() if i < iteration)

    def runs_of(self, iteration: int) -> list[dict[str, Any]]:
        """The rung results recorded in ``iteration``, as ``Simulated`` payloads (none for an older iteration)."""
        return list(self._newest_runs) if iteration == self.iteration else []

    @property
    def surveyed_cost_s(self) -> dict[str, float]:
        """Surveyed rung -> the survey's total cost, seconds."""
        return {p["rung"]: p["cost_s"] for p in self.surveys}
