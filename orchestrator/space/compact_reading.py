"""Reading a large conditions pool file into a ``CompactPool``, ``chunk_rows`` rows at a time: each distinct cell
value is validated and featurised once, every row is judged (the same bad rows with the same messages as
``pool.load_pool``), and duplicates are merged by canonical id from the rows' 64-bit digests.

Example:
    >>> import tempfile, pathlib
    >>> from orchestrator.spec import CampaignSpec
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "pool.csv").write_text("T,solvent,y\\n20,water,1\\n80,dmso,2\\n20,water,1\\n")
    >>> spec = CampaignSpec.model_validate({"campaign": {"name": "c", "kind": "conditions"},
    ...     "objective": {"property": "y", "direction": "maximize"}, "budget": {"lab_experiments": 1}, "space": {"pool": str(folder / "pool.csv"), "columns": ["T", "solvent"],
    ...     "stream": True}, "lab": {"oracle_column": "y"}})
    >>> pool = load_compact_pool(spec, {"y": True})
    >>> len(pool), pool.candidates[1].values, pool.features[[0, 1]].tolist()
    (2, {'T': 80.0, 'solvent': 'dmso'}, [[0.0, 0.0, 1.0], [1.0, 1.0, 0.0]])
    >>> pool.index[pool.ids[1]], pool.column("y")[pool.ids[0]]
    (1, 1.0)
"""

from __future__ import annotations

import hashlib
import json
import logging
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from orchestrator.space.checks import (
    RowProblem,
    check_csv_shape,
    csv_header,
    csv_line_numbers,
    empty_value_problem,
    enforce_policy,
    missing_column_hint,
    numeric_column,
    numeric_value_problems,
    written_cells_at,
)
from orchestrator.space.compact import CHUNK_ROWS, CompactPool
from orchestrator.space.csv_limits import check_csv_limits
from vocabulary.domain import ConditionSpace, Parameter, SetupError

__all__ = ["load_compact_pool"]

log = logging.getLogger(__name__)


class _BecameText(Exception):
    def __init__(self, column: str):
        self.column = column


def _read_chunks(path: Path, usecols: list[str], text: set[str], chunk_rows: int, nrows: int | None = None):
    dtype = {name: str for name in text}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", pd.errors.ParserWarning)
        try:
            yield from pd.read_csv(path, usecols=usecols, chunksize=chunk_rows, encoding="utf-8-sig",
                                   index_col=False, dtype=dtype, nrows=nrows)
        except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
            reason = " ".join(str(exc).split())
            raise SetupError(f"design-space pool {path} is not a readable UTF-8 CSV ({reason}); fix the file") from None
    if any(issubclass(w.category, pd.errors.ParserWarning) for w in caught):
        check_csv_shape(path, "design-space pool", columns=usecols, has_wide_rows=True)


def _read(path: Path, wanted: list[str], value_columns: dict[str, bool], text: set[str], chunk_rows: int) -> dict:
    """One streamed pass: codes of the text columns, floats of the numeric ones, the value columns and their bad
    rows. Raises ``_BecameText`` when a column read as numbers meets text (it is then re-read as text)."""
    vocab: dict[str, dict[str, int]] = {name: {} for name in wanted if name in text}
    data: dict[str, list[np.ndarray]] = {name: [] for name in [*wanted, *value_columns]}
    found: dict[str, dict[int, RowProblem]] = {name: {} for name in value_columns}
    empty: dict[str, list[int]] = {name: [] for name in value_columns}
    start = 0
    for chunk in _read_chunks(path, [*dict.fromkeys([*wanted, *value_columns])], text, chunk_rows):
        for name in wanted:
            series = chunk[name]
            if name in vocab:
                local, uniques = pd.factorize(series)
                lookup = np.asarray([vocab[name].setdefault(str(u), len(vocab[name])) for u in uniques] + [-1],
                                    dtype=np.int32)
                data[name].append(lookup[local])  # -1 (an empty cell) picks the trailing -1
            else:
                if numeric_column(series) is None:
                    raise _BecameText(name)
                data[name].append(_as_float_array(series))
        for name, is_required in value_columns.items():
            if name in wanted:
                continue
            series = chunk[name]
            if series.dtype == float:
                values = series.to_numpy(dtype=float)
                is_empty = np.isnan(values)
                for offset in np.flatnonzero(np.isinf(values)):
                    found[name][start + int(offset)] = RowProblem(f"{name}={values[offset]} is not finite")
            else:
                frame = chunk.reset_index(drop=True)
                converted, problems = numeric_value_problems(frame, name, is_required=False)
                values = converted.to_numpy(dtype=float)
                is_empty = np.isnan(values)
                for offset, problem in problems.items():
                    is_empty[offset] = False
                    found[name][start + offset] = problem
            if is_required:
                empty[name].extend((start + np.flatnonzero(is_empty)).tolist())
            data[name].append(values)
        start += len(chunk)
    problems: dict[int, RowProblem] = {}
    for name in value_columns:  # the first column's problem is a row's, as the in-memory pool reports it
        written = written_cells_at(path, name, empty[name]) if empty[name] else {}
        for row in empty[name]:
            found[name][row] = empty_value_problem(name, written.get(row))
        for row in sorted(found[name]):
            problems.setdefault(row, found[name][row])
    return {"vocab": vocab, "data": {k: np.concatenate(v) if v else np.zeros(0) for k, v in data.items()},
            "value_problems": problems, "n_rows": start}


