"""A benchmark problem: a campaign spec whose simulated lab answers from a data column, and that column's truth.

Two ways to get one:

- ``--spec SPEC``: a campaign spec as it stands. Its lab's ground truth (``lab.oracle_column`` or an inline
  ``lab.oracle``) defines the top sets.
- ``--pool CSV``: the spec is built (``pool_spec``). An empty id value is a category of its own, ``none`` (no
  additive, no ligand). Rows with the same id values (replicates; SMILES compared as molecules, by RDKit's
  canonical SMILES, and formulas as compositions, ``canonical_ids``) are merged and their numeric columns averaged (the PV-Lab protocol; a warning counts the
  groups); rows without a finite lab value are left out, and a warning lists their lines. A number column with a few
  text cells ('n/a', a typo) reads them as empty; one in which more than one filled cell in ten is text is refused. The merged table is written to the run's work directory and the spec points at it. The
  candidates are ``Conditions`` over the id columns, featurised by what each column holds (``[space] features =
  "columns"``); each ``--rung`` is a table rung priced at its cost.

With ``--objective`` repeated the spec has one ``[[objective]]`` per column (its ``column`` the lab's truth) and a
Pareto trade-off whose reference point the bench infers once from the whole pool (``pool_reference_point``); the
problem then holds the truth per objective (``objective_values``) and the pool's true hypervolume.

Either way every arm then runs as that spec's main planner, through the same graph, screen and ledger as
``closedloop run``. The top sets are by utility (higher is better for every direction): the top ``p`` % holds the
``max(1, ceil(p·N/100))`` best candidates plus any tied with the last of them.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from orchestrator.bench.config import BenchConfig, BenchError, parse_objective
from orchestrator.space.checks import (
    check_csv_limits,
    csv_line_numbers,
    line_ranges,
    missing_column_hint,
)
from orchestrator.space.features import NO_COMPONENT
from orchestrator.space.pool import Pool, load_pool
from orchestrator.spec import CampaignSpec, load_spec, validate_spec
from vocabulary.domain import objective_utility

__all__ = ["BenchProblem", "canonical_ids", "load_problem", "objective_truth", "pool_reference_point", "pool_spec",
           "text_cells", "top_set"]

log = logging.getLogger(__name__)
_MIN_LABEL_CANDIDATES = 20  # below this a one-hot per candidate is a small exhaustive design, not a label
_MAX_TEXT_SHARE = 0.1
"""The share of a number column's filled cells that may hold text (typos, 'n/a') before the column is refused;
the same one in ten that a SMILES or formula column may fail to parse (``features.column_kind``)."""


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
    """The spec every arm runs, its pool, and the lab's truth per pool row (``values``, objective unit)."""

    config: BenchConfig
    spec: CampaignSpec
    pool: Pool
    values: np.ndarray
    n_rows: int
    n_dropped: int = 0
    """CSV rows left out because they had no finite lab value."""
    n_averaged: int = 0
    """Replicate groups (rows with the same id values) averaged into one candidate each."""
    objective_values: np.ndarray | None = None
    """Several objectives: the lab's truth per pool row and objective, shape (n_candidates, n_objectives), objective
    units, columns in ``spec.objective_list`` order; None for one objective."""

    @property
    def is_multi_objective(self) -> bool:
        return self.objective_values is not None

    @cached_property
    def objective_utilities(self) -> np.ndarray:
        """``objective_values`` as utilities (higher is better per column), NaN where the truth is missing."""
        from vocabulary.pareto import utility_matrix

        return utility_matrix(self.spec.objective_list, self.objective_values)

    @property
    def reference_point(self) -> list[float]:
        """The hypervolume reference point, objective units (the spec's ``tradeoff.reference_point``)."""
        return list(self.spec.tradeoff.reference_point)

    @cached_property
    def reference_utility(self) -> np.ndarray:
        from vocabulary.pareto import reference_in_utility

        return reference_in_utility(self.spec.objective_list, self.reference_point)

    @cached_property
    def true_hypervolume(self) -> float:
        """The hypervolume of the whole pool's truth (every candidate with every value) over the reference point,
        in the product of the objectives' units."""
        from vocabulary.pareto import hypervolume

        Y = self.objective_utilities
        return float(hypervolume(Y[np.isfinite(Y).all(axis=1)], self.reference_utility))

    @cached_property
    def utilities(self) -> np.ndarray:
        o = self.spec.objective  # a candidate without a lab value can never be a hit
        return np.asarray([objective_utility(o.direction, v, o.target) if np.isfinite(v) else -np.inf
                           for v in self.values], dtype=float)

    @property
    def direction(self) -> str:
        return self.spec.objective.direction

    @property
    def target(self) -> float | None:
        return self.spec.objective.target

    @property
    def lab_budget(self) -> int:
        return self.config.lab_budget or self.spec.budget.lab_experiments

    def top(self, percent: float) -> np.ndarray:
        return top_set(self.utilities, percent)

    def in_window(self) -> np.ndarray:
        """Indices whose lab value lies inside a target objective's window, target ± tolerance (the spec's own
        success); empty for other objectives."""
        objective = self.spec.objective
        if objective.direction != "target":
            return np.zeros(0, dtype=int)
        return np.flatnonzero([objective.is_hit(float(v)) for v in self.values])

    def __len__(self) -> int:
        return len(self.values)


