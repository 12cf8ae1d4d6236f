"""What the ladder knows about the whole design space: proxy rungs surveyed over the pool.

A proxy rung is **surveyed** (read once for every candidate of a fixed pool) when an arm that plans with the ladder
runs (``uses_ladder``) and the rung's pool-wide cost fits ``screening.survey_share`` of the compute budget, cheapest
rung first; without a compute budget every proxy rung is surveyed. A surveyed rung is then known everywhere, so the
planner can calibrate it against the lab and use it as the surrogate's prior mean (``planners.ladder_prior``) and
rank a cold start by it. A rung too dear to survey (FreeSolv's GAFF hour) stays with the screen, whose escalation
spends the rest of the compute budget where the value of information per second is highest.

A table rung's values are the pool's own column, so its ``RungSurveyed`` event records only the count and the cost;
a computed rung's values go into the event, so resume and replay never recompute them.

Example:
    >>> view = LadderView(values={"cheap": np.array([1.0, np.nan])}, cost_s={"cheap": 0.5})
    >>> view.cheapest, view.dearest, view.n_known("cheap")
    ('cheap', 'cheap', 1)
"""

from __future__ import annotations

import logging

import numpy as np

from orchestrator.loop.context import CampaignContext, Rung
from orchestrator.loop.view import LadderView
from vocabulary.events import RungSurveyed

__all__ = ["LadderView", "ladder_view", "survey_items", "uses_ladder"]

logger = logging.getLogger(__name__)


def uses_ladder(ctx: CampaignContext) -> bool:
    """Whether any arm of the campaign plans with the ladder (its declared ``PlannerTraits.uses_ladder``)."""
    return ctx.uses_ladder


def _proxy_rungs(ctx: CampaignContext) -> list[tuple[Rung, float]]:
    """Proxy rungs with their pool-wide cost in seconds, cheapest first (ladder order breaks ties)."""
    candidates = ctx.pool.candidates
    rungs = []
    for rung in ctx.rungs:
        if not rung.spec.proxy:
            continue
        if rung.spec.simulator == "table":
            total = float(rung.spec.cost_s) * len(candidates)
        else:
            total = float(sum(rung.simulator.cost_model(c) for c in candidates))
        rungs.append((rung, total))
    return sorted(rungs, key=lambda item: item[1])


def survey_items(ctx: CampaignContext, iteration: int) -> list[tuple[RungSurveyed, str]]:
    """The surveys this campaign should make now, as ledger items (one per rung, keyed by rung).

    Only fixed pools are surveyed (an open space grows every iteration), only once per rung, and only while the
    surveys' total cost fits ``survey_share`` of the compute budget.
    """
    from orchestrator.loop.screening import run_rung

    if ctx.spec.space.generate or not uses_ladder(ctx):
        return []
    done = ctx.view.rungs.surveyed_cost_s
    budget = ctx.spec.budget.compute_seconds
    allowance = None if budget is None else ctx.spec.screening.survey_share * budget - sum(done.values())
    items = []
    for rung, cost in _proxy_rungs(ctx):
        if rung.name in done:
            continue
        if _too_dear_for_auto(ctx, rung, cost):
            continue
        if allowance is not None:
            if cost > allowance:
                continue
            allowance -= cost
        if rung.spec.simulator == "table":
            column = ctx.pool.columns.get(rung.spec.column, np.full(len(ctx.pool), np.nan))
            payload = RungSurveyed(iteration=iteration, rung=rung.name, proxy=rung.spec.proxy,
                                   n_candidates=len(ctx.pool), n_failed=int((~np.isfinite(column)).sum()), cost_s=cost)
        else:
            observations = run_rung(ctx, rung, ctx.pool.candidates)
            values = {c.id: (float(o.properties[rung.spec.proxy])
                             if o.status == "ok" and rung.spec.proxy in o.properties else None)
                      for c, o in zip(ctx.pool.candidates, observations, strict=True)}
            payload = RungSurveyed(iteration=iteration, rung=rung.name, proxy=rung.spec.proxy,
                                   n_candidates=len(values), n_failed=sum(v is None for v in values.values()),
                                   cost_s=float(sum(o.cost_s or 0.0 for o in observations)), values=values)
        items.append((payload, f"survey:{rung.name}"))
    return items


def _too_dear_for_auto(ctx: CampaignContext, rung: Rung, cost: float) -> bool:
    """Whether ``rung`` is the prior ``planner.model_prior = "auto"`` added and its survey would cost more than
    ``AUTO_SURVEY_S`` (said once per campaign in the log)."""
    from orchestrator.spec_model_prior import ADDED_BY, AUTO_SURVEY_S

    if rung.spec.added_by != ADDED_BY or ctx.spec.planner.model_prior != "auto" or cost <= AUTO_SURVEY_S:
        return False
    key = (id(ctx), rung.name)
    if key not in _SAID:
        _SAID.add(key)
        logger.info("the model's prior over the pool is not surveyed: %d candidates would cost %.0f CPU-s, more than "
                    "the %.0f s planner.model_prior = 'auto' allows; set it to 'on' to survey them",
                    len(ctx.pool), cost, AUTO_SURVEY_S)
    return True


_SAID: set[tuple[int, str]] = set()


def ladder_view(ctx: CampaignContext) -> LadderView | None:
    """The surveyed rungs as pool-aligned arrays (``CampaignView.ladder``); None without any."""
    return ctx.view.ladder