def _as_float_array(series: pd.Series) -> np.ndarray:
    from orchestrator.space.checks import as_floats

    return as_floats(series).to_numpy(dtype=float)


def _text_columns(path: Path, wanted: list[str], chunk_rows: int) -> set[str]:
    """The columns the first chunk shows are not numbers (read as text from the start, as pandas reads a whole
    file's mixed column: each cell as written)."""
    first = next(_read_chunks(path, wanted, set(), chunk_rows, nrows=chunk_rows), None)
    if first is None:
        return set()
    return {name for name in wanted if numeric_column(first[name]) is None}


def _space(wanted: list[str], read: dict) -> tuple[ConditionSpace, list[np.ndarray]]:
    """The space as ``pool._space_from_frame`` derives it, and each column's per-row codes (into the sorted
    choices) or floats."""
    parameters, per_row = [], []
    for name in wanted:
        column = read["data"][name]
        if name in read["vocab"]:
            names = list(read["vocab"][name])
            choices = tuple(sorted(names)) or ("none",)
            position = {choice: k for k, choice in enumerate(choices)}
            remap = np.asarray([position[v] for v in names] + [-1], dtype=np.int32)
            per_row.append(remap[column])
            parameters.append(Parameter(name=name, kind="categorical", choices=choices))
        else:
            finite = column[np.isfinite(column)]
            low, high = (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 0.0)
            per_row.append(column)
            parameters.append(Parameter(name=name, kind="continuous", low=low, high=high))
    return ConditionSpace(parameters=tuple(parameters)), per_row


def _parse_problems(space: ConditionSpace, per_row: list[np.ndarray]) -> dict[int, RowProblem]:
    """What ``space.parse`` says of each bad row: empty cells first, then the first value out of range."""
    n = len(per_row[0]) if per_row else 0
    empty = np.zeros((n, len(per_row)), dtype=bool)
    for j, (parameter, column) in enumerate(zip(space.parameters, per_row, strict=True)):
        empty[:, j] = column < 0 if parameter.kind == "categorical" else np.isnan(column)
    problems: dict[int, RowProblem] = {}
    names = [p.name for p in space.parameters]
    for row in np.flatnonzero(empty.any(axis=1)).tolist():
        fields = ", ".join(name for name, is_empty in zip(names, empty[row], strict=True) if is_empty)
        problems[row] = RowProblem(f"{fields} is empty (write none for an absent component)")
    for parameter, column in zip(space.parameters, per_row, strict=True):
        if parameter.kind == "categorical":
            continue
        for row in np.flatnonzero(np.isinf(column)).tolist():
            if row not in problems:
                problems[row] = RowProblem(f"{parameter.name}={float(column[row])!r} is outside its range "
                                           f"{parameter._range()}; move it inside")
    return problems


def _digests(space: ConditionSpace, per_row: list[np.ndarray], rows: np.ndarray) -> np.ndarray:
    """The 64-bit digest each row's ``Conditions`` id spells (``ConditionSpace.parse``: sha256 of the sorted-key
    JSON of the checked values, first 16 hex digits), computed from per-value JSON fragments."""
    order = sorted(range(len(space.parameters)), key=lambda j: space.parameters[j].name)
    out = np.empty(len(rows), dtype=np.uint64)
    for start in range(0, len(rows), CHUNK_ROWS):
        part = rows[start:start + CHUNK_ROWS]
        fragments = []
        for j in order:
            parameter, key = space.parameters[j], json.dumps(space.parameters[j].name) + ": "
            if parameter.kind == "categorical":
                table = np.asarray([key + json.dumps(c) for c in parameter.choices], dtype=object)
                fragments.append(table[per_row[j][part]])
            else:
                fragments.append([key + repr(x) for x in per_row[j][part].tolist()])
        texts = ("{" + ", ".join(pieces) + "}" for pieces in zip(*fragments))
        out[start:start + len(part)] = np.fromiter(
            (int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "big") for t in texts), dtype=np.uint64,
            count=len(part))
    return out


