"""A benchmark problem: a CSV pool merged to one row per candidate, its features, its lab truth and its rungs.

Rows with the same id columns (replicates) are merged and their numeric columns averaged, as in ``orchestrator.pool``.
Rows without a lab value are dropped. The candidates are ``Conditions`` over the id columns, so every arm (the llm
arm included) sees and proposes them through the same ``Pool`` and ``CampaignSpec`` a campaign would use.

The top sets are by utility (higher is better for every direction): the top ``p`` % holds the ``max(1, ceil(p·N/100))``
best candidates plus any tied with the last of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from ..domain import ConditionSpace, Conditions, Parameter, objective_utility
from ..pool import Pool
from ..spec import CampaignSpec
from .config import BenchConfig, BenchError
from .features import featurise_columns

__all__ = ["BenchProblem", "load_problem", "top_set"]


def top_set(utilities: np.ndarray, percent: float) -> np.ndarray:
    """Indices of the top ``percent`` % by utility (at least one, ties with the cut-off included).

    Example:
        >>> top_set(np.array([0.0, 3.0, 1.0, 3.0]), 1).tolist()
        [1, 3]
    """
    n_top = max(1, math.ceil(percent * len(utilities) / 100))
    cut = np.sort(utilities)[::-1][n_top - 1]
    return np.flatnonzero(utilities >= cut)


@dataclass
class BenchProblem:
    """Everything an arm needs: the pool, the spec, the lab values and utilities, the rung values.

    ``values`` are lab values in the objective column's unit, ``utilities`` their utilities; ``rung_values`` maps a
    rung name to its column (NaN where missing). All arrays have one entry per candidate, in pool order.
    """

    config: BenchConfig
    pool: Pool
    spec: CampaignSpec
    values: np.ndarray
    rung_values: dict[str, np.ndarray]
    kernel: str
    n_rows: int
    n_dropped: int = 0
    labels: list[str] = field(default_factory=list)

    @cached_property
    def utilities(self) -> np.ndarray:
        c = self.config
        return np.asarray([objective_utility(c.direction, v, c.target) for v in self.values], dtype=float)

    def top(self, percent: float) -> np.ndarray:
        return top_set(self.utilities, percent)

    def rung_utilities(self, name: str) -> np.ndarray:
        """The rung's values read as if they were lab values (uncalibrated), as utilities; NaN stays NaN."""
        c = self.config
        values = self.rung_values[name]
        return np.asarray([objective_utility(c.direction, v, c.target) if np.isfinite(v) else np.nan for v in values])

    def __len__(self) -> int:
        return len(self.values)


def _read(config: BenchConfig) -> pd.DataFrame:
    path = Path(config.pool)
    if not path.is_file():
        raise BenchError("--pool", f"{path} does not exist; give a CSV file")
    try:
        frame = pd.read_csv(path, encoding="utf-8-sig")
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise BenchError("--pool", f"{path} is not a readable CSV ({exc})") from exc
    frame.columns = [str(c).strip() for c in frame.columns]
    return frame


def _check_columns(frame: pd.DataFrame, config: BenchConfig) -> list[str]:
    known = list(frame.columns)

    def need(flag: str, names) -> None:
        missing = [n for n in names if n not in known]
        if missing:
            raise BenchError(flag, f"column(s) {missing} are not in the pool; its columns are {known}")

    need("--id-cols", config.id_cols)
    need("--objective", [config.objective_column])
    need("--rung", [r.column for r in config.rungs])
    features = list(config.id_cols) if config.feature_cols == "auto" else list(config.feature_cols)
    need("--feature-cols", features)
    if not pd.api.types.is_numeric_dtype(frame[config.objective_column]):
        raise BenchError("--objective", f"column {config.objective_column!r} is not numeric; pick the measured value")
    for rung in config.rungs:
        if not pd.api.types.is_numeric_dtype(frame[rung.column]):
            raise BenchError("--rung", f"rung column {rung.column!r} is not numeric")
    hidden = {config.objective_column, *(r.column for r in config.rungs)}
    if config.feature_cols != "auto" and hidden & set(features):
        raise BenchError("--feature-cols", f"{sorted(hidden & set(features))} are the lab or rung columns; "
                                           "features must not contain the answer")
    return features


