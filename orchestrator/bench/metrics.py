"""Discovery metrics of one run and their summaries over seeds.

A run is the sequence of pool indices an arm sent to the lab, in order. ``experiments_to_hit`` is the 1-based count
of lab experiments until the first member of a top set was measured, or ``budget + 1`` when none was.

Example:
    >>> experiments_to_hit([4, 2, 7], {7, 9}, budget=3), experiments_to_hit([4, 2], {7}, budget=3)
    (3, 4)
    >>> summarise([1, 2, 3, 4, 100])
    {'median': 3.0, 'iqr': [2.0, 4.0]}
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np

__all__ = ["acceleration", "best_at_budget", "experiments_to_hit", "summarise"]


def experiments_to_hit(order: Sequence[int], top: Collection[int], budget: int) -> int:
    """Lab experiments until the first top-set member, or ``budget + 1`` for a run that never hits."""
    for position, index in enumerate(order[:budget], start=1):
        if int(index) in top:
            return position
    return budget + 1


def best_at_budget(order: Sequence[int], values: np.ndarray, direction: str, target: float | None) -> float:
    """Best lab value measured within the run: max, min, or the smallest distance |value − target| (same unit)."""
    measured = np.asarray(values)[np.asarray(order, dtype=int)]
    if direction == "maximize":
        return float(np.max(measured))
    if direction == "minimize":
        return float(np.min(measured))
    return float(np.min(np.abs(measured - float(target))))


def summarise(samples: Sequence[float]) -> dict[str, float | list[float]]:
    """Median and inter-quartile range [q1, q3] (numpy's linear interpolation)."""
    values = np.asarray(samples, dtype=float)
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return {"median": float(median), "iqr": [float(q1), float(q3)]}


def acceleration(random_median: float, arm_median: float) -> float:
    """Acceleration factor over random: random's median experiments divided by the arm's (higher is better).

    Example:
        >>> acceleration(90.0, 15.0)
        6.0
    """
    return float(random_median) / float(arm_median)
