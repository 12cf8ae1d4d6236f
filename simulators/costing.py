"""Measure a simulator's cost on this machine and fit the linear model its ``cost_model`` encodes.

Cost models are measured once and written into the simulator as constants, so that the budget a campaign is
charged does not depend on the wall clock of the day. This module is how the constants are measured.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from simulators.base import AnyCandidate, Simulator

__all__ = ["LinearCost", "measure_linear_cost"]


@dataclass(frozen=True)
class LinearCost:
    """``intercept_s + slope_s * size`` seconds, fitted over ``n_samples`` candidates."""

    intercept_s: float
    slope_s: float
    n_samples: int
    r_squared: float

    def __call__(self, size: float) -> float:
        return self.intercept_s + self.slope_s * size


def measure_linear_cost(
    simulator: Simulator,
    candidates: Sequence[AnyCandidate],
    size: Callable[[AnyCandidate], float],
    *,
    repeats: int = 5,
) -> LinearCost:
    """Time ``simulator.evaluate([c])`` per candidate (median of ``repeats``) and fit seconds = a + b * size.

    Each call includes the per-candidate overhead the orchestrator pays (validation, building the observation).
    Run it with OMP_NUM_THREADS=1 on an otherwise quiet machine.

    Example:
        >>> from vocabulary.domain import Molecule
        >>> from simulators.table import TableSimulator
        >>> mols = [Molecule.parse(s) for s in ["C", "CC", "CCC", "CCCC"]]
        >>> fit = measure_linear_cost(TableSimulator("t", {}, "x"), mols, size=lambda m: m.n_heavy_atoms, repeats=1)
        >>> fit.n_samples
        4
    """
    if len(candidates) < 2:
        raise ValueError("measuring a linear cost needs at least two candidates")
    sizes, seconds = [], []
    simulator.evaluate(candidates[:1])  # warm-up: lazy imports and caches are not per-candidate cost
    for candidate in candidates:
        timings = []
        for _ in range(repeats):
            start = time.perf_counter()
            simulator.evaluate([candidate])
            timings.append(time.perf_counter() - start)
        sizes.append(float(size(candidate)))
        seconds.append(statistics.median(timings))
    x, y = np.asarray(sizes), np.asarray(seconds)
    design = np.column_stack([np.ones_like(x), x])
    (intercept, slope), *_ = np.linalg.lstsq(design, y, rcond=None)
    residual = y - design @ np.array([intercept, slope])
    total = float(((y - y.mean()) ** 2).sum())
    r_squared = 1.0 - float((residual**2).sum()) / total if total > 0 else 0.0
    return LinearCost(float(intercept), float(slope), len(candidates), r_squared)