def _merge(frame: pd.DataFrame, config: BenchConfig, features: list[str]) -> pd.DataFrame:
    """One row per distinct id: numeric columns averaged, others from the first row."""
    frame = frame.dropna(subset=[config.objective_column, *config.id_cols])
    keys = list(config.id_cols)
    numeric = [c for c in frame.columns if c not in keys and pd.api.types.is_numeric_dtype(frame[c])]
    others = [c for c in dict.fromkeys(features) if c not in keys and c not in numeric]
    grouped = frame.groupby(keys, sort=False, dropna=False)
    merged = grouped[numeric].mean() if numeric else grouped.size().to_frame("_n")
    if others:
        merged = merged.join(grouped[others].first())
    return merged.reset_index()


def _space(frame: pd.DataFrame, id_cols: tuple[str, ...]) -> ConditionSpace:
    parameters = []
    for name in id_cols:
        series = frame[name]
        if pd.api.types.is_numeric_dtype(series):
            parameters.append(Parameter(name=name, kind="continuous", low=float(series.min()), high=float(series.max())))
        else:
            parameters.append(Parameter(name=name, kind="categorical", choices=tuple(sorted(series.astype(str).unique()))))
    return ConditionSpace(parameters=tuple(parameters))


def _spec(config: BenchConfig, pool_path: str, kernel: str, seed: int = 0) -> CampaignSpec:
    from ..spec import validate_spec

    objective = {"property": config.objective_column, "direction": config.direction}
    if config.direction == "target":
        objective.update(target=config.target, tolerance=config.tolerance)
    ladder = [{"name": r.name, "simulator": "table", "column": r.column, "property": r.column, "proxy": r.column,
               "cost_s": r.cost_s} for r in config.rungs]
    return validate_spec({
        "campaign": {"name": f"bench-{Path(pool_path).stem}", "kind": "conditions", "seed": seed},
        "objective": objective,
        "space": {"pool": pool_path, "columns": list(config.id_cols)},
        "ladder": ladder,
        "lab": {"driver": "simlab", "oracle_column": config.objective_column},
        "budget": {"lab_experiments": config.lab_budget},
        "planner": {"main": "bo", "control": None, "control_share": 0.0, "batch_size": config.batch,
                    "n_initial": config.batch, "kernel": kernel, "proposals_per_slot": 1},
    }, source="closedloop bench")


def load_problem(config: BenchConfig) -> BenchProblem:
    """Read, merge and featurise the pool; raise ``BenchError`` naming the flag for any bad input.

    Example:
        >>> import pandas as pd, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "pool.csv")
        >>> pd.DataFrame({"x": [0.0, 0.5, 0.5, 1.0], "y": [1.0, 2.0, 4.0, 0.0]}).to_csv(path, index=False)
        >>> problem = load_problem(BenchConfig(pool=path, id_cols=("x",), objective="maximize:y", lab_budget=2,
        ...                                    seeds=1, arms=("random",), batch=1))
        >>> len(problem), problem.values.tolist()
        (3, [1.0, 3.0, 0.0])
    """
    frame = _read(config)
    features = _check_columns(frame, config)
    n_rows = len(frame)
    merged = _merge(frame, config, features)
    if len(merged) < 2:
        raise BenchError("--pool", f"only {len(merged)} candidate(s) have a lab value; a benchmark needs at least 2")
    if config.lab_budget > len(merged):
        raise BenchError("--lab-budget", f"{config.lab_budget} exceeds the {len(merged)} distinct candidates; lower it")
    X, is_binary = featurise_columns(merged, features)
    space = _space(merged, config.id_cols)
    records = merged[list(config.id_cols)].to_dict("records")
    candidates: list[Conditions] = [space.parse(r) for r in records]
    columns = {c: merged[c].to_numpy(dtype=float) for c in merged.columns
               if c not in config.id_cols and pd.api.types.is_numeric_dtype(merged[c])}
    pool = Pool("conditions", candidates, columns, space)
    pool.features = X  # overrides the cached property: the bench's own featurisation
    kernel = "tanimoto" if is_binary else "matern52"
    values = merged[config.objective_column].to_numpy(dtype=float)
    rung_values = {r.name: merged[r.column].to_numpy(dtype=float) for r in config.rungs}
    labels = ["; ".join(str(r[c]) for c in config.id_cols) for r in records]
    return BenchProblem(config=config, pool=pool, spec=_spec(config, str(Path(config.pool).resolve()), kernel),
                        values=values, rung_values=rung_values, kernel=kernel, n_rows=n_rows,
                        n_dropped=n_rows - int(frame[config.objective_column].notna().sum()), labels=labels)
