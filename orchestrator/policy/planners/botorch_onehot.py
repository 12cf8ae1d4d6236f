"""The ``botorch-onehot`` arm: BoTorch as a user configures it for a reaction grid.

The ``botorch`` arm (``botorch_planner.BoTorchPlanner``: ``SingleTaskGP`` + qLogNEI, the same initial design and the
same seed) on the inputs a user writes for a grid of conditions: every categorical column one-hot, reagents given as
SMILES included (a user indexes the reagents of a plate; the pool's own features fingerprint them, Morgan bits), and
every number min-max scaled to [0, 1] by the space's bounds (the pool's range for a pool file). Columns constant over
the pool are dropped. On a pool without SMILES or formula columns the pool's own features are already this encoding
and are used as they are, so the two arms propose the same candidates (they share the seed).

**Falls back to botorch's features** (and so proposes exactly what ``botorch`` proposes) where one-hot carries
nothing: a molecule or material pool (a SMILES or formula per candidate, no conditions space), or a conditions pool
in which one categorical column gives every candidate a value of its own (a SMILES-only CSV read with ``--id-cols
smiles``): that column's one-hot block is the identity, which tells a GP nothing about how two candidates relate.
It falls back rather than refusing, so one arm list runs on every cell; the proposals' rationale says which inputs
were used (``onehot_inputs``).

Example:
    >>> from vocabulary.domain import ConditionSpace
    >>> from orchestrator.space.pool import Pool
    >>> space = ConditionSpace.model_validate({"parameters": [
    ...     {"name": "ligand", "kind": "categorical", "choices": ["CCO", "CCN", "c1ccccc1"]},
    ...     {"name": "T", "kind": "continuous", "low": 20, "high": 80}]})
    >>> pool = Pool("conditions", [space.parse({"ligand": s, "T": t}) for s in ("CCO", "CCN") for t in (20, 50, 80)],
    ...             space=space)
    >>> X, note = onehot_inputs(pool)
    >>> X.tolist()[:3], note
    ([[1.0, 0.0, 0.0], [1.0, 0.0, 0.5], [1.0, 0.0, 1.0]], 'one-hot categories, scaled numbers')
"""

from __future__ import annotations

import numpy as np

from orchestrator.policy.planners.botorch_planner import BoTorchPlanner

__all__ = ["BoTorchOneHotPlanner", "onehot_encode", "onehot_inputs"]

ONEHOT_NOTE = "one-hot categories, scaled numbers"


def _columns(pool, space) -> list[np.ndarray]:
    """Per parameter of ``space`` (in order): each candidate's choice position (categorical) or value."""
    parameters = getattr(pool, "parameters", None)
    if isinstance(parameters, list) and len(parameters) == len(space.parameters):
        return [np.asarray(column) for column in parameters]  # a streamed pool keeps exactly these codes
    columns = []
    for parameter in space.parameters:
        if parameter.kind == "categorical":
            position = {choice: k for k, choice in enumerate(parameter.choices)}
            columns.append(np.asarray([position[c.values[parameter.name]] for c in pool.candidates], dtype=int))
        else:
            columns.append(np.asarray([float(c.values[parameter.name]) for c in pool.candidates], dtype=float))
    return columns


def onehot_encode(space, columns: list[np.ndarray]) -> np.ndarray:
    """One-hot categories and min-max scaled numbers (the space's bounds), shape (n, n_features) in [0, 1]; columns
    constant over the rows are dropped (one zero column when nothing varies).

    Args:
        space: the pool's ``ConditionSpace``.
        columns: per parameter (space order), each row's choice position (categorical) or value.
    """
    n = len(columns[0]) if columns else 0
    blocks = []
    for parameter, column in zip(space.parameters, columns, strict=True):
        if parameter.kind == "categorical":
            blocks.append(np.eye(len(parameter.choices))[np.asarray(column, dtype=int)])
        else:
            span = (parameter.high - parameter.low) or 1.0
            blocks.append(((np.asarray(column, dtype=float) - parameter.low) / span)[:, None])
    X = np.hstack(blocks) if blocks else np.zeros((n, 0))
    keep = X.max(axis=0) > X.min(axis=0) if n else np.zeros(X.shape[1], dtype=bool)
    return X[:, keep] if keep.any() else np.zeros((n, 1))


def _molecular_columns(space) -> list[str]:
    """The categorical parameters whose choices are SMILES or formulas (which the pool's features do not one-hot)."""
    import pandas as pd

    from orchestrator.space.features import column_kind

    return [p.name for p in space.parameters if p.kind == "categorical"
            and column_kind(pd.Series(list(p.choices), dtype=object, name=p.name)) in ("smiles", "formula")]


def onehot_inputs(pool) -> tuple[np.ndarray, str]:
    """The arm's inputs, shape (n_candidates, n_features) in [0, 1], and a few words saying what they are.

    The one-hot encoding (``onehot_encode``) when the pool has SMILES or formula columns; the pool's own features
    otherwise: already one-hot categories and scaled numbers, or (the fallback) a pool where one-hot says nothing.
    """
    space = getattr(pool, "space", None)
    if space is None or not space.parameters:
        return pool.features, (f"the pool's own features, as botorch's (a {getattr(pool, 'kind', 'candidate')} pool "
                               "has no columns to one-hot)")
    n, columns = len(pool), _columns(pool, space)
    for parameter, column in zip(space.parameters, columns, strict=True):
        if parameter.kind == "categorical" and n > 1 and len(np.unique(column)) == n:
            return pool.features, (f"the pool's own features, as botorch's (column {parameter.name!r} gives every "
                                   "candidate its own value, so one-hot would be the identity)")
    if not _molecular_columns(space):
        return pool.features, "the pool's features, already " + ONEHOT_NOTE
    return onehot_encode(space, columns), ONEHOT_NOTE


class BoTorchOneHotPlanner(BoTorchPlanner):
    """``botorch`` on one-hot categories (SMILES columns included) and scaled numbers; see the module docstring."""

    name = "botorch-onehot"

    def __init__(self) -> None:
        self._cached: tuple[tuple[int, int], np.ndarray, str] | None = None

    def features(self, pool) -> tuple[np.ndarray, str]:
        key = (id(pool), len(pool))  # an open space grows its pool: a new length is a new encoding
        if self._cached is None or self._cached[0] != key:
            self._cached = (key, *onehot_inputs(pool))
        return self._cached[1], self._cached[2]