def _read(config: BenchConfig) -> pd.DataFrame:
    path = Path(config.pool)
    if not path.is_file():
        raise BenchError("--pool", f"{path} does not exist; give a CSV file")
    check_csv_limits(path, str(path), lambda message: BenchError("--pool", message))  # before pandas holds a row
    try:
        frame = pd.read_csv(path, encoding="utf-8-sig")
    except pd.errors.EmptyDataError as exc:
        raise BenchError("--pool", f"{path} is empty; give a CSV with a header row and data rows") from exc
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise BenchError("--pool", f"{path} is not a readable CSV ({exc})") from exc
    frame.columns = [str(c).strip() for c in frame.columns]
    return frame


def _check_columns(frame: pd.DataFrame, config: BenchConfig) -> None:
    known = list(frame.columns)

    def need(flag: str, names) -> None:
        missing = [n for n in names if n not in known]
        if missing:
            raise BenchError(flag, f"column(s) {missing} are not in the pool; its columns are {known}"
                                   f"{missing_column_hint(missing, known)}")

    need("--id-cols", config.id_cols)
    need("--objective", config.objective_columns)
    for objective_column in config.objective_columns:
        if objective_column in config.id_cols:
            rest = [c for c in config.id_cols if c != objective_column]
            raise BenchError("--id-cols", f"{objective_column!r} is an objective's column: a candidate described by "
                                          "its own lab value gives every arm the answer. Leave it out"
                                          + (f", e.g. --id-cols {','.join(rest)}" if rest else ""))
    need("--rung", [r.column for r in config.rungs])
    for objective_column in config.objective_columns:
        perfect = [r.name for r in config.rungs if r.column == objective_column]
        if perfect:
            raise BenchError("--rung", f"rung(s) {perfect} read {objective_column!r}, the objective's column: a "
                                       "rung that reads the lab's answer predicts it perfectly; give each rung the "
                                       "column of its own (cheaper) measurement")
    for objective_column in config.objective_columns:
        _check_numbers(frame, objective_column, "--objective", "the measured value")
    for rung in config.rungs:
        _check_numbers(frame, rung.column, "--rung", "the cheaper fidelity's numbers")
    if config.feature_cols != "auto":
        raise BenchError("--feature-cols", "a candidate is featurised from its id columns, by what each holds: give "
                                           "the columns that describe a candidate as --id-cols (e.g. --id-cols "
                                           f"{','.join(config.feature_cols)}) and leave --feature-cols at auto")


