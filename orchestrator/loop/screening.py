"""Running one rung on a batch of candidates: through the result cache and the configured executor.

Results are cached in the ledger's database, keyed by (candidate, simulator, version, parameters), so a cached
result is never recomputed. Rungs cheaper than ``screening.cheap_s`` per candidate run in this process (a worker
round trip would cost more than the work); the others go to the campaign's executor (a local process pool with
per-evaluation timeouts, or Ray), created once and closed with the campaign. The compute budget is charged the
cost model of every evaluation, cached or not, so a replay charges exactly what the original run charged.
"""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.loop.context import CampaignContext, Rung
from vocabulary.domain import Observation

__all__ = ["run_rung"]


def _executor(ctx: CampaignContext, rung: Rung, candidates: Sequence):
    from simulators import SerialExecutor

    screening = ctx.spec.screening
    costs = [rung.simulator.cost_model(c) for c in candidates]
    if screening.executor == "serial" or max(costs, default=0.0) < screening.cheap_s:
        return SerialExecutor()
    return ctx.compute.executor_for(screening.executor)


def run_rung(ctx: CampaignContext, rung: Rung, candidates: Sequence) -> list[Observation]:
    """One observation per candidate, in order."""
    from simulators import evaluate_rung

    if not candidates:
        return []
    results = evaluate_rung(rung.simulator, list(candidates), cache=ctx.compute.cache_for(ctx.ledger.engine),
                            executor=_executor(ctx, rung, candidates), timeout_s=ctx.spec.screening.timeout_s)
    # A cached observation carries the cost model's charge from when it was computed (same version, same model).
    ctx.compute.n_cache_hits += sum(is_cached for _, is_cached in results)
    return [observation for observation, _ in results]
