"""One rung of the fidelity ladder, evaluated through the result cache and an executor.

``evaluate_rung`` is what the orchestrator calls for each rung: cached results come back without running anything,
the rest run through the executor (in this process when none is given), and new results are stored.

Example:
    >>> from vocabulary.domain import Molecule
    >>> from simulators.cache import SimulationCache
    >>> from simulators.table import TableSimulator
    >>> ethanol, water = Molecule.parse("CCO"), Molecule.parse("O")
    >>> table = TableSimulator("calc", {ethanol.id: -4.9}, "dg_hydration", cost_s=60.0)
    >>> cache = SimulationCache(":memory:")
    >>> [(obs.status, is_cached) for obs, is_cached in evaluate_rung(table, [ethanol, water], cache=cache)]
    [('ok', False), ('failed', False)]
    >>> [(obs.status, is_cached) for obs, is_cached in evaluate_rung(table, [ethanol, water], cache=cache)]
    [('ok', True), ('failed', True)]
"""

from __future__ import annotations

from collections.abc import Sequence

from simulators.base import AnyCandidate, Simulator
from simulators.cache import SimulationCache
from simulators.executor import Executor, SerialExecutor
from vocabulary.domain import Observation

__all__ = ["evaluate_rung"]


def evaluate_rung(
    simulator: Simulator,
    candidates: Sequence[AnyCandidate],
    *,
    cache: SimulationCache | None = None,
    executor: Executor | None = None,
    timeout_s: float | None = None,
) -> list[tuple[Observation, bool]]:
    """Evaluate one rung: ``(observation, is_cached)`` per candidate, in order.

    Args:
        simulator: the rung.
        candidates: candidates of kinds the rung applies to.
        cache: where results are looked up and stored; ``None`` computes everything and stores nothing.
        executor: where misses run; ``None`` runs them in this process, where ``timeout_s`` cannot be enforced.
            The campaign should build one with ``make_executor("process")`` (or ``"ray"``) and reuse it.
        timeout_s: seconds per candidate before it fails with ``"timeout after N s"`` (not cached).

    Raises:
        SetupError: before anything runs, for candidates the rung cannot take or a bad ``timeout_s``.
    """
    if cache is not None:
        observations, is_cached = cache.evaluate(simulator, candidates, executor, timeout_s=timeout_s)
        return list(zip(observations, is_cached, strict=True))
    runner = executor if executor is not None else SerialExecutor()
    return [(obs, False) for obs in runner.map_evaluate(simulator, candidates, timeout_s=timeout_s)]