def _describe(space: ConditionSpace, per_row: list[np.ndarray], row: int) -> str:
    parts = []
    for parameter, column in zip(space.parameters, per_row, strict=True):
        value = parameter.choices[int(column[row])] if parameter.kind == "categorical" else float(column[row])
        parts.append(f"{parameter.name}={value}")
    return "; ".join(parts)


def _conflicts(space, per_row, good: np.ndarray, digests: np.ndarray, values: dict[str, np.ndarray],
               label) -> dict[int, RowProblem]:
    """Rows repeating an earlier row's candidate with different values (``pool_checks.conflicting_replicates``)."""
    if not values or not len(good):
        return {}
    _, first, inverse = np.unique(digests, return_index=True, return_inverse=True)
    reference = good[first[inverse]]
    problems: dict[int, RowProblem] = {}
    for name, column in values.items():
        a, b = column[reference], column[good]
        differs = ~((a == b) | (np.isnan(a) & np.isnan(b)))
        for k in np.flatnonzero(differs).tolist():
            row = int(good[k])
            if row not in problems:
                problems[row] = RowProblem(
                    f"{_describe(space, per_row, row)!r} repeats {label(int(reference[k]))} with {name}={b[k]:g} "
                    f"against {a[k]:g}", is_conflict=True)
    return problems


def _feature_blocks(space: ConditionSpace, parameters: list[np.ndarray], mode: str,
                    n: int) -> list[tuple[np.ndarray | None, np.ndarray]]:
    """Per-column blocks equal to ``ConditionSpace.features`` ("parameters") or ``featurise_columns`` ("columns")
    of every candidate, each distinct value encoded once."""
    blocks: list[tuple[np.ndarray | None, np.ndarray]] = []
    for parameter, data in zip(space.parameters, parameters, strict=True):
        if mode == "parameters":
            if parameter.kind == "categorical":
                blocks.append((data, np.eye(len(parameter.choices))))
            else:
                span = (parameter.high - parameter.low) or 1.0
                blocks.append((None, ((data - parameter.low) / span)[:, None]))
            continue
        from orchestrator.space.features import _encode, column_kind

        if parameter.kind == "categorical":
            distinct, first = np.unique(data, return_index=True)
            in_order = distinct[np.argsort(first, kind="stable")]  # first appearance, as pd.unique and factorize
            rank = np.full(len(parameter.choices), -1, dtype=np.int32)
            rank[in_order] = np.arange(len(in_order), dtype=np.int32)
            series = pd.Series([parameter.choices[int(c)] for c in in_order], dtype=object)
            codes, table = rank[data], _encode(series, column_kind(series)).astype(float)
        else:
            codes, table = None, data[:, None].astype(float)
        low, high = table.min(axis=0), table.max(axis=0)
        keep = high > low
        if keep.any():
            blocks.append((codes, (table[:, keep] - low[keep]) / (high - low)[keep]))
    if not blocks:
        blocks.append((np.zeros(n, dtype=np.int8), np.zeros((1, 1))))
    return blocks


