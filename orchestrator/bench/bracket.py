"""The llm arm's bracket in a benchmark: the bench-only oracle arm, and what the model contributes between the floor
and the ceiling.

``llm-random`` (a seeded coin in the model's place) is an ordinary arm; ``llm-oracle`` (the lab's truth in the
model's place, ``policy.planners.llm_bracket``) reads the ground truth, so only the bench registers it
(``register_bench_arms``) and a campaign never gets it.

``contribution`` is the model's share of the bracket on a metric where fewer lab experiments are better::

    (mean floor - mean model) / (mean floor - mean ceiling)

over paired seeds: 0 is a coin, 1 the oracle, below 0 worse than a coin. Its ``interval`` is the 2.5-97.5 %
percentile range over seeds resampled with replacement (pairs kept), ``median`` that bootstrap's median.

Example:
    >>> c = contribution(model=[10, 12, 9, 11], floor=[14, 15, 13, 14], ceiling=[6, 7, 6, 8])
    >>> round(c["point"], 3), c["ceiling_experiments"], c["n_seeds"], c["capped"]
    (0.483, 7.25, 4, False)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["BRACKET_ARMS", "contribution", "give_oracle_its_truth", "register_bench_arms"]

BRACKET_ARMS = ("llm", "llm-random", "llm-oracle")
"""The model, its floor and its ceiling: run together, the bench reports ``contribution`` under ``llm``."""

N_RESAMPLES = 10_000


def register_bench_arms() -> None:
    """Register ``llm-oracle`` in this process (a benchmark's own; re-registering is harmless)."""
    from orchestrator.planner_registry import register_planner
    from orchestrator.policy.planners.factories import make_llm_oracle

    register_planner("llm-oracle", make_llm_oracle)


def give_oracle_its_truth(spec, pool) -> None:
    """Give the ``llm-oracle`` arm's prior (``llm_prior`` with ``model = "oracle"``) the lab's truth per candidate
    in this process: the simulated lab's ground-truth column (``lab.oracle_column``), as the arm's choices read it.
    Nothing for a spec without such a rung or column."""
    from orchestrator.policy.planners.llm_prior import ORACLE, set_oracle_truth

    if not any(r.simulator == "llm_prior" and r.parameters.get("model") == ORACLE for r in spec.ladder):
        return
    column = spec.lab.oracle_column or spec.objective.column
    if column is None or column not in pool.columns:
        return
    truth = np.asarray(pool.columns[column], dtype=float)
    set_oracle_truth({cid: float(v) for cid, v in zip(pool.ids, truth, strict=True) if np.isfinite(v)})


def _share(model: np.ndarray, floor: np.ndarray, ceiling: np.ndarray) -> float | None:
    headroom = floor.mean() - ceiling.mean()
    return None if headroom <= 0 else float((floor.mean() - model.mean()) / headroom)


def contribution(model: Sequence[float], floor: Sequence[float], ceiling: Sequence[float],
                 seed: int = 0) -> dict[str, Any]:
    """The model's share of the bracket, per paired seed lists of lab experiments (fewer is better).

    Returns ``point`` (on all seeds), ``median`` and ``interval`` (bootstrap over seeds; resamples without headroom
    are left out and counted in ``n_without_headroom``), ``ceiling_experiments`` (mean lab experiments the oracle
    saves over the coin: the headroom the design leaves the model) with its bootstrap ``ceiling_interval``,
    ``ceiling_ratio`` (oracle over coin, mean experiments) and ``n_seeds``. Where the headroom's interval reaches 0
    (the oracle not measurably better than the coin), ``capped`` is True and ``point``, ``median`` and ``interval``
    are None: the design caps the model, and a ratio over a headroom of nothing would be noise.
    """
    m, f, c = (np.asarray(x, dtype=float) for x in (model, floor, ceiling))
    if not (m.shape == f.shape == c.shape) or not m.size:
        raise ValueError(f"the bracket needs paired, non-empty seed lists; got {m.size}, {f.size} and {c.size}")
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, m.size, size=(N_RESAMPLES, m.size))
    shares = [_share(m[k], f[k], c[k]) for k in draws]
    kept = np.asarray([s for s in shares if s is not None])
    headroom = np.asarray([f[k].mean() - c[k].mean() for k in draws])
    headroom_interval = [float(q) for q in np.percentile(headroom, [2.5, 97.5])]
    capped = headroom_interval[0] <= 0  # the oracle is not measurably better than the coin: no share to speak of
    point = None if capped else _share(m, f, c)
    return {
        "point": point,
        "median": float(np.median(kept)) if point is not None and kept.size else None,
        "interval": [float(q) for q in np.percentile(kept, [2.5, 97.5])] if point is not None and kept.size else None,
        "capped": bool(capped),
        "ceiling_experiments": float(f.mean() - c.mean()),
        "ceiling_interval": headroom_interval,
        "ceiling_ratio": float(c.mean() / f.mean()) if f.mean() > 0 else None,
        "n_seeds": int(m.size),
        "n_without_headroom": int(N_RESAMPLES - kept.size),
    }