def text_cells(series: pd.Series) -> pd.Series:
    """The cells of a column that hold something other than a number (empty cells are not counted).

    Example:
        >>> text_cells(pd.Series(["1.5", "-", None, " ", "2 eV"])).tolist()
        ['-', '2 eV']
    """
    present = series[series.notna() & (series.astype(str).str.strip() != "")]
    return present[pd.to_numeric(present, errors="coerce").isna()]


def _check_numbers(frame: pd.DataFrame, column: str, flag: str, what: str) -> None:
    """Refuse a column of numbers in which more than one filled cell in ten holds text (units, comments, the wrong
    column); fewer are typos or markers such as 'n/a', whose rows ``_merge`` treats as empty and names."""
    series = frame[column]
    if pd.api.types.is_numeric_dtype(series):
        return
    text = text_cells(series)
    n_filled = int((series.notna() & (series.astype(str).str.strip() != "")).sum())
    if len(text) <= int(_MAX_TEXT_SHARE * n_filled):
        return
    examples = ", ".join(repr(str(v)) for v in pd.unique(text)[:3])
    raise BenchError(flag, f"column {column!r} should hold {what}, but {len(text)} of its {n_filled} filled cells "
                           f"are not numbers (e.g. {examples}). Give a column of plain numbers: units belong in the "
                           "header, a missing value is an empty cell")


def _check_labels(merged: pd.DataFrame, id_cols: tuple[str, ...]) -> None:
    """Refuse an id column of free text with a value of its own for every candidate (a sample label).

    Its one-hot code says nothing about how two candidates relate, so a surrogate cannot learn from it, and on a
    Matérn pool it adds one input dimension per candidate.
    """
    from orchestrator.space.features import column_kind

    if len(merged) <= _MIN_LABEL_CANDIDATES:
        return
    for name in id_cols:
        if merged[name].nunique(dropna=False) == len(merged) and column_kind(merged[name]) == "categorical":
            rest = [c for c in id_cols if c != name]
            raise BenchError("--id-cols", f"column {name!r} gives every candidate a value of its own (a label, not a "
                                          "description): no surrogate can learn from it. List the columns that "
                                          "describe a candidate (numbers, SMILES, formulas, categories that rows "
                                          "share)" + (f", e.g. --id-cols {','.join(rest)}" if rest else "")
                                          + "; a label column can stay in the CSV")


