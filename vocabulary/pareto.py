"""Pareto math for several objectives, in plain numpy: dominance, hypervolume and its exact improvement.

Everything here works in *utility* form (every column "higher is better", ``utility_matrix``); the reference point
is converted to and from objective units with ``reference_in_utility`` / ``reference_in_units``.

Hypervolume uses one decomposition for both the volume of a front and the improvement a new point would add
(``HypervolumeCells``): the first m-1 axes are cut into a grid at the front's coordinates (from the reference up,
the last cell open to infinity); over each grid column the region the front dominates is ``[reference_m, h)`` on
the last axis, with ``h`` the highest last coordinate among the front points that dominate the column, and the
rest ``[h, inf)`` is not dominated. The volume and the improvement are then sums over columns, exact for any m and
vectorised over points (columns C = prod over the first m-1 axes of (distinct coordinates + 1), about (k+1)^(m-1)).

Example:
    >>> import numpy as np
    >>> front = np.array([[1.0, 2.0], [2.0, 1.0]])
    >>> float(hypervolume(front, np.zeros(2)))
    3.0
    >>> cells = HypervolumeCells.from_front(front, np.zeros(2))
    >>> cells.improvement(np.array([[2.0, 2.0], [0.5, 0.5], [3.0, 0.5]])).tolist()
    [1.0, 0.0, 0.5]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vocabulary.domain import SetupError

__all__ = ["CHEBYSHEV_RHO", "HypervolumeCells", "desirabilities", "front_ranks", "hypervolume", "infer_reference_point",
           "non_dominated", "reference_in_units", "reference_in_utility", "tradeoff_utilities", "utility_matrix"]

CHEBYSHEV_RHO = 0.05
"""Weight of the summed term in the augmented Chebyshev scalarisation (keeps weakly dominated points below)."""

_CHUNK_ELEMENTS = 4_000_000
"""Largest intermediate array (elements) one vectorised step builds; bigger inputs are handled in chunks."""


def _as_matrix(values: np.ndarray, n_columns: int | None = None) -> np.ndarray:
    matrix = np.asarray(values, dtype=float)
    if matrix.ndim == 1:
        matrix = matrix[:, None] if n_columns == 1 else matrix[None, :]
    if matrix.ndim != 2 or (n_columns is not None and matrix.shape[1] != n_columns):
        raise SetupError(f"expected a matrix with {n_columns or 'm'} objective columns, got shape {matrix.shape}")
    return matrix


def utility_matrix(objectives: Sequence[Any], values: np.ndarray) -> np.ndarray:
    """Each column of ``values`` (n, m; objective units) turned "higher is better"; NaN stays NaN.

    maximize: v, minimize: -v, target: -|v - target|. ``objectives`` are ObjectiveSpec-like (``direction``,
    ``target``), one per column.

    Example:
        >>> from types import SimpleNamespace as O
        >>> objs = [O(direction="maximize", target=None), O(direction="minimize", target=None),
        ...         O(direction="target", target=5.0)]
        >>> utility_matrix(objs, np.array([[1.0, 2.0, 7.0], [np.nan, -1.0, 4.0]])).tolist()
        [[1.0, -2.0, -2.0], [nan, 1.0, -1.0]]
    """
    matrix = _as_matrix(values, len(objectives))
    out = np.empty_like(matrix)
    for column, objective in enumerate(objectives):
        v = matrix[:, column]
        if objective.direction == "maximize":
            out[:, column] = v
        elif objective.direction == "minimize":
            out[:, column] = -v
        elif objective.direction == "target":
            out[:, column] = -np.abs(v - float(objective.target))
        else:
            raise SetupError(f"objective direction {objective.direction!r} is unknown; use 'maximize', 'minimize' "
                             "or 'target'")
    return out


def non_dominated(Y: np.ndarray) -> np.ndarray:
    """Boolean mask of the rows of ``Y`` (n, m; maximisation) that no other row dominates.

    A row with NaN is never non-dominated and dominates nothing; equal rows are all kept.

    Example:
        >>> non_dominated(np.array([[1.0, 2.0], [2.0, 1.0], [1.0, 1.0], [np.nan, 9.0], [2.0, 1.0]])).tolist()
        [True, True, False, False, True]
    """
    Y = _as_matrix(Y)
    n, m = Y.shape
    finite = ~np.isnan(Y).any(axis=1)
    candidates = Y[finite]
    mask = np.zeros(n, dtype=bool)
    if len(candidates) == 0:
        return mask
    keep = np.ones(len(candidates), dtype=bool)
    step = max(1, _CHUNK_ELEMENTS // max(1, len(candidates) * m))
    for start in range(0, len(candidates), step):
        rows = candidates[start:start + step]
        ge = (candidates[None, :, :] >= rows[:, None, :]).all(axis=2)
        gt = (candidates[None, :, :] > rows[:, None, :]).any(axis=2)
        keep[start:start + step] = ~(ge & gt).any(axis=1)
    mask[np.flatnonzero(finite)[keep]] = True
    return mask


def front_ranks(Y: np.ndarray) -> np.ndarray:
    """Non-dominated sorting of the rows of ``Y`` (n, m; maximisation): 0 for the rows no other row dominates, 1 for
    those only rank-0 rows dominate, and so on; a row with NaN ranks after every finite row.

    Example:
        >>> front_ranks(np.array([[1.0, 2.0], [0.5, 0.5], [2.0, 1.0], [0.0, 0.0], [np.nan, 1.0]])).tolist()
        [0, 1, 0, 2, 3]
    """
    Y = _as_matrix(Y)
    ranks = np.zeros(len(Y), dtype=int)
    remaining = np.flatnonzero(~np.isnan(Y).any(axis=1))
    rank = 0
    while remaining.size:  # each pass removes at least one row: a finite set has a non-dominated row
        on_front = non_dominated(Y[remaining])
        ranks[remaining[on_front]] = rank
        remaining = remaining[~on_front]
        rank += 1
    ranks[np.isnan(Y).any(axis=1)] = rank
    return ranks


def infer_reference_point(Y: np.ndarray, scale: float = 0.1) -> np.ndarray:
    """Reference point (utility form) for observed utilities ``Y`` (n, m): BoTorch's rule, nadir minus 10 % of range.

    Nadir and range are taken over the non-dominated rows (NaN rows ignored). A single front point, or an axis on
    which every front point agrees, uses ``|nadir|`` as its range (BoTorch's rule for one point), and 1.0 where
    that is zero too, so the reference always lies strictly below the front.

    Example:
        >>> infer_reference_point(np.array([[0.0, 10.0], [10.0, 0.0], [1.0, 1.0]])).tolist()
        [-1.0, -1.0]
    """
    Y = _as_matrix(Y)
    front = Y[non_dominated(Y)]
    if len(front) == 0:
        raise SetupError("a reference point needs at least one fully measured result; set [tradeoff] "
                         "reference_point in the spec or measure every objective once")
    nadir = front.min(axis=0)
    spread = front.max(axis=0) - nadir
    spread = np.where(spread > 0, spread, np.abs(nadir))
    spread = np.where(spread > 0, spread, 1.0)
    return nadir - scale * spread


def reference_in_utility(objectives: Sequence[Any], reference_point_in_units: Sequence[float]) -> np.ndarray:
    """The spec's reference point (objective units, one per objective) in utility form.

    For a target objective the reference is the worst acceptable value on either side: utility -|r - target|.

    Example:
        >>> from types import SimpleNamespace as O
        >>> objs = [O(direction="maximize", target=None), O(direction="minimize", target=None)]
        >>> reference_in_utility(objs, [0.5, 10.0]).tolist()
        [0.5, -10.0]
    """
    reference = np.asarray(reference_point_in_units, dtype=float)
    if reference.shape != (len(objectives),):
        raise SetupError(f"the reference point has {reference.size} values but there are {len(objectives)} "
                         "objectives; give one per objective, in [[objective]] order")
    return utility_matrix(objectives, reference[None, :])[0]


def reference_in_units(objectives: Sequence[Any], reference_utility: Sequence[float]) -> np.ndarray:
    """A reference point in utility form back in objective units (a target's: the value above the target).

    Example:
        >>> from types import SimpleNamespace as O
        >>> objs = [O(direction="minimize", target=None), O(direction="target", target=5.0)]
        >>> reference_in_units(objs, [-10.0, -2.0]).tolist()
        [10.0, 7.0]
    """
    reference = np.asarray(reference_utility, dtype=float)
    out = np.empty(len(objectives))
    for column, objective in enumerate(objectives):
        u = reference[column]
        out[column] = {"maximize": u, "minimize": -u}.get(objective.direction, float(objective.target or 0) + abs(u))
    return out


def desirabilities(objectives: Sequence[Any], values: np.ndarray) -> np.ndarray:
    """Per-objective desirability in 0..1 (n, m) from each objective's ``bounds`` (worst..best, objective units).

    Linear in utility between the bounds (either order is read); a target objective is 1 at the target and 0 at
    the bound farthest from it. NaN stays NaN.

    Example:
        >>> from types import SimpleNamespace as O
        >>> objs = [O(direction="maximize", target=None, bounds=(0.0, 10.0)),
        ...         O(direction="minimize", target=None, bounds=(100.0, 0.0))]
        >>> desirabilities(objs, np.array([[5.0, 25.0], [12.0, 150.0]])).tolist()
        [[0.5, 0.75], [1.0, 0.0]]
    """
    utilities = utility_matrix(objectives, values)
    out = np.empty_like(utilities)
    for column, objective in enumerate(objectives):
        worst, best = _utility_bounds(objective)
        out[:, column] = np.clip((utilities[:, column] - worst) / (best - worst), 0.0, 1.0)
    return out


def _utility_bounds(objective: Any) -> tuple[float, float]:
    bounds = getattr(objective, "bounds", None)
    if bounds is None:
        raise SetupError(f"objective {getattr(objective, 'property', '?')!r} needs bounds = [worst, best] for a "
                         "desirability; add it to its [[objective]] table")
    ends = utility_matrix([objective], np.asarray(bounds, dtype=float)[:, None])[:, 0]
    worst, best = (float(ends.min()), 0.0) if objective.direction == "target" else (float(ends.min()),
                                                                                    float(ends.max()))
    if not best > worst:
        raise SetupError(f"objective {getattr(objective, 'property', '?')!r} has bounds {tuple(bounds)} that span "
                         "nothing; give two different values, worst then best")
    return worst, best


def tradeoff_utilities(spec: Any, values: np.ndarray) -> np.ndarray:
    """The single number per result that single-number arms plan on (n,), from ``values`` (n, m; objective units).

    By ``spec.tradeoff_method``: "single": the objective's utility; "desirability": the weighted geometric mean of
    the desirabilities; "weighted_sum": sum of weight x utility (an objective with bounds scaled to 0..1 by them,
    one without in its own unit); "pareto": the equal-weight augmented Chebyshev scalarisation
    min_i z_i + CHEBYSHEV_RHO * sum_i z_i over utilities min-max normalised across the rows given (so it changes as
    results arrive). A row with NaN gives NaN.

    Example:
        >>> from types import SimpleNamespace as O
        >>> objs = [O(direction="maximize", target=None, weight=1.0), O(direction="maximize", target=None, weight=1.0)]
        >>> spec = O(objective_list=objs, tradeoff_method="pareto")
        >>> tradeoff_utilities(spec, np.array([[0.0, 1.0], [1.0, 0.0], [0.5, 0.5]])).round(3).tolist()
        [0.05, 0.05, 0.55]
    """
    objectives = list(spec.objective_list)
    method = spec.tradeoff_method
    if method == "single":
        return utility_matrix(objectives[:1], _as_matrix(values)[:, :1])[:, 0]
    weights = np.array([float(getattr(o, "weight", 1.0)) for o in objectives])
    if method == "desirability":
        with np.errstate(divide="ignore"):
            logs = np.log(desirabilities(objectives, values))
        return np.exp((logs * weights).sum(axis=1) / weights.sum())
    utilities = utility_matrix(objectives, values)
    if method == "weighted_sum":
        scaled = utilities.copy()
        for column, objective in enumerate(objectives):
            if getattr(objective, "bounds", None) is not None:
                worst, best = _utility_bounds(objective)
                scaled[:, column] = (utilities[:, column] - worst) / (best - worst)
        return scaled @ weights
    if method == "pareto":
        finite = ~np.isnan(utilities).any(axis=1)
        if not finite.any():
            return np.full(len(utilities), np.nan)
        low, high = utilities[finite].min(axis=0), utilities[finite].max(axis=0)
        z = (utilities - low) / np.where(high > low, high - low, 1.0)
        return z.min(axis=1) + CHEBYSHEV_RHO * z.sum(axis=1)
    raise SetupError(f"tradeoff method {method!r} is unknown; use 'pareto', 'desirability' or 'weighted_sum'")


@dataclass(frozen=True)
class HypervolumeCells:
    """The region above a front split into grid columns (utility form, maximisation).

    Column c spans ``lower[c]..upper[c]`` on the first m-1 axes (``upper`` may be inf) and is dominated by the
    front on the last axis from the reference up to ``height[c]``.
    """

    reference: np.ndarray
    """(m,) reference point, utility form."""
    front: np.ndarray
    """(k, m) the non-dominated front points strictly above the reference."""
    lower: np.ndarray
    """(C, m-1) lower corners of the columns."""
    upper: np.ndarray
    """(C, m-1) upper corners of the columns (inf on the outermost)."""
    height: np.ndarray
    """(C,) last-axis coordinate up to which the front dominates each column (>= reference[-1])."""

    @classmethod
    def from_front(cls, front: np.ndarray, reference: np.ndarray) -> HypervolumeCells:
        """Cells for ``front`` (k, m; dominated, NaN or not-above-reference rows are dropped) over ``reference``."""
        reference = np.asarray(reference, dtype=float).ravel()
        m = reference.size
        points = _as_matrix(front, m) if np.asarray(front).size else np.zeros((0, m))
        points = points[~np.isnan(points).any(axis=1)]
        points = points[(points > reference).all(axis=1)]
        points = points[non_dominated(points)] if len(points) else points
        edges = [np.concatenate([[reference[d]], np.unique(points[:, d]), [np.inf]]) for d in range(m - 1)]
        grids_low = np.meshgrid(*[e[:-1] for e in edges], indexing="ij")
        grids_up = np.meshgrid(*[e[1:] for e in edges], indexing="ij")
        lower = np.stack([g.ravel() for g in grids_low], axis=1) if m > 1 else np.zeros((1, 0))
        upper = np.stack([g.ravel() for g in grids_up], axis=1) if m > 1 else np.zeros((1, 0))
        height = np.full(len(lower), reference[-1])
        if len(points):
            step = max(1, _CHUNK_ELEMENTS // max(1, len(points) * m))
            for start in range(0, len(upper), step):
                covers = (points[None, :, :-1] >= upper[start:start + step, None, :]).all(axis=2)
                tops = np.where(covers, points[None, :, -1], -np.inf).max(axis=1)
                height[start:start + step] = np.maximum(tops, reference[-1])
        return cls(reference=reference, front=points, lower=lower, upper=upper, height=height)

    @property
    def volume(self) -> float:
        """Hypervolume the front dominates above the reference (product of utility units)."""
        dominated = self.height > self.reference[-1]
        widths = np.prod(self.upper[dominated] - self.lower[dominated], axis=1)
        return float(np.sum(widths * (self.height[dominated] - self.reference[-1])))

    def improvement(self, Y: np.ndarray) -> np.ndarray:
        """Exact hypervolume improvement of each point of ``Y`` (..., m; utility form) over the front, shape (...).

        NaN points improve nothing (0).
        """
        Y = np.asarray(Y, dtype=float)
        m = self.reference.size
        if Y.shape[-1] != m:
            raise SetupError(f"points have {Y.shape[-1]} objectives but the front has {m}")
        flat = np.nan_to_num(Y.reshape(-1, m), nan=-np.inf)
        out = np.empty(len(flat))
        step = max(1, _CHUNK_ELEMENTS // max(1, len(self.height) * m))
        for start in range(0, len(flat), step):
            rows = flat[start:start + step]
            volume = np.clip(rows[:, None, -1] - self.height[None, :], 0.0, None)
            for d in range(m - 1):
                width = np.minimum(rows[:, None, d], self.upper[None, :, d]) - self.lower[None, :, d]
                volume *= np.clip(width, 0.0, None)
            out[start:start + step] = volume.sum(axis=1)
        return out.reshape(Y.shape[:-1])

    def shortfall(self, Y: np.ndarray, scale: np.ndarray | float = 1.0) -> np.ndarray:
        """How far each point of ``Y`` (..., m) must rise to start improving the front, shape (...): the smallest,
        over columns, of the largest per-axis gap ``(edge_d - y_d) / scale_d`` (0 for a point that improves).

        ``scale`` (broadcast against ``Y``, e.g. posterior sds) puts the gaps in comparable units, so candidates
        that improve nothing can still be ordered by how nearly they do.

        Example:
            >>> cells = HypervolumeCells.from_front(np.array([[1.0, 1.0]]), np.zeros(2))
            >>> cells.shortfall(np.array([[0.5, 0.5], [0.5, 2.0], [-1.0, -1.0]])).tolist()
            [0.5, 0.0, 2.0]
        """
        Y = np.asarray(Y, dtype=float)
        m = self.reference.size
        scale = np.broadcast_to(np.asarray(scale, dtype=float), Y.shape).reshape(-1, m)
        flat = np.nan_to_num(Y.reshape(-1, m), nan=-np.inf)
        edges = np.concatenate([self.lower, self.height[:, None]], axis=1)  # (C, m): where each column starts
        out = np.empty(len(flat))
        step = max(1, _CHUNK_ELEMENTS // max(1, len(edges) * m))
        for start in range(0, len(flat), step):
            gaps = (edges[None, :, :] - flat[start:start + step, None, :]) / scale[start:start + step, None, :]
            out[start:start + step] = np.clip(gaps.max(axis=2), 0.0, None).min(axis=1)
        return out.reshape(Y.shape[:-1])


def hypervolume(Y: np.ndarray, reference: np.ndarray) -> float:
    """Hypervolume dominated by the rows of ``Y`` (n, m; maximisation) above ``reference`` (m,); exact for any m.

    Dominated, NaN and not-above-reference rows add nothing.

    Example:
        >>> float(hypervolume(np.array([[1.0, 1.0, 1.0]]), np.zeros(3)))
        1.0
        >>> float(hypervolume(np.array([[2.0, 1.0, 1.0], [1.0, 2.0, 1.0], [1.0, 1.0, 2.0]]), np.zeros(3)))
        4.0
    """
    return HypervolumeCells.from_front(Y, reference).volume
