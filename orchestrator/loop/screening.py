"""Running one rung on a batch of candidates: through the result cache and the configured executor.

Results are cached in the ledger's database, keyed by (candidate, simulator, version, parameters), so a cached
result is never recomputed. Rungs cheaper than ``screening.cheap_s`` per candidate run in this process (a worker
round trip would cost more than the work); the others go to the campaign's executor (a local process pool with
per-evaluation timeouts, or Ray), created once and closed with the campaign. The compute budget is charged the
cost model of every evaluation, cached or not, so a replay charges exactly what the original run charged.

A caller that wants to show progress (the survey, which reads a whole pool) wraps its calls in
``reporting_progress(callback)``: the rung then runs in slices and ``callback(rung, n_done, n_total)`` hears after
each. The observations are the same either way.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from orchestrator.loop.context import CampaignContext, Rung
from vocabulary.domain import Observation

__all__ = ["ProgressCallback", "reporting_progress", "run_rung"]

#: ``callback(rung, n_done, n_total)``: candidates of ``rung`` evaluated so far (cached ones included).
ProgressCallback = Callable[[Rung, int, int], None]

_progress: ContextVar[ProgressCallback | None] = ContextVar("closedloop_rung_progress", default=None)
#: Slices a reported rung runs in: about this many, of at least ``_MIN_SLICE`` candidates each.
_N_SLICES, _MIN_SLICE = 40, 16


@contextmanager
def reporting_progress(callback: ProgressCallback) -> Iterator[None]:
    """Within this block, ``run_rung`` reports its progress to ``callback`` (this thread and its context only)."""
    token = _progress.set(callback)
    try:
        yield
    finally:
        _progress.reset(token)


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
    candidates = list(candidates)
    callback = _progress.get()
    cache, executor = ctx.compute.cache_for(ctx.ledger.engine), _executor(ctx, rung, candidates)
    size = len(candidates) if callback is None else max(_MIN_SLICE, math.ceil(len(candidates) / _N_SLICES))
    results = []
    if callback is not None:
        callback(rung, 0, len(candidates))
    for start in range(0, len(candidates), size):
        results += evaluate_rung(rung.simulator, candidates[start:start + size], cache=cache, executor=executor,
                                 timeout_s=ctx.spec.screening.timeout_s)
        if callback is not None:
            callback(rung, len(results), len(candidates))
    # A cached observation carries the cost model's charge from when it was computed (same version, same model).
    ctx.compute.n_cache_hits += sum(is_cached for _, is_cached in results)
    return [observation for observation, _ in results]