def _merge(frame: pd.DataFrame, config: BenchConfig, source: str,
           lines: list[int]) -> tuple[pd.DataFrame, int, int]:
    """One row per distinct id: numeric columns averaged (the PV-Lab protocol for replicates).

    Returns the merged table, the rows left out (no finite lab value, no value in a numeric id column, a condition
    not recorded, or a value that does not parse in a SMILES or formula id column) and the replicate groups
    averaged.
    """
    from orchestrator.space.features import column_kind, unparsed_rows

    keys = list(config.id_cols)
    frame = frame.copy()
    numeric_keys = [key for key in keys if pd.api.types.is_numeric_dtype(frame[key])]
    for key in keys:  # an empty text id means the component is absent: a category of its own
        if key not in numeric_keys and frame[key].isna().any():
            frame[key] = frame[key].astype(object).where(frame[key].notna(), NO_COMPONENT)
    for objective_column in config.objective_columns:
        frame[objective_column] = pd.to_numeric(frame[objective_column], errors="coerce")
    for rung in config.rungs:  # a rung cell with text is a value nobody computed: empty, as the rung reads it
        text = text_cells(frame[rung.column])
        if len(text):
            log.warning("%s: rung column %r holds text, read as empty, on line(s) %s", source, rung.column,
                        line_ranges([lines[frame.index.get_loc(k)] for k in text.index]))
        frame[rung.column] = pd.to_numeric(frame[rung.column], errors="coerce")
    keep = np.ones(len(frame), dtype=bool)
    for what, ok in [*((f"a finite lab value in {column!r}", np.isfinite(frame[column].to_numpy(dtype=float)))
                       for column in config.objective_columns),
                     *((f"a value in the numeric id column {key!r}", frame[key].notna().to_numpy())
                       for key in numeric_keys),
                     *((f"a valid {kind} in {key!r}", ~unparsed_rows(frame[key], kind))
                       for key in keys if key not in numeric_keys
                       for kind in [column_kind(frame[key])] if kind in ("smiles", "formula"))]:
        left_out = [line for line, row_ok, kept in zip(lines, ok, keep, strict=True) if kept and not row_ok]
        if left_out:
            log.warning("%s: left out %d row(s) without %s: lines %s", source, len(left_out), what,
                        line_ranges(left_out))
        keep &= ok
    frame = canonical_ids(frame[keep], keys)
    numeric = [c for c in frame.columns if c not in keys and pd.api.types.is_numeric_dtype(frame[c])]
    grouped = frame.groupby(keys, sort=False, dropna=False)
    merged = grouped[numeric].mean() if numeric else grouped.size().to_frame("_n")
    sizes = grouped.size()
    n_averaged = int((sizes > 1).sum())
    if n_averaged:
        log.warning("%s: averaged %d replicate group(s) (%d rows) into one candidate each, the PV-Lab protocol "
                    "(rows with the same id values; SMILES compared as molecules)",
                    source, n_averaged, int(sizes[sizes > 1].sum()))
    keys_frame = merged.index.to_frame(index=False)  # not reset_index: one insert per id column fragments a wide table
    return pd.concat([keys_frame, merged.reset_index(drop=True)], axis=1), int((~keep).sum()), n_averaged


def canonical_ids(frame: pd.DataFrame, id_cols: list[str]) -> pd.DataFrame:
    """A copy of ``frame`` in which two spellings of one molecule or one composition group as one candidate (as a
    campaign's pool merges them): SMILES id columns hold RDKit's canonical SMILES; in formula id columns each
    spelling becomes the first one written of the same composition (pymatgen's element order; amounts are not
    reduced, so 'Fe4O6' stays apart from 'Fe2O3').

    Example:
        >>> canonical_ids(pd.DataFrame({"s": ["OCC", "CCO", "C1=CC=CC=C1"], "y": [1, 2, 3]}), ["s"])["s"].tolist()
        ['CCO', 'CCO', 'c1ccccc1']
        >>> frame = pd.DataFrame({"f": ["Fe2O3", "NaCl", "O3Fe2", "Fe4O6", "ClNa"]})
        >>> canonical_ids(frame, ["f"])["f"].tolist()
        ['Fe2O3', 'NaCl', 'Fe2O3', 'Fe4O6', 'NaCl']
    """
    from orchestrator.space.features import column_kind

    frame = frame.copy()
    for key in id_cols:
        if pd.api.types.is_numeric_dtype(frame[key]):
            continue
        kind = column_kind(frame[key])
        if kind == "smiles":
            frame[key] = frame[key].map({v: _canonical_smiles(v) for v in pd.unique(frame[key])})
        elif kind == "formula":
            first: dict[object, object] = {}
            spelling = {v: first.setdefault(_composition_key(v), v) for v in pd.unique(frame[key])}
            frame[key] = frame[key].map(spelling)
    return frame


def _composition_key(value: object) -> object:
    """pymatgen's formula of a cell (element order fixed, amounts as written); a value that does not parse as it is."""
    from vocabulary.domain import InvalidCandidate, Material

    if not isinstance(value, str) or value == NO_COMPONENT:
        return value
    try:
        return Material.parse(value).formula
    except InvalidCandidate:
        return value


