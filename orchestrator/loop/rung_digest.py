"""What the loop needs from the rung results (``Screened`` rounds, or ``Simulated`` events in older ledgers), kept
compact and read incrementally.

A ladder campaign screens several proposals per lab slot on several rungs, so rung results are the most numerous
records of a long campaign. The loop needs two things from them: each proxy rung's first successful value per
candidate (to calibrate the rung against the lab) and the compute seconds spent per iteration (to pace the compute
budget). The digest keeps just those, and reads only events newer than the last one it folded. A ``RungSurveyed``
rung counts its values for every candidate, and its cost is charged before the first iteration.
"""

from __future__ import annotations

from collections import defaultdict

from orchestrator.loop.context import CampaignContext
from vocabulary.events import RungSurveyed, Screened, Simulated, batch_records

__all__ = ["RungDigest", "rung_digest"]


class RungDigest:
    """Per proxy rung the first successful proxy value of each candidate; compute seconds per iteration."""

    def __init__(self, proxies: dict[str, str]):
        self.proxies = proxies
        self.values: dict[str, dict[str, float]] = {rung: {} for rung in proxies}
        self.cost_s_by_iteration: dict[int, float] = defaultdict(float)
        self.last_seq = 0

    def update(self, ctx: CampaignContext) -> RungDigest:
        for event in ctx.ledger.read_events(ctx.campaign_id, [Simulated.type, Screened.type, RungSurveyed.type],
                                            after_seq=self.last_seq):
            if event.type == RungSurveyed.type:
                self._fold_survey(ctx, event.payload)
                self.last_seq = event.seq
                continue
            for kind, p in batch_records(event.type, event.payload):
                if kind == Simulated.type:
                    self._fold_result(p)
            self.last_seq = event.seq
        return self

    def _fold_result(self, p: dict) -> None:
        observation = p["observation"]
        self.cost_s_by_iteration[p["iteration"]] += observation.get("cost_s", 0.0)
        prop = self.proxies.get(p["rung"])
        if prop and observation["status"] == "ok" and prop in observation["properties"]:
            self.values[p["rung"]].setdefault(p["candidate_id"], observation["properties"][prop])
        return self

    def _fold_survey(self, ctx: CampaignContext, p: dict) -> None:
        """A survey's values count as the rung's values; its cost is charged before the first iteration."""
        self.cost_s_by_iteration[-1] += p["cost_s"]
        if p["rung"] not in self.values:
            return
        if p["values"]:
            known = {cid: v for cid, v in p["values"].items() if v is not None}
        else:  # a table rung: the pool's column
            rung = next(r for r in ctx.rungs if r.name == p["rung"])
            known = ctx.pool.column(rung.spec.column)
        for cid, value in known.items():
            self.values[p["rung"]].setdefault(cid, value)

    def compute_s_before(self, iteration: int) -> float:
        """Compute seconds the ladder spent in iterations before ``iteration``."""
        return sum(cost for i, cost in self.cost_s_by_iteration.items() if i < iteration)


def rung_digest(ctx: CampaignContext) -> RungDigest:
    """The campaign's digest, brought up to date (kept in the context between steps)."""
    digest = ctx.resources.get("rung_digest")
    if digest is None:
        digest = ctx.resources["rung_digest"] = RungDigest({r.name: r.spec.proxy for r in ctx.rungs if r.spec.proxy})
    return digest.update(ctx)
