"""Batch log-EI over a pool too large for one feature matrix: a chunked bound, then ``select_batch`` on a shortlist.

``select_batch`` holds the whole pool's features and posterior at once. Over a streamed pool
(``pool_compact.CompactPool``) the features are gathered ``chunk`` rows at a time instead, and the answer is the
same, by a certificate rather than by approximation:

1. One pass scores every available row with the posterior after the pending jobs are believed: exactly the score
   ``select_batch`` gives it before its first pick. A Kriging-believer fantasy leaves the posterior mean unchanged
   and only shrinks the variance, and each pick can only raise the incumbent, so for log-EI (increasing in the sd,
   decreasing in the incumbent) that first score bounds every later score of the row. For a target objective the
   window improvement is not monotone in the sd; the pass then computes an upper bound over every smaller sd and
   narrower window (``_log_window_bound``).
2. ``select_batch`` runs on the rows with the best bounds (the shortlist). If every pick scored more than the best
   bound left outside, no row outside could have been picked at any step, so the batch equals the whole pool's.
   Otherwise the shortlist grows fourfold and the batch is chosen again, up to the shortlist's memory budget; past
   it the batch is the shortlist's, and a warning says so.

Memory is O(chunk × n_features + shortlist × n_features), whatever the pool's size. Over a compact pool's
per-column blocks the pass builds no feature row at all (``_BlockPosterior``): a row's kernel column is a sum of
per-value table lookups.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from orchestrator.policy.planners.acquisition import (
    _MAX_WINDOW,
    _MIN_VARIANCE,
    _MIN_WINDOW,
    _log_h,
    _posterior_on,
    log_expected_improvement,
    select_batch,
)
from orchestrator.policy.planners.surrogate import GPSurrogate

__all__ = ["log_ei_scorer", "select_batch_streamed"]

log = logging.getLogger(__name__)

CHUNK_BYTES = 128 * 2**20
"""Feature bytes a scoring chunk may gather (times about four for the kernel's temporaries)."""
SHORTLIST_BYTES = 64 * 2**20
"""Feature bytes the shortlist may hold at most."""


def _log_window_bound(mean: np.ndarray, sd: np.ndarray, target: float, distance: float) -> np.ndarray:
    """An upper bound of log E[max(d' - |f - target|, 0)] over f ~ Normal(mean, s'²) for every s' ≤ sd and
    d' ≤ ``distance`` (standardised units).

    Outside the window (e = |mean - target| - d > 0), d' - |f - target| ≤ |f - mean| - e, whose expected positive
    part grows with s': at most 2 s φ(e/s) - 2 e Φ(-e/s) = 2 s h(-e/s). Inside, the bound is d itself.
    """
    e = np.abs(mean - target) - distance
    safe_sd = np.where(sd > 0, sd, 1.0)
    with np.errstate(divide="ignore"):
        outside = math.log(2.0) + np.log(safe_sd) + _log_h(-np.maximum(e, 0.0) / safe_sd)
        outside = np.where(sd > 0, outside, -np.inf)
    return np.where(e > 0, np.minimum(outside, math.log(distance)), math.log(distance))


class _BlockPosterior:
    """The posterior mean and sd at pool rows from per-column feature blocks (``pool_compact.CompactFeatures``).

    Both kernels split over feature blocks: Matérn's scaled squared distance is a sum over blocks, Tanimoto's dot
    products and squared norms too. So each block's distances (or products) to the n_z conditioning points are
    tabulated once per distinct value, and a row's kernel column is a sum of table lookups: no dense feature row is
    built. The posterior then follows ``PoolPosterior``: one triangular solve against the Cholesky factor of the
    conditioning points' kernel matrix.
    """

    def __init__(self, believed: GPSurrogate, features: Any):
        import torch

        h = believed.hyperparameters
        self.kind, self.variance = h["kernel"], float(h["variance"])
        self.y_mean, self.y_sd = h["y_mean"], h["y_sd"]
        Z = believed._model.X.numpy()
        widths = [table.shape[1] for _, table in features.blocks]
        bounds = np.cumsum([0, *widths])
        lengthscale = np.broadcast_to(np.asarray(h.get("lengthscale", 1.0), dtype=float), (Z.shape[1],))
        self.blocks = []
        for (codes, table), lo, hi in zip(features.blocks, bounds[:-1], bounds[1:], strict=True):
            scale = lengthscale[lo:hi] if self.kind == "matern52" else np.ones(hi - lo)
            z = Z[:, lo:hi] / scale
            if codes is None:
                self.blocks.append((None, table, scale, z))
            else:
                self.blocks.append((codes, self._pairs(table / scale, z), None, None))
        with torch.no_grad():
            L = believed._cholesky().numpy()
        self.L = L
        self.alpha = _solve_lower(L, believed._model.y.numpy())
        self.z_norms = (Z * Z).sum(1)

    def _pairs(self, a: np.ndarray, z: np.ndarray) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        if self.kind == "matern52":
            return np.clip((a * a).sum(1)[:, None] - 2 * a @ z.T + (z * z).sum(1)[None, :], 0.0, None)
        return a @ z.T, (a * a).sum(1)

    def predict(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        parts = []
        for codes, table, scale, z in self.blocks:
            if codes is None:
                parts.append(self._pairs(table[rows] / scale, z))
            elif self.kind == "matern52":
                parts.append(table[codes[rows]])
            else:
                parts.append((table[0][codes[rows]], table[1][codes[rows]]))
        if self.kind == "matern52":
            r = np.sqrt(sum(parts))
            k = self.variance * (1 + math.sqrt(5) * r + 5 / 3 * r * r) * np.exp(-math.sqrt(5) * r)
        else:
            ab = sum(p[0] for p in parts)
            aa = sum(p[1] if p[1].ndim == 1 else p[1] for p in parts)
            denominator = aa[:, None] + self.z_norms[None, :] - ab
            is_empty = denominator <= 0
            k = self.variance * np.where(is_empty, 1.0, ab / np.where(is_empty, 1.0, denominator))
        W = _solve_lower(self.L, k.T)
        mean = (W.T @ self.alpha) * self.y_sd + self.y_mean
        var = np.clip(self.variance - (W * W).sum(0), 0.0, None)
        return mean, np.sqrt(var) * self.y_sd


def _solve_lower(L: np.ndarray, b: np.ndarray) -> np.ndarray:
    from scipy.linalg import solve_triangular

    return solve_triangular(L, b, lower=True)


def _first_scores(believed: Any, X: Any, offset: np.ndarray, best: float, target: float | None,
                  y_sd: float) -> np.ndarray:
    """``select_batch``'s scores before its first pick (log-EI), or for a target the bound over later picks.

    ``believed`` is a ``GPSurrogate`` with ``X`` the rows' features, or a ``_BlockPosterior`` with ``X`` the rows.
    """
    mean, sd = believed.predict(X)
    sd_std = np.sqrt(np.maximum((sd / y_sd) ** 2, _MIN_VARIANCE))
    if target is None:
        return log_expected_improvement((mean + offset) / y_sd, sd_std, best / y_sd) + math.log(y_sd)
    distance = max(-best, _MIN_WINDOW * y_sd) if math.isfinite(best) else _MAX_WINDOW * y_sd
    return _log_window_bound((mean + offset) / y_sd, sd_std, target / y_sd, distance / y_sd) + math.log(y_sd)


def _keep_best(scores: np.ndarray, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best (score descending, row ascending) of the given rows."""
    order = np.lexsort((rows, -scores))[:k]
    return scores[order], rows[order]


def select_batch_streamed(
    surrogate: GPSurrogate,
    X_train: np.ndarray,
    y_train: np.ndarray,
    features: Any,
    available: np.ndarray,
    q: int,
    *,
    pending: np.ndarray | None = None,
    prior: np.ndarray | None = None,
    prior_pending: np.ndarray | None = None,
    incumbent: float | None = None,
    target: float | None = None,
    chunk_bytes: int = CHUNK_BYTES,
    shortlist_bytes: int = SHORTLIST_BYTES,
) -> tuple[np.ndarray, list[float]]:
    """``select_batch`` over the pool rows ``available``, gathering ``features[rows]`` a chunk at a time.

    Args:
        surrogate, X_train, y_train, pending, incumbent, target: as ``select_batch``.
        features: the pool's features, indexable by an array of rows (``features[rows]`` → (len(rows), n_features)).
        available: the pool rows to choose from, ascending.
        q: batch size, at most ``len(available)``.
        prior: a prior mean per pool row (``select_batch``'s ``offset_pool``, indexed by pool row), or None.
        prior_pending: the prior at the pending rows (``offset_pending``).
        chunk_bytes, shortlist_bytes: feature bytes a scoring chunk and the shortlist may hold.

    Returns:
        The chosen pool rows in pick order and their scores at pick time, as ``select_batch`` returns them for
        ``features[available]``.

    Example:
        >>> from orchestrator.policy.planners.surrogate import GPSurrogate
        >>> X = np.linspace(0.0, 1.0, 200)[:, None]
        >>> surrogate = GPSurrogate.fit(X[[0, 50, 199]], np.array([0.0, 1.0, 0.2]), n_steps=30)
        >>> available = np.arange(1, 199)
        >>> whole = select_batch(surrogate, X[[0, 50, 199]], np.array([0.0, 1.0, 0.2]), X[available], 3)[0]
        >>> rows, _ = select_batch_streamed(surrogate, X[[0, 50, 199]], np.array([0.0, 1.0, 0.2]), X, available, 3,
        ...                                 chunk_bytes=64 * 8)
        >>> rows.tolist() == available[whole].tolist()
        True
    """
    available = np.asarray(available, dtype=np.int64)
    y_train = np.asarray(y_train, dtype=float)
    n_features = surrogate.n_features
    posterior = _posterior_on(surrogate, X_train, y_train)
    y_sd = posterior.hyperparameters["y_sd"]

    def utility(v):
        return v if target is None else -np.abs(np.asarray(v, dtype=float) - target)

    if incumbent is not None:
        best = float(incumbent)
    else:
        best = float(np.max(utility(y_train))) if y_train.size else -math.inf
    believed = posterior
    if pending is not None and len(pending):
        pending_offset = 0.0 if prior_pending is None else np.asarray(prior_pending, dtype=float)
        best = max(best, float(np.max(utility(posterior.predict(pending)[0] + pending_offset))))
        believed = posterior.fantasize(pending)

    cap = max(q, min(len(available), shortlist_bytes // (8 * max(n_features, 1))))
    chunk = int(min(50_000, max(256, chunk_bytes // (8 * max(n_features, 1)))))
    blocks = None
    if hasattr(features, "blocks") and believed.hyperparameters["kernel"] in ("matern52", "tanimoto"):
        blocks = _BlockPosterior(believed, features)
        chunk = 50_000
    top_scores, top_rows = np.zeros(0), np.zeros(0, dtype=np.int64)
    for start in range(0, len(available), chunk):
        rows = available[start:start + chunk]
        offset = np.zeros(len(rows)) if prior is None else np.asarray(prior, dtype=float)[rows]
        if blocks is not None:
            scores = _first_scores(blocks, rows, offset, best, target, y_sd)
        else:
            scores = _first_scores(believed, features[rows], offset, best, target, y_sd)
        top_scores, top_rows = _keep_best(np.concatenate([top_scores, scores]), np.concatenate([top_rows, rows]),
                                          cap + 1)

    size = min(cap, max(32 * q, 256))
    while True:
        shortlist = np.sort(top_rows[:size])  # ascending, so ties go to the lowest row as in select_batch
        offsets = {}
        if prior is not None:
            offsets = {"offset_pool": np.asarray(prior, dtype=float)[shortlist], "offset_pending": prior_pending}
        picks, values = select_batch(posterior, X_train, y_train, features[shortlist], q, pending=pending,
                                     incumbent=incumbent, target=target, **offsets)
        if size >= len(available):
            break  # the shortlist is every available row
        bound = float(top_scores[size])
        if min(values) > bound + 1e-9 * max(1.0, abs(bound)):
            break  # no row outside the shortlist could have been picked at any step
        if size >= cap:
            log.warning("streamed batch selection: the %d-row shortlist (its memory budget) could not certify the "
                        "batch against the rest of the pool (best bound outside %.4g, weakest pick %.4g); the "
                        "batch is the shortlist's best", size, bound, min(values))
            break
        size = min(cap, 4 * size)
    return shortlist[np.asarray(picks, dtype=np.int64)], values


def log_ei_scorer(surrogate: Any, incumbent: float) -> Callable[[np.ndarray], np.ndarray]:
    """A ``stream_top_k`` scorer: log expected improvement over ``incumbent`` of a fitted ``GPSurrogate``'s posterior, for maximisation.

    Args:
        surrogate: anything with ``predict(X) -> (mean, sd)``, both shape (n_rows,) in utility units.
        incumbent: the best utility observed so far, in the same units.
    """
    def score(X: np.ndarray) -> np.ndarray:
        mean, sd = surrogate.predict(X)
        return log_expected_improvement(mean, sd, incumbent)

    return score