def _canonical_smiles(value: object) -> object:
    """RDKit's canonical SMILES of a cell; an absent component or a value that does not parse as it is."""
    from vocabulary.domain import InvalidCandidate, Molecule

    if not isinstance(value, str) or value == NO_COMPONENT:
        return value
    try:
        return Molecule.parse(value).smiles
    except InvalidCandidate:
        return value


def pool_reference_point(objectives, values: pd.DataFrame) -> list[float]:
    """The benchmark's hypervolume reference point in objective units, one per objective: BoTorch's rule
    (``vocabulary.pareto.infer_reference_point``: the nadir minus 10 % of the range, in utility form) over every
    candidate of the pool. Every arm plans with it and the true hypervolume is taken from it.

    Args:
        objectives: the objectives (mappings or specs with ``direction`` and ``target``), in order.
        values: one column per objective (objective units), one row per candidate.
    """
    from types import SimpleNamespace

    from vocabulary.pareto import (
        infer_reference_point,
        reference_in_units,
        utility_matrix,
    )

    specs = [o if not isinstance(o, dict) else SimpleNamespace(direction=o["direction"], target=o.get("target"))
             for o in objectives]
    Y = utility_matrix(specs, np.asarray(values, dtype=float))
    Y = Y[np.isfinite(Y).all(axis=1)]
    return [float(v) for v in reference_in_units(specs, infer_reference_point(Y))]


def pool_spec(config: BenchConfig, workdir: Path) -> tuple[CampaignSpec, int, int, int]:
    """The campaign spec of a ``--pool`` benchmark, with its merged pool written into ``workdir``.

    Returns the spec, the CSV's row count, how many rows had no finite lab value and how many replicate groups
    were averaged.
    """
    frame = _read(config)
    _check_columns(frame, config)
    lines = csv_line_numbers(Path(config.pool), len(frame))
    merged, n_dropped, n_averaged = _merge(frame, config, f"--pool {Path(config.pool).name}", lines)
    if len(merged) < 2:
        raise BenchError("--pool", f"only {len(merged)} candidate(s) have a lab value; a benchmark needs at least 2")
    _check_labels(merged, config.id_cols)
    if config.lab_budget > len(merged):
        raise BenchError("--lab-budget", f"{config.lab_budget} exceeds the {len(merged)} distinct candidates; lower it")
    workdir.mkdir(parents=True, exist_ok=True)
    merged.to_csv(workdir / "pool.csv", index=False)
    objectives = []
    for text in config.objective_list:
        direction, column, target, tolerance = parse_objective(text)
        objectives.append({"property": column, "direction": direction,
                           **({"target": target, "tolerance": tolerance} if direction == "target" else {}),
                           **({"column": column} if config.is_multi_objective else {})})
    multi: dict = {}
    if config.is_multi_objective:  # one reference point, stated: every arm's and the true hypervolume's
        multi = {"tradeoff": {"method": "pareto",
                              "reference_point": pool_reference_point(objectives, merged[config.objective_columns])}}
    failures = {} if config.failure_policy is None else {"failure_policy": config.failure_policy}
    if config.fail_at_or_below is not None:
        failures["fails_at_or_below"] = config.fail_at_or_below
    ladder = [{"name": r.name, "simulator": "table", "column": r.column, "property": r.column, "proxy": r.column,
               "cost_s": r.cost_s} for r in config.rungs]
    spec = validate_spec({
        "campaign": {"name": f"bench-{Path(config.pool).stem}", "kind": "conditions", "seed": config.first_seed},
        "objective": objectives if config.is_multi_objective else objectives[0],
        **multi,
        "space": {"pool": str((workdir / "pool.csv").resolve()), "columns": list(config.id_cols),
                  "features": "columns"},
        "ladder": ladder,
        "screening": {"executor": "serial"},
        "lab": {"driver": "simlab", "oracle_column": config.objective_column, "noise_sd": 0.0, "wait": "all",
                "max_pending": config.batch, **failures},
        "budget": {"lab_experiments": config.lab_budget},
        "planner": {"main": "bo", "control": None, "control_share": 0.0, "batch_size": config.batch,
                    "n_initial": config.batch, "kernel": "auto", "proposals_per_slot": 1},
    }, source="closedloop bench --pool")
    return spec, len(frame), n_dropped, n_averaged


