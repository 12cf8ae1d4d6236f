"""A finite design space: a CSV pool or an inline list, parsed into canonical candidates.

Every row is judged before it becomes a candidate (``pool_checks``): a candidate that does not parse, a lab value
that is empty, text or infinite, or replicates that disagree make a bad row, which ``[space] on_bad_rows`` refuses
(the default) or skips with a report. Rows that describe the same candidate (replicates, or SMILES spellings of one
InChIKey) are merged and their numeric columns averaged: equal values under ``[space] replicates = "must_agree"``
(the default), any values under ``"average"``, which says so in a warning.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from orchestrator.space.checks import (
    RowProblem,
    conflicting_replicates,
    csv_line_numbers,
    empty_fields,
    enforce_policy,
    missing_column_hint,
    numeric_column,
    numeric_value_problems,
    read_csv_table,
    written_cells_at,
)
from orchestrator.spec import CampaignSpec
from vocabulary.domain import (
    Candidate,
    Conditions,
    ConditionSpace,
    InvalidCandidate,
    Parameter,
    SetupError,
    featurise,
    parse_candidate,
)

__all__ = ["Pool", "describe", "load_pool"]

log = logging.getLogger(__name__)


def describe(candidate: Candidate) -> str:
    """A short human-readable label: SMILES, formula (without pymatgen's amounts of one), or ``name=value`` pairs.

    Example:
        >>> from vocabulary.domain import Material
        >>> describe(Material.parse("Rb2VCuS4")), describe(Material.parse("Fe10O15")), describe(Material.parse("LiO0.5"))
        ('Rb2VCuS4', 'Fe10O15', 'LiO0.5')
    """
    if isinstance(candidate, Conditions):
        return "; ".join(f"{k}={v}" for k, v in candidate.values.items())
    smiles = getattr(candidate, "smiles", None)
    return smiles or re.sub(r"(?<=[A-Za-z])1(?![0-9.])", "", candidate.formula)


@dataclass
class Pool:
    """Parsed candidates with their per-candidate numeric columns (means over merged rows)."""

    kind: str
    candidates: list[Candidate]
    columns: dict[str, np.ndarray] = field(default_factory=dict)
    space: ConditionSpace | None = None
    skipped_rows: list[str] = field(default_factory=list)
    """Rows left out under ``[space] on_bad_rows = "skip"``, each as "line 7: what is wrong"."""
    seed_size: int | None = None
    """Open spaces: how many candidates the seed library had (the rest were generated); None for a fixed pool."""
    feature_kinds: np.ndarray | None = None
    """Per feature, the kind of column it encodes (``features.featurise_columns``); None when the pool is not
    featurised by column (molecules, materials, parameter encodings)."""

    def __post_init__(self) -> None:
        self.ids = [c.id for c in self.candidates]
        self.index = {cid: i for i, cid in enumerate(self.ids)}

    def __len__(self) -> int:
        return len(self.candidates)

    def get(self, candidate_id: str) -> Candidate:
        return self.candidates[self.index[candidate_id]]

    def column(self, name: str) -> dict[str, float]:
        """A numeric column as ``{candidate id: value}``, NaN rows dropped."""
        if name not in self.columns:
            raise SetupError(f"column {name!r} is not a numeric column of the pool; numeric columns: {sorted(self.columns)}")
        values = self.columns[name]
        return {cid: float(v) for cid, v in zip(self.ids, values, strict=True) if not np.isnan(v)}

    @cached_property
    def features(self) -> np.ndarray:
        """Feature matrix, shape (n_candidates, n_features): fingerprints, composition or parameter encodings."""
        return featurise(self.candidates, self.space)

    def copy(self) -> Pool:
        """An independent pool with the same candidates (what an open space grows from)."""
        return Pool(self.kind, list(self.candidates), {k: v.copy() for k, v in self.columns.items()}, self.space,
                    list(self.skipped_rows), self.seed_size or len(self.candidates), self.feature_kinds)

    def truncate(self, n: int) -> None:
        """Keep only the first ``n`` candidates (undo an open space's unrecorded growth); never below the seeds.

        Example:
            >>> from vocabulary.domain import Molecule
            >>> pool = Pool("molecule", [Molecule.parse("CCO")], seed_size=1)
            >>> _ = pool.extend([Molecule.parse("CCN")]); pool.truncate(1); pool.ids == [Molecule.parse("CCO").id]
            True
        """
        n = max(int(n), self.seed_size or 0)
        if n >= len(self.candidates):
            return
        for cid in self.ids[n:]:
            del self.index[cid]
        del self.candidates[n:], self.ids[n:]
        self.columns = {name: values[:n] for name, values in self.columns.items()}
        if "features" in self.__dict__:
            self.__dict__["features"] = self.__dict__["features"][:n]

    def extend(self, candidates: list[Candidate]) -> list[Candidate]:
        """Append candidates not yet in the pool (generator mode); returns those added. Their columns are NaN.

        Example:
            >>> from vocabulary.domain import Molecule
            >>> pool = Pool("molecule", [Molecule.parse("CCO")])
            >>> [c.smiles for c in pool.extend([Molecule.parse("OCC"), Molecule.parse("CCN")])], len(pool)
            (['CCN'], 2)
        """
        added: list[Candidate] = []
        for candidate in candidates:
            if candidate.id not in self.index and candidate.id not in {c.id for c in added}:
                added.append(candidate)
        if not added:
            return []
        start = len(self.candidates)
        self.candidates.extend(added)
        for k, candidate in enumerate(added):
            self.ids.append(candidate.id)
            self.index[candidate.id] = start + k
        self.columns = {name: np.concatenate([values, np.full(len(added), np.nan)]) for name, values in self.columns.items()}
        if "features" in self.__dict__:
            self.__dict__["features"] = np.vstack([self.__dict__["features"], featurise(added, self.space)])
        return added


def _space_from_frame(frame: pd.DataFrame, columns: list[str]) -> ConditionSpace:
    parameters = []
    for name in columns:
        numbers = numeric_column(frame[name])
        if numbers is not None:
            finite = numbers[np.isfinite(numbers.to_numpy())]  # an infinite value is a bad row, not a bound
            low, high = (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 0.0)
            parameters.append(Parameter(name=name, kind="continuous", low=low, high=high))
        else:
            choices = tuple(sorted(frame[name].dropna().astype(str).unique())) or ("none",)
            parameters.append(Parameter(name=name, kind="categorical", choices=choices))
    return ConditionSpace(parameters=tuple(parameters))


def _parse_rows(kind: str, raw_items: list[Any], space: ConditionSpace | None,
                column: str) -> tuple[list[Candidate | None], dict[int, RowProblem]]:
    """Each row's candidate (None when it does not parse) and what is wrong with the rows that do not."""
    parsed: list[Candidate | None] = []
    problems: dict[int, RowProblem] = {}
    for position, raw in enumerate(raw_items):
        empty = empty_fields(raw, column)
        try:
            if empty:
                hint = " (write none for an absent component)" if isinstance(raw, dict) else ""
                raise InvalidCandidate(f"{', '.join(empty)} is empty{hint}")
            parsed.append(parse_candidate(kind, raw, space))
        except InvalidCandidate as exc:
            parsed.append(None)
            problems[position] = RowProblem(str(exc).split("; ")[0])
    return parsed, problems


def _unparsed_values(frame: pd.DataFrame, columns: list[str]) -> dict[int, RowProblem]:
    """Rows whose value in a column read as SMILES or formulas (``features = "columns"``) does not parse."""
    from orchestrator.space.features import column_kind, unparsed_rows

    problems: dict[int, RowProblem] = {}
    for column in columns:
        kind = column_kind(frame[column])
        for position in np.flatnonzero(unparsed_rows(frame[column], kind)):
            value = frame[column].iloc[position]
            problems.setdefault(int(position), RowProblem(
                f"{column}={value!r} is not a valid {'SMILES' if kind == 'smiles' else 'formula'} (the column holds "
                f"them){mixed_kinds_hint(str(value), kind)}"))
    return problems


def mixed_kinds_hint(value: str, kind: str) -> str:
    """The fix for a value of a formula (SMILES) column that does not parse as one: a value that is the other kind
    (a SMILES among formulas) means the column mixes them, which ``features = "parameters"`` reads as names.

    Example:
        >>> mixed_kinds_hint("C1CCC2=NCCCN2CC1", "formula")
        '; it is a SMILES, so the column mixes formulas and SMILES: set [space] features = "parameters" to read each value as a name (one-hot), or fix it'
    """
    from orchestrator.space.features import _is_formula, _is_smiles

    other, is_other = ("SMILES", _is_smiles) if kind == "formula" else ("formula", _is_formula)
    fix = 'set [space] features = "parameters" to read each value as a name (one-hot)'
    if is_other(value):
        return f"; it is a {other}, so the column mixes formulas and SMILES: {fix}, or fix it"
    return f"; fix it, or {fix}"


def _reads_columns(spec: CampaignSpec, space: ConditionSpace) -> bool:
    """Whether a conditions pool is featurised by what each column holds (``features.feature_mode``)."""
    from orchestrator.space.features import feature_mode

    return feature_mode(spec.space.features, space) == "columns"


def _value_columns(spec: CampaignSpec) -> dict[str, bool]:
    """The pool columns the campaign reads as measurements, each with whether every row needs a value."""
    columns = {r.column: False for r in spec.ladder if r.simulator == "table" and r.column}
    if spec.lab.oracle_column:
        columns[spec.lab.oracle_column] = True  # the simulated lab's answer: a row without one cannot be measured
    for column in truth_columns(spec).values():
        columns[column] = True  # every other measured property's truth, likewise
    return columns


def truth_columns(spec: CampaignSpec) -> dict[str, str]:
    """Measured property -> the pool column holding its truth for the simulated lab, beyond ``lab.oracle_column``:
    each objective's and each outcome constraint's ``column``."""
    named = [*spec.objective_list, *spec.constraints]
    return {m.property: m.column for m in named if m.column and m.column != spec.lab.oracle_column}


def _validated(spec: CampaignSpec, source: str, raw_items: list[Any], frame: pd.DataFrame,
               space: ConditionSpace | None, label, value_columns: dict[str, bool] | None = None,
               path: Path | None = None) -> Pool:
    """Judge every row (``pool_checks``), apply ``[space] on_bad_rows`` and ``replicates``, and merge the rest.

    ``value_columns`` (default ``_value_columns(spec)``) are the measurement columns, each with whether every row
    needs a value. ``path`` is the pool file the frame was read from, where a required value pandas read as missing
    (``NaN``, ``NA``) is looked up as written.
    """
    kind = spec.campaign.kind
    parsed, problems = _parse_rows(kind, raw_items, space, spec.space.column or "candidate")
    frame = frame.reset_index(drop=True)
    if kind == "conditions" and space is not None and _reads_columns(spec, space):
        for position, problem in _unparsed_values(frame, list(spec.space.columns or [])).items():
            problems.setdefault(position, problem)
    wanted = _value_columns(spec) if value_columns is None else value_columns
    required = {c: is_required for c, is_required in wanted.items() if c in frame.columns}
    value_columns = list(required)
    for column in value_columns:
        written = None if path is None else (lambda rows, column=column: written_cells_at(path, column, rows))
        frame[column], column_problems = numeric_value_problems(frame, column, is_required=required[column],
                                                                written=written)
        for position, problem in column_problems.items():
            problems.setdefault(position, problem)
    ids = [c.id if c is not None and k not in problems else None for k, c in enumerate(parsed)]
    if spec.space.replicates == "must_agree":
        names = [repr(describe(c)) if c is not None else "" for c in parsed]
        problems.update(conflicting_replicates(ids, names, frame, value_columns, label))
    skipped = enforce_policy(source, problems, label, spec.space.on_bad_rows)
    keep = [k for k, c in enumerate(parsed) if c is not None and k not in problems]
    if not keep:
        raise SetupError(f"{source}: no row is left once the bad rows are left out; fix the rows the warning lists")
    pool = _build(kind, parsed, keep, frame, space, value_columns, source, spec.space.replicates)
    pool.skipped_rows = skipped
    return pool


def _build(kind: str, parsed: list[Candidate | None], keep: list[int], frame: pd.DataFrame, space,
           value_columns: list[str], source: str, replicates: str) -> Pool:
    frame = frame.iloc[keep].copy()
    frame["_id"] = [parsed[i].id for i in keep]
    numeric = frame.select_dtypes(include="number")
    numeric.insert(0, "_id", frame["_id"])
    grouped = numeric.groupby("_id", sort=False)
    means = _group_means(numeric, grouped)
    sizes = grouped.size()
    if (sizes > 1).any():
        log.info("%s: merged %d rows into %d candidates (replicates and spellings of one candidate)", source,
                 int(sizes[sizes > 1].sum()), int((sizes > 1).sum()))
    if replicates == "average" and value_columns:
        differ = grouped[value_columns].nunique(dropna=False).gt(1).any(axis=1)
        if differ.any():
            log.warning("%s: averaged %d candidate(s) whose %d replicate rows differ in %s ([space] replicates = "
                        "\"average\")", source, int(differ.sum()), int(sizes[differ].sum()), value_columns)
    first: dict[str, Candidate] = {}
    for i in keep:
        first.setdefault(parsed[i].id, parsed[i])
    candidates = [first[cid] for cid in means.index]
    columns = {name: means[name].to_numpy(dtype=float) for name in means.columns}
    return Pool(kind, candidates, columns, space)


def _group_means(numeric: pd.DataFrame, grouped) -> pd.DataFrame:
    """Per-candidate means of the numeric columns; replicates near the float limit do not overflow to infinity."""
    with np.errstate(over="ignore"):  # an overflowing sum is caught below
        means = grouped.mean()
    low, high = grouped.min(), grouped.max()
    overflowed = np.isinf(means) & np.isfinite(low) & np.isfinite(high)
    if overflowed.to_numpy().any():  # average them scaled into [-1, 1]
        scale = np.maximum(low.abs(), high.abs()).replace(0.0, 1.0)
        scaled = numeric[means.columns] / scale.loc[numeric["_id"]].to_numpy()
        means = means.mask(overflowed, scaled.groupby(numeric["_id"], sort=False).mean() * scale)
    return means


_CACHE: dict[tuple, Pool] = {}


def load_pool(spec: CampaignSpec) -> Pool:
    """Load, check and parse the spec's design space (cached per file, modification time and reading options).

    Every row is judged first (``pool_checks``); ``[space] on_bad_rows`` refuses or skips the bad ones. A large
    conditions pool (``[space] stream``) comes back as a ``pool_compact.CompactPool``, which answers as a ``Pool``.
    """
    kind = spec.campaign.kind
    if spec.space.inline is not None:
        return _load_inline(spec)
    path = spec.resolve(spec.space.pool)
    if not path.is_file():
        raise SetupError(f"design-space pool {path} does not exist; fix 'space.pool' (paths are relative to the spec file)")
    key = (str(path), path.stat().st_mtime_ns, path.stat().st_size, kind, spec.space.model_dump_json(),
           tuple(_value_columns(spec).items()))
    if key in _CACHE:
        return _CACHE[key]
    from orchestrator.space.compact import should_stream
    from orchestrator.space.compact_reading import load_compact_pool

    if should_stream(spec):
        _CACHE.clear()  # a streamed pool is large: keep one
        _CACHE[key] = load_compact_pool(spec, _value_columns(spec))
        return _CACHE[key]
    wanted = spec.space.columns if kind == "conditions" else [spec.space.column]
    frame = read_csv_table(path, "design-space pool", columns=[*wanted, *_value_columns(spec)],
                           text_columns=[] if kind == "conditions" else wanted)
    missing = [c for c in [*wanted, spec.lab.oracle_column, *truth_columns(spec).values()]
               if c is not None and c not in frame.columns]
    if missing:
        # quote a CSV's header, never another file's first line
        from vocabulary.header_text import columns_text, shown_names

        raise SetupError(f"pool {Path(path).name} has no column(s) {missing}; {columns_text(path, frame.columns)}; "
                         "fix the spec's space.column(s) or lab.oracle_column"
                         f"{missing_column_hint(missing, shown_names(path, frame.columns))}")
    if kind == "conditions":
        space = _space_from_frame(frame, wanted)
        raw_items = frame[wanted].to_dict("records")
    else:
        space, raw_items = None, frame[spec.space.column].tolist()
    lines = []

    def label(position: int) -> str:
        if not lines:
            lines.extend(csv_line_numbers(path, len(frame)))
        return f"line {lines[position]}"

    pool = _validated(spec, f"pool {path.name}", raw_items, frame, space, label, path=path)
    if kind == "conditions" and _reads_columns(spec, space):
        from orchestrator.space.features import featurise_columns

        values = pd.DataFrame([c.values for c in pool.candidates])
        pool.features, pool.feature_kinds = featurise_columns(values, list(wanted))  # overrides the cached property
    _CACHE[key] = pool
    return pool


_TRUTH = "lab.oracle"
"""The inline ground truth's column while an inline space is judged (messages name it); ``_oracle`` after."""


def _load_inline(spec: CampaignSpec) -> Pool:
    """An inline space, judged as a pool file is: with an inline ground truth (``lab.oracle``), an item without a
    value in it is a bad row, as a pool row without its ``oracle_column`` value is.

    Inline conditions carry their ground truth in each table, under the key ``lab.oracle_column`` names (table rungs'
    ``column`` keys likewise): those keys are measurements, not parameters (docs/spec.md#space)."""
    kind = spec.campaign.kind
    space = None
    items = list(spec.space.inline)
    if kind == "conditions":
        not_mappings = [k + 1 for k, item in enumerate(items) if not isinstance(item, dict)]
        if not_mappings:
            raise SetupError(f"space.inline item(s) {not_mappings} are not tables of parameter values; a conditions "
                             "space lists tables such as {temperature_c = 60, solvent = \"water\"}")
        frame = pd.DataFrame(items)
        frame.columns = [str(name) for name in frame.columns]
        parameters = [name for name in frame.columns if name not in _value_columns(spec)]
        space = _space_from_frame(frame, parameters)
        raw_items = frame[parameters].to_dict("records")
    else:
        frame = pd.DataFrame({"_raw": pd.Series(items, dtype=object)})
        raw_items = items
    if spec.lab.oracle_column and spec.lab.oracle_column not in frame.columns:
        where = ("no space.inline table has that key; give each table its measured value under it, e.g. "
                 f"{{temperature_c = 60, {spec.lab.oracle_column} = 71.0}}" if kind == "conditions" else
                 "inline molecules and materials take their ground truth in lab.oracle, e.g. [lab.oracle] CCO = 1.0")
        raise SetupError(f"lab.oracle_column {spec.lab.oracle_column!r} names no value of the inline space: {where} "
                         "(docs/spec.md#space-inline)")
    value_columns = None
    if spec.lab.oracle is not None:
        truth = _inline_truth(spec, space)
        frame[_TRUTH] = [truth.get(_candidate_id(kind, raw, space), np.nan) for raw in raw_items]
        value_columns = {**_value_columns(spec), _TRUTH: True}
    pool = _validated(spec, "space.inline", raw_items, frame, space, lambda position: f"inline item {position + 1}",
                      value_columns)
    if _TRUTH in pool.columns:
        pool.columns["_oracle"] = pool.columns.pop(_TRUTH)
    return pool


def _candidate_id(kind: str, raw: Any, space: ConditionSpace | None) -> str | None:
    try:
        return parse_candidate(kind, raw, space).id
    except InvalidCandidate:
        return None  # the item is a bad row, which _validated reports


def _inline_truth(spec: CampaignSpec, space: ConditionSpace | None) -> dict[str, float]:
    """``lab.oracle`` by candidate id; a key that is not a candidate, or two spellings of one candidate with
    different values, is refused."""
    truth: dict[str, float] = {}
    spelled: dict[str, str] = {}
    for raw, value in spec.lab.oracle.items():
        if spec.campaign.kind == "conditions":
            raise SetupError(f"lab.oracle key {raw!r}: inline conditions carry their ground truth in each table, not "
                             "in lab.oracle; give each space.inline table a value key (e.g. yield_pct = 71.0) and "
                             "set lab.oracle_column = \"yield_pct\" (docs/spec.md#space-inline)")
        try:
            candidate_id = parse_candidate(spec.campaign.kind, raw, space).id
        except InvalidCandidate as exc:
            raise SetupError(f"lab.oracle key {raw!r}: {str(exc).split('; ')[0]}; fix the key or remove it") from None
        if candidate_id in truth and truth[candidate_id] != value:
            raise SetupError(f"lab.oracle gives {spelled[candidate_id]!r} = {truth[candidate_id]:g} and {raw!r} = "
                             f"{value:g}, two spellings of one candidate; keep one of them")
        truth[candidate_id], spelled[candidate_id] = value, raw
    return truth
