"""Progress in hypervolume: what each lab result of a campaign with several objectives adds to the measured front.

The rubric and the process reward of a campaign with several objectives read a result's progress here instead of
"beats the best utility". Each result, in the order the lab answered, gets

- ``improvement``: the hypervolume it adds to the front of the results before it, over the reference point, divided
  by the volume of the box between the reference point and the ideal point of the results so far (itself included):
  unitless, in [0, 1], so rewards stay O(1) whatever the objectives' units and ranges;
- ``is_on_front``: whether it adds any volume at all (it is not dominated by an earlier result and lies above the
  reference).

The reference point is the spec's (``[tradeoff] reference_point``, converted to utility form) or, without one,
BoTorch's rule (``vocabulary.pareto.infer_reference_point``) over the results so far, this one included. Each
result's numbers use only the results up to it, so a reward fold as of any iteration recomputes them exactly. A
result that misses an objective or breaks an outcome constraint (a row of NaN) adds nothing.

Example:
    >>> progress = HypervolumeProgress(reference=np.zeros(2))
    >>> [round(progress.add([1.0, 3.0]).improvement, 3), round(progress.add([3.0, 1.0]).improvement, 3)]
    [1.0, 0.222]
    >>> gain = progress.add([0.5, 0.5])
    >>> gain.improvement, gain.is_on_front
    (0.0, False)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from vocabulary.pareto import hypervolume, infer_reference_point

__all__ = ["HypervolumeGain", "HypervolumeProgress"]

_TINY = 1e-12


@dataclass(frozen=True)
class HypervolumeGain:
    """One lab result's progress: hypervolumes (product of utility units) before and after it, and ``improvement``
    (their difference over the reference..ideal box volume, unitless, in [0, 1])."""

    hypervolume_before: float
    hypervolume_after: float
    improvement: float
    is_on_front: bool


class HypervolumeProgress:
    """The measured results of a campaign with several objectives, fed one at a time in lab order.

    Args:
        reference: the reference point in utility form (m,); None infers it from the results so far.
    """

    def __init__(self, reference: Sequence[float] | np.ndarray | None = None):
        self.reference = None if reference is None else np.asarray(reference, dtype=float).ravel()
        self._rows: list[np.ndarray] = []

    @property
    def n_results(self) -> int:
        return len(self._rows)

    def add(self, utilities: Sequence[float] | np.ndarray) -> HypervolumeGain:
        """Feed one result's utilities (m,; NaN for an objective not measured or a broken constraint)."""
        row = np.asarray(utilities, dtype=float).ravel()
        before_rows = np.asarray(self._rows, dtype=float).reshape(-1, row.size)
        self._rows.append(row)
        if not np.isfinite(row).all():
            return HypervolumeGain(*self._volumes(before_rows), improvement=0.0, is_on_front=False)
        rows = np.asarray(self._rows, dtype=float)
        usable = rows[np.isfinite(rows).all(axis=1)]
        reference = self.reference if self.reference is not None else infer_reference_point(usable)
        before = float(hypervolume(before_rows, reference)) if len(before_rows) else 0.0
        after = float(hypervolume(rows, reference))
        box = float(np.prod(np.clip(usable.max(axis=0) - reference, 0.0, None)))
        gain = max(after - before, 0.0)
        improvement = min(gain / box, 1.0) if box > _TINY else 0.0
        return HypervolumeGain(hypervolume_before=before, hypervolume_after=after, improvement=improvement,
                               is_on_front=gain > _TINY * max(box, 1.0))

    def _volumes(self, before_rows: np.ndarray) -> tuple[float, float]:
        """(before, after) hypervolume for a result that adds nothing (both the volume before it)."""
        finite = before_rows[np.isfinite(before_rows).all(axis=1)] if len(before_rows) else before_rows
        if not len(finite):
            return 0.0, 0.0
        reference = self.reference if self.reference is not None else infer_reference_point(finite)
        volume = float(hypervolume(finite, reference))
        return volume, volume