def objective_truth(spec: CampaignSpec, pool: Pool) -> np.ndarray | None:
    """Several objectives: the simulated lab's truth per pool row and objective (``column``; the first objective may
    use ``lab.oracle_column``), shape (n_candidates, n_objectives); None for one objective."""
    if len(getattr(spec, "objective_list", ())) < 2:  # one objective (or a spec from before several existed)
        return None
    columns = []
    for k, objective in enumerate(spec.objective_list):
        name = objective.column or (spec.lab.oracle_column if k == 0 else None)
        column = pool.columns.get(name) if name else None
        if column is None:
            raise BenchError("--spec", f"objective {objective.property!r} needs a numeric pool column with its truth "
                                       "(objective.column) for the bench to score hypervolume")
        columns.append(np.asarray(column, dtype=float))
    return np.column_stack(columns)


def _truth(spec: CampaignSpec, pool: Pool) -> np.ndarray:
    """The simulated lab's ground truth per pool row (objective unit)."""
    if spec.lab.oracle_column:
        column = pool.columns.get(spec.lab.oracle_column)
        if column is None:
            raise BenchError("--spec", f"lab.oracle_column {spec.lab.oracle_column!r} is not a numeric pool column")
        return np.asarray(column, dtype=float)
    if "_oracle" in pool.columns:
        return np.asarray(pool.columns["_oracle"], dtype=float)
    raise BenchError("--spec", "the bench scores arms against the lab's ground truth; give the spec a "
                               "lab.oracle_column (or an inline lab.oracle)")


def load_problem(config: BenchConfig, workdir: Path) -> BenchProblem:
    """The benchmark's spec, pool and truth; raise ``BenchError`` naming the flag for any bad input.

    Example:
        >>> import pandas as pd, tempfile, os
        >>> from pathlib import Path
        >>> path = os.path.join(tempfile.mkdtemp(), "pool.csv")
        >>> pd.DataFrame({"x": [0.0, 0.5, 0.5, 1.0], "y": [1.0, 2.0, 4.0, 0.0]}).to_csv(path, index=False)
        >>> problem = load_problem(BenchConfig(pool=path, id_cols=("x",), objective="maximize:y", lab_budget=2,
        ...                                    seeds=1, arms=("random",), batch=1), Path(tempfile.mkdtemp()))
        >>> len(problem), sorted(problem.values.tolist())
        (3, [0.0, 1.0, 3.0])
    """
    if config.spec is not None:
        spec = load_spec(config.spec)
        if spec.space.generate:
            raise BenchError("--spec", "an open space has no fixed pool to score against; bench a fixed pool")
        n_rows, n_dropped, n_averaged = 0, 0, 0
    else:
        spec, n_rows, n_dropped, n_averaged = pool_spec(config, workdir)
    pool = load_pool(spec)
    values = _truth(spec, pool)
    if not np.isfinite(values).any():
        raise BenchError("--spec", "the lab's ground truth has no value for any candidate")
    budget = config.lab_budget or spec.budget.lab_experiments
    if budget > len(pool):
        raise BenchError("--lab-budget", f"{budget} exceeds the {len(pool)} candidates; lower it")
    objective_values = objective_truth(spec, pool)
    if objective_values is not None and spec.tradeoff.reference_point is None:
        spec = spec.model_copy(update={"tradeoff": spec.tradeoff.model_copy(update={
            "reference_point": pool_reference_point(spec.objective_list, objective_values)})})
    return BenchProblem(config=config, spec=spec, pool=pool, values=values, n_rows=n_rows or len(pool),
                        n_dropped=n_dropped, n_averaged=n_averaged, objective_values=objective_values)
