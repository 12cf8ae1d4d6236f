"""Discovery metrics of one run and their summaries over seeds.

A run is the sequence of pool indices an arm sent to the lab, in order. ``experiments_to_hit`` is the 1-based count
of lab experiments until the first member of a top set was measured, or ``budget + 1`` when none was.

Example:
    >>> experiments_to_hit([4, 2, 7], {7, 9}, budget=3), experiments_to_hit([4, 2], {7}, budget=3)
    (3, 4)
    >>> summarise([1, 2, 3, 4, 100])
    {'median': 3.0, 'iqr': [2.0, 4.0]}

Several objectives are scored by hypervolume (``hypervolume_by_experiment``): ``experiments_to_hv`` is the 1-based
count of lab experiments until the measured set dominates ``fraction`` of the pool's true hypervolume, or
``budget + 1``. A lab experiment whose run failed is written as pool index ``-1`` (``NO_RESULT``): it costs an
experiment and measures nothing.

Example:
    >>> Y, reference = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]]), np.array([-1.0, -1.0])
    >>> hypervolume_by_experiment([2, -1, 0, 1], Y, reference)
    [2.25, 2.25, 2.75, 3.25]
    >>> experiments_to_hv([2, -1, 0, 1], Y, reference, 0.9, true_hypervolume=3.25, budget=4)
    4

Ratios against BoTorch are against the better of the BoTorch arms that ran (``BOTORCH_ARMS``, ``botorch_reference``):
beating a reference that was handed weaker inputs than a user would give it is not a win.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import numpy as np

__all__ = ["BOTORCH_ARMS", "NO_RESULT", "acceleration", "best_at_budget", "botorch_reference", "experiments_to_hit",
           "experiments_to_hv", "hypervolume_at_budget", "hypervolume_by_experiment", "paired_geomean_ratio",
           "reference_label", "summarise"]

NO_RESULT = -1
"""The pool index written for a lab experiment whose run failed (it measured nothing)."""

BOTORCH_ARMS = ("botorch", "botorch-onehot")
"""The BoTorch reference arms: on the pool's own features, and on one-hot categories with scaled numbers."""


def experiments_to_hit(order: Sequence[int], top: Collection[int], budget: int) -> int:
    """Lab experiments until the first top-set member, or ``budget + 1`` for a run that never hits."""
    for position, index in enumerate(list(order)[:budget], start=1):
        if int(index) in top:
            return position
    return budget + 1


def hypervolume_by_experiment(order: Sequence[int], utilities: np.ndarray, reference: np.ndarray) -> list[float]:
    """The hypervolume the measured set dominates after each lab experiment (utility form, over ``reference``).

    Args:
        order: pool index per lab experiment, in order; ``NO_RESULT`` for a failed run.
        utilities: the truth per pool row as utilities, shape (n_candidates, n_objectives); a row with NaN adds nothing.
        reference: the reference point in utility form, shape (n_objectives,).
    """
    from vocabulary.pareto import hypervolume

    Y = np.asarray(utilities, dtype=float)
    rows: list[int] = []
    trace, current = [], 0.0
    for index in order:
        index = int(index)
        if index != NO_RESULT and np.isfinite(Y[index]).all():
            rows.append(index)
            current = float(hypervolume(Y[rows], np.asarray(reference, dtype=float)))
        trace.append(current)
    return trace


def experiments_to_hv(order: Sequence[int], utilities: np.ndarray, reference: np.ndarray, fraction: float, *,
                      true_hypervolume: float, budget: int) -> int:
    """Lab experiments until the measured set's hypervolume reaches ``fraction`` of ``true_hypervolume`` (relative
    tolerance 1e-9, so the pool's own front counts as 100 %), or ``budget + 1`` for a run that never does."""
    goal = fraction * true_hypervolume * (1 - 1e-9)
    for position, hv in enumerate(hypervolume_by_experiment(list(order)[:budget], utilities, reference), start=1):
        if hv >= goal:
            return position
    return budget + 1


def hypervolume_at_budget(order: Sequence[int], utilities: np.ndarray, reference: np.ndarray, budget: int) -> float:
    """The hypervolume the run's measured set dominates after at most ``budget`` lab experiments (0 for none)."""
    trace = hypervolume_by_experiment(list(order)[:budget], utilities, reference)
    return trace[-1] if trace else 0.0


def best_at_budget(order: Sequence[int], values: np.ndarray, direction: str, target: float | None) -> float:
    """Best lab value measured within the run: max, min, or the smallest distance |value − target| (same unit)."""
    order = np.asarray(order, dtype=int)
    measured = np.asarray(values)[order[order != NO_RESULT]]
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


def botorch_reference(medians: Mapping[str, float | None]) -> str | None:
    """The BoTorch arm a ratio is taken against: of the ``BOTORCH_ARMS`` with a median of lab experiments (fewer is
    better), the one that needed fewest; a tie goes to ``botorch``; None when neither ran.

    Example:
        >>> botorch_reference({"bo": 9.0, "botorch": 14.0, "botorch-onehot": 11.5})
        'botorch-onehot'
        >>> botorch_reference({"botorch": 14.0, "botorch-onehot": 14.0}), botorch_reference({"bo": 3.0})
        ('botorch', None)
    """
    ran = [(float(medians[arm]), k, arm) for k, arm in enumerate(BOTORCH_ARMS) if medians.get(arm) is not None]
    return min(ran)[2] if ran else None


def reference_label(arms: Collection[str]) -> str:
    """What a table calls its BoTorch reference, given the arms that ran.

    Example:
        >>> reference_label(["bo", "botorch"]), reference_label(["botorch", "botorch-onehot"])
        ('botorch', 'best of botorch, botorch-onehot')
    """
    ran = [arm for arm in BOTORCH_ARMS if arm in arms]
    return ran[0] if len(ran) == 1 else "best of " + ", ".join(ran)


def paired_geomean_ratio(arm: Sequence[float], reference: Sequence[float]) -> float:
    """Geometric mean over paired seeds of ``arm[i] / reference[i]`` (lab experiments; below 1: the arm needs fewer).

    Example:
        >>> round(paired_geomean_ratio([5, 20], [10, 10]), 6)
        1.0
    """
    a, r = np.asarray(arm, dtype=float), np.asarray(reference, dtype=float)
    if a.shape != r.shape or not len(a):
        raise ValueError(f"paired ratios need equal, non-empty seed lists; got {len(a)} and {len(r)} values")
    return float(np.exp(np.mean(np.log(a / r))))
