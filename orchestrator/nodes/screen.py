"""screen: climb the ladder, then promote the most promising survivors of each arm to the lab.

Each rung evaluates the survivors of the previous one in one batch call. A failed rung result stops that candidate
(``skip``). At the top, the main arm's survivors are ranked by the proxy rung (the property that estimates the
objective), if the ladder has one, and the best fill the arm's lab slots; the rest are held. The control arm is
promoted in proposal order, so it stays an honest control.
"""

from __future__ import annotations

from ..context import CampaignContext
from ..events import Promoted, Proposed, Simulated
from ..history import iteration_payloads
from ..state import CampaignState

__all__ = ["screen"]


def _proxy_utility(ctx: CampaignContext, proxies: dict[str, float], candidate_id: str) -> float:
    value = proxies.get(candidate_id)
    return float("-inf") if value is None else ctx.spec.objective.utility(value)


def screen(state: CampaignState, ctx: CampaignContext) -> CampaignState:
    iteration = state["iteration"]
    proposals = {p.candidate_id: p for p in iteration_payloads(ctx, Proposed.type, iteration)}
    survivors = list(state.get("valid", []))
    proxies: dict[str, float] = {}
    items = []
    for position, rung in enumerate(ctx.rungs):
        if not survivors:
            break
        candidates = [ctx.pool.get(cid) for cid in survivors]
        observations = rung.simulator.evaluate(candidates)
        next_rung = ctx.rungs[position + 1].name if position + 1 < len(ctx.rungs) else "lab"
        kept = []
        for cid, observation in zip(survivors, observations, strict=True):
            data = observation.model_dump(mode="json")
            items.append((Simulated(iteration=iteration, candidate_id=cid, rung=rung.name, observation=data),
                          f"it{iteration}:simulated:{rung.name}:{cid}"))
            if observation.status == "failed":
                items.append((Promoted(iteration=iteration, candidate_id=cid, from_rung=rung.name, to_rung=next_rung,
                                       decision="skip", reason=f"{rung.name} failed: {observation.reason}"),
                              f"it{iteration}:promoted:{rung.name}:{cid}"))
                continue
            if rung.spec.proxy:
                proxies[cid] = observation.properties[rung.spec.proxy]
            kept.append(cid)
            if next_rung != "lab":
                items.append((Promoted(iteration=iteration, candidate_id=cid, from_rung=rung.name, to_rung=next_rung,
                                       decision="promote", reason=f"{rung.name} succeeded"),
                              f"it{iteration}:promoted:{rung.name}:{cid}"))
        survivors = kept

    top = ctx.rungs[-1].name if ctx.rungs else "proposal"
    promoted: list[str] = []
    for arm in ctx.arms:
        mine = [cid for cid in survivors if proposals[cid].arm == arm]
        if arm == ctx.spec.planner.main and proxies:
            # stable sort: ties keep the planner's own order (its acquisition ranking)
            mine.sort(key=lambda cid: -_proxy_utility(ctx, proxies, cid))
        n_slots = state.get("slots", {}).get(arm, 0)
        for rank, cid in enumerate(mine):
            is_in = rank < n_slots
            score = proxies.get(cid)
            reason = (f"rank {rank + 1} of {len(mine)} in the {arm} arm for {n_slots} lab slot(s)"
                      + (f" by proxy {score:.4g}" if score is not None else ""))
            items.append((Promoted(iteration=iteration, candidate_id=cid, from_rung=top, to_rung="lab",
                                   decision="promote" if is_in else "hold", score=score, reason=reason),
                          f"it{iteration}:promoted:lab:{cid}"))
            if is_in:
                promoted.append(cid)
    ctx.ledger.append_many(ctx.campaign_id, items, actor="screen")
    return {"promoted": promoted}