def load_compact_pool(spec, value_columns: dict[str, bool], *, chunk_rows: int = CHUNK_ROWS) -> CompactPool:
    """Read, check and merge a conditions pool file into a ``CompactPool``, ``chunk_rows`` rows at a time.

    Args:
        spec: the campaign spec (``[space]`` pool, columns, features, on_bad_rows, replicates).
        value_columns: the measurement columns (``pool._value_columns``), each with whether every row needs one.

    Raises:
        SetupError: as ``pool.load_pool`` does, for an unreadable file, missing columns, or bad rows under
            ``on_bad_rows = "refuse"`` (every row is judged before the campaign starts).
    """
    path = spec.resolve(spec.space.pool)
    if not path.is_file():
        raise SetupError(f"design-space pool {path} does not exist; fix 'space.pool' (paths are relative to the spec file)")
    check_csv_limits(path, f"design-space pool {path}")
    wanted = list(spec.space.columns or [])
    header = csv_header(path)
    if not header:
        raise SetupError(f"design-space pool {path} is empty (no header, no rows); give a CSV with a header row and "
                         "data rows")
    check_csv_shape(path, "design-space pool", columns=[*wanted, *value_columns], has_wide_rows=False)
    missing = [c for c in [*wanted, spec.lab.oracle_column] if c is not None and c not in header]
    if missing:
        # quote a CSV's header, never another file's first line
        from vocabulary.header_text import columns_text, shown_names

        raise SetupError(f"pool {path.name} has no column(s) {missing}; {columns_text(path, header)}; fix the spec's "
                         "space.column(s) or lab.oracle_column"
                         f"{missing_column_hint(missing, shown_names(path, header))}")
    present = {c: required for c, required in value_columns.items() if c in header}
    text = _text_columns(path, wanted, chunk_rows)
    while True:
        try:
            read = _read(path, wanted, present, text, chunk_rows)
            break
        except _BecameText as exc:
            text.add(exc.column)
    n_rows = read["n_rows"]
    if not n_rows:
        raise SetupError(f"design-space pool {path} has a header but no rows; add data rows below the header")
    space, per_row = _space(wanted, read)
    problems = _parse_problems(space, per_row)
    for row, problem in read["value_problems"].items():
        problems.setdefault(row, problem)
    lines: list[int] = []

    def label(position: int) -> str:
        if not lines:
            lines.extend(csv_line_numbers(path, n_rows))
        return f"line {lines[position]}"

    is_bad = np.zeros(n_rows, dtype=bool)
    is_bad[list(problems)] = True
    good = np.flatnonzero(~is_bad)
    digests = _digests(space, per_row, good)
    values = {name: read["data"][name] for name in present}
    if spec.space.replicates == "must_agree":
        problems.update(_conflicts(space, per_row, good, digests, values, label))
    source = f"pool {path.name}"
    skipped = enforce_policy(source, problems, label, spec.space.on_bad_rows)
    keep = np.ones(len(good), dtype=bool)
    keep[np.isin(good, np.fromiter(problems, dtype=np.int64, count=len(problems)))] = False
    good, digests = good[keep], digests[keep]
    if not len(good):
        raise SetupError(f"{source}: no row is left once the bad rows are left out; fix the rows the warning lists")
    _, first, inverse = np.unique(digests, return_index=True, return_inverse=True)
    by_appearance = np.argsort(first, kind="stable")
    rank = np.empty(len(first), dtype=np.int64)
    rank[by_appearance] = np.arange(len(first))
    group = rank[inverse]  # each kept row's candidate, numbered by first appearance
    first_rows = good[first[by_appearance]]
    sizes = np.bincount(group)
    if (sizes > 1).any():
        log.info("%s: merged %d rows into %d candidates (replicates and spellings of one candidate)", source,
                 int(sizes[sizes > 1].sum()), int((sizes > 1).sum()))
    parameters = [column[first_rows] for column in per_row]
    columns: dict[str, np.ndarray] = {}
    for parameter, column in zip(space.parameters, parameters, strict=True):
        if parameter.kind != "categorical":
            columns[parameter.name] = column
    for name, column in values.items():
        kept = column[good]
        present_mask = ~np.isnan(kept)
        with np.errstate(invalid="ignore", over="ignore"):
            sums = np.bincount(group, weights=np.where(present_mask, kept, 0.0), minlength=len(first))
            counts = np.bincount(group, weights=present_mask.astype(float), minlength=len(first))
            columns[name] = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
        if spec.space.replicates == "average":
            low = np.full(len(first), np.inf)
            high = np.full(len(first), -np.inf)
            np.minimum.at(low, group, np.where(present_mask, kept, np.inf))
            np.maximum.at(high, group, np.where(present_mask, kept, -np.inf))
            differ = (sizes > 1) & (low < high)
            if differ.any():
                log.warning("%s: averaged %d candidate(s) whose %d replicate rows differ in %s ([space] replicates = "
                            "\"average\")", source, int(differ.sum()), int(sizes[differ].sum()), list(values))
    from orchestrator.space.features import feature_mode

    blocks = _feature_blocks(space, parameters, feature_mode(spec.space.features, space), len(first_rows))
    return CompactPool(space, parameters, digests[first[by_appearance]], columns, blocks, skipped, n_rows)
