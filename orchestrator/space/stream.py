"""A design space too large to hold in memory: stream the CSV in chunks and keep only the best k candidates.

``orchestrator.space.pool.Pool`` parses and featurises the whole space at once, which is what the live loop uses. At
10^6 molecules that is about 8 GB of 1024-bit fingerprints (float64) before the candidate objects themselves. Here
the file is read ``chunk_size`` rows at a time (pandas ``chunksize``); each chunk is parsed and featurised with the
domain code (``parse_candidate``, ``featurise``), scored by a function of the feature matrix (for example log
expected improvement of a fitted GP,
``orchestrator.policy.planners.acquisition_stream.log_ei_scorer``), and merged into a heap of the k best. Memory is
O(chunk_size + k) rows, never O(pool).

The ranking equals the in-memory one: rows describing the same candidate (same id) count once, at their first row;
ties in score go to the earlier row. A row whose candidate is empty or does not parse is a bad row, judged by the
same ``on_bad_rows`` policy as ``[space] on_bad_rows``: ``"refuse"`` (the default) raises one ``SetupError`` naming
the first bad lines and the count; ``"skip"`` leaves them out and lists every one in ``TopK.skipped_rows``. Never
silently. The file's reading faults (not UTF-8, a header naming a column twice, a row with more fields than the
header) are refused whatever the policy.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "space.csv"
    >>> _ = path.write_text("temperature_c,solvent\\n20,water\\n80,water\\n50,dmso\\n80,water\\n")
    >>> space = condition_space_from_csv(path, ["temperature_c", "solvent"])
    >>> hottest = lambda X: X[:, 0]  # the min-max encoded temperature, in [0, 1]
    >>> top = stream_top_k(path, "conditions", hottest, k=2, columns=["temperature_c", "solvent"], space=space,
    ...                    chunk_size=2)
    >>> [(c.row, c.score, c.candidate.values["temperature_c"]) for c in top.best], top.n_rows, top.n_duplicates
    ([(1, 1.0, 80.0), (2, 0.5, 50.0)], 4, 1)
    >>> _ = path.write_text("temperature_c,solvent\\n20,water\\n,dmso\\n")
    >>> stream_top_k(path, "conditions", hottest, k=2, columns=["temperature_c", "solvent"], space=space)
    Traceback (most recent call last):
    ...
    vocabulary.domain.SetupError: pool space.csv has 1 bad row(s): line 3: temperature_c is empty (write none for \
an absent component). Either fix or remove them, or set [space] on_bad_rows = "skip" to leave them out (each is \
reported)
"""

from __future__ import annotations

import csv
import heapq
import math
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from orchestrator.space.checks import (
    OnBadRows,
    RowProblem,
    check_csv_shape,
    csv_header,
    empty_fields,
    enforce_policy,
    iter_csv_records,
    missing_column_hint,
    missing_markers_as_missing,
    numeric_column,
    wide_row_problem,
)
from orchestrator.space.csv_limits import check_csv_limits
from vocabulary.domain import (
    Candidate,
    CandidateKind,
    ConditionSpace,
    InvalidCandidate,
    Parameter,
    SetupError,
    featurise,
    parse_candidate,
)

__all__ = ["ScoredCandidate", "TopK", "condition_space_from_csv", "count_rows", "stream_top_k"]

Scorer = Callable[[np.ndarray], np.ndarray]
"""Maps a feature matrix of shape (n_rows, n_features) to scores of shape (n_rows,); higher is better."""


@dataclass(frozen=True)
class ScoredCandidate:
    """One of the best candidates: its score, the 0-based data row it first appeared on, and the candidate."""

    score: float
    row: int
    candidate: Candidate


@dataclass
class TopK:
    """The k best candidates of a streamed pool, best first, with what the stream saw.

    ``n_rows`` counts data rows (header excluded); ``n_invalid`` rows were bad (an empty or unparseable candidate),
    each listed in ``skipped_rows`` as "line 7: what is wrong" (``on_bad_rows="skip"``; a refused pool raises);
    ``n_excluded`` rows were candidates in ``exclude_ids``; ``n_duplicates`` rows repeated a candidate already seen
    in the top k or in their own chunk; ``peak_chunk_rows`` is the largest chunk held at once.
    """

    best: list[ScoredCandidate]
    n_rows: int = 0
    n_invalid: int = 0
    n_excluded: int = 0
    n_duplicates: int = 0
    n_chunks: int = 0
    peak_chunk_rows: int = 0
    skipped_rows: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------------- reading
def _check_file(path: str | Path) -> Path:
    """The pool's path, once it is known to exist and to hold no cell or row over its size limit (``csv_limits``:
    pandas would hold the whole row at once, however large)."""
    path = Path(path)
    if not path.is_file():
        raise SetupError(f"design-space pool {path} does not exist; give the path of a CSV file with a header row")
    check_csv_limits(path, f"pool {path.name}")
    return path


def _unreadable(path: Path, exc: Exception) -> SetupError:
    reason = " ".join(str(exc).split())
    return SetupError(f"pool {path.name} is not a readable UTF-8 CSV ({reason}); fix the file")


def _header(path: Path, columns: list[str] | None = None) -> list[str]:
    try:
        header = csv_header(path)
        check_csv_shape(path, "pool", columns=columns or [], has_wide_rows=False)
    except (UnicodeDecodeError, csv.Error) as exc:
        raise _unreadable(path, exc) from None
    if not header:
        raise SetupError(f"pool {path.name} is empty; it needs a header row naming its columns")
    return header


def _wanted(path: Path, kind: CandidateKind, column: str | None, columns: list[str] | None) -> list[str]:
    if kind == "conditions":
        if not columns:
            raise SetupError("a conditions pool needs columns=[...], the parameter columns of the CSV")
        wanted = list(columns)
    else:
        if not column:
            raise SetupError(f"a {kind} pool needs column=, the CSV column holding the SMILES or formulas")
        wanted = [column]
    header = _header(path, wanted)
    missing = [name for name in wanted if name not in header]
    if missing:
        # quote a CSV's header, never another file's first line
        from vocabulary.header_text import columns_text, shown_names

        raise SetupError(f"pool {path.name} has no column(s) {missing}; {columns_text(path, header)}"
                         f"{missing_column_hint(missing, shown_names(path, header))}")
    return wanted


def _chunks(path: Path, kind: CandidateKind, wanted: list[str], chunk_size: int, *,
            as_text: bool = False) -> Iterator[Any]:
    """The wanted columns, ``chunk_size`` rows at a time. A SMILES or formula cell is text as written (``NaN`` is
    sodium nitride), as ``read_csv_table`` reads it; only an empty cell is missing. ``as_text`` reads a conditions
    column as text as written too, with pandas's missing-value markers still missing."""
    import pandas as pd

    if chunk_size < 1:
        raise SetupError(f"{chunk_size=} must be at least 1 row")
    text = ({"dtype": str} if as_text else {}) if kind == "conditions" else {"dtype": str, "keep_default_na": False,
                                                                              "na_values": [""]}
    # Only the wanted columns are parsed, so a wide CSV costs no more memory than a narrow one.
    try:
        for chunk in pd.read_csv(path, usecols=wanted, chunksize=chunk_size, encoding="utf-8-sig", index_col=False,
                                 **text):
            if kind == "conditions":  # as ``read_csv_table`` reads them: a missing-value marker is missing
                for name in chunk.columns:
                    chunk[name] = missing_markers_as_missing(chunk[name])
            yield chunk
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise _unreadable(path, exc) from None


def _row_lines(path: Path) -> Iterator[int]:
    """The file line of each data row, in step with the chunks; a row with more fields than the header is refused
    (pandas reads only the named columns, so it would pass unnoticed)."""
    n_columns = len(_header(path))
    try:
        for line, record in iter_csv_records(path):
            problem = wide_row_problem(record, n_columns)
            if problem:
                raise SetupError(f"pool {path.name} line {line} {problem}")
            yield line
    except (UnicodeDecodeError, csv.Error) as exc:
        raise _unreadable(path, exc) from None


def count_rows(path: str | Path) -> int:
    """Number of data rows (the header excluded) of a CSV, read as a stream in O(1) memory.

    Quoted fields may hold newlines; they count as one row, as pandas reads them. Lines of whitespace only are not
    rows, as pandas skips them.

    Raises:
        SetupError: if the file does not exist, has no header or is not UTF-8 CSV.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "pool.csv"
        >>> _ = path.write_text('smiles,name\\nCCO,"ethanol,\\nan alcohol"\\nc1ccccc1,benzene\\n')
        >>> count_rows(path)
        2
    """
    path = _check_file(path)
    _header(path)
    try:
        return sum(1 for _ in iter_csv_records(path))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise _unreadable(path, exc) from None


def condition_space_from_csv(path: str | Path, columns: list[str], *, chunk_size: int = 100_000) -> ConditionSpace:
    """The conditions space a pool spans, found in one streamed pass, as ``Pool`` derives it from the whole frame.

    A column whose non-empty values are all numbers becomes a continuous parameter bounded by its finite min and max
    (in the column's own unit; an infinite value is a bad row, not a bound); any other column becomes categorical,
    with its distinct values (as text, sorted) as the choices. Memory is O(chunk_size + distinct categorical values).

    Raises:
        SetupError: for a missing or unreadable file, a missing column, or a column with no value at all.
    """
    path = _check_file(path)
    return _condition_space(path, _wanted(path, "conditions", None, columns), chunk_size)


def _condition_space(path: Path, wanted: list[str], chunk_size: int = 100_000) -> ConditionSpace:
    """``condition_space_from_csv`` of a file already checked (``_check_file``, ``_wanted``).

    pandas infers a type for each chunk, where the in-memory pool's frame has one for the whole column: a column
    whose chunks read as different kinds (numbers, booleans, text; ``1e-400`` in one, ``:`` in the next) is text as
    written in the whole frame (``1e-400``, not ``0.0``), so it is read again as text."""
    low = {name: math.inf for name in wanted}
    high = {name: -math.inf for name in wanted}
    choices: dict[str, set[str]] = {name: set() for name in wanted}
    is_numeric = dict.fromkeys(wanted, True)
    kinds: dict[str, set[str]] = {name: set() for name in wanted}
    _span(_chunks(path, "conditions", wanted, chunk_size), wanted, low, high, choices, is_numeric, kinds)
    mixed = [name for name in wanted if len(kinds[name]) > 1]
    if mixed:
        for name in mixed:
            low[name], high[name], choices[name], is_numeric[name] = math.inf, -math.inf, set(), True
        _span(_chunks(path, "conditions", mixed, chunk_size, as_text=True), mixed, low, high, choices, is_numeric, {})
    parameters = []
    for name in wanted:
        if not choices[name]:
            raise SetupError(f"column {name!r} of pool {path.name} is empty; fill it in or leave it out of columns")
        if is_numeric[name]:
            bounds = (low[name], high[name]) if low[name] <= high[name] else (0.0, 0.0)
            parameters.append(Parameter(name=name, kind="continuous", low=bounds[0], high=bounds[1]))
        else:
            parameters.append(Parameter(name=name, kind="categorical", choices=tuple(sorted(choices[name]))))
    return ConditionSpace(parameters=tuple(parameters))


def _span(chunks: Iterator[Any], wanted: list[str], low: dict[str, float], high: dict[str, float],
          choices: dict[str, set[str]], is_numeric: dict[str, bool], kinds: dict[str, set[str]]) -> None:
    """Widen each wanted column's bounds and choices by every chunk, and note the kinds pandas read its chunks as."""
    import pandas as pd

    for chunk in chunks:
        for name in wanted:
            series = chunk[name].dropna()
            if series.empty:
                continue
            if name in kinds:
                kinds[name].add("bool" if pd.api.types.is_bool_dtype(series) else
                                "number" if pd.api.types.is_numeric_dtype(series) else "text")
            choices[name].update(series.astype(str).unique().tolist())
            numbers = numeric_column(series) if is_numeric[name] else None
            if numbers is None:
                is_numeric[name] = False
                continue
            finite = numbers[np.isfinite(numbers.to_numpy())]
            if len(finite):
                low[name], high[name] = min(low[name], float(finite.min())), max(high[name], float(finite.max()))


# ---------------------------------------------------------------------------------------------------- scoring
def _features(kind: CandidateKind, candidates: list[Candidate], space: ConditionSpace | None) -> np.ndarray:
    if kind == "molecule":
        # Molecule.features memoises up to 65,536 fingerprints (8 KB each, about 0.5 GB). A stream meets each
        # molecule once, so the cache would only hold memory; compute the same bits without it.
        from vocabulary.domain import _morgan_bits

        return np.vstack([_morgan_bits.__wrapped__(c.smiles, 1024) for c in candidates])
    return featurise(candidates, space)


# ---------------------------------------------------------------------------------------------------- streaming
def stream_top_k(
    path: str | Path,
    kind: CandidateKind,
    scorer: Scorer,
    k: int,
    *,
    column: str | None = None,
    columns: list[str] | None = None,
    space: ConditionSpace | None = None,
    chunk_size: int = 4096,
    exclude_ids: Collection[str] = (),
    on_bad_rows: OnBadRows = "refuse",
) -> TopK:
    """The ``k`` highest-scoring distinct candidates of a CSV pool, read ``chunk_size`` rows at a time.

    Each chunk is parsed (``parse_candidate``), featurised (``featurise``; Morgan bits for molecules) and scored;
    only candidates that can still enter the top k are kept. Memory is O(chunk_size × n_features + k); a
    molecule chunk of 4096 rows holds 32 MB of fingerprints.

    Args:
        path: the CSV file, with a header row.
        kind: ``"molecule"``, ``"material"`` or ``"conditions"``.
        scorer: feature matrix (n_rows, n_features) → scores (n_rows,); higher is better. ``-inf`` is allowed,
            NaN is an error.
        k: how many candidates to keep (fewer if the pool has fewer distinct valid ones).
        column: the SMILES or formula column (molecules, materials).
        columns: the parameter columns (conditions).
        space: the conditions space; by default one streamed pass finds it (``condition_space_from_csv``).
        chunk_size: rows per chunk; it changes memory and speed, never the answer.
        exclude_ids: candidate ids to skip (those already tested or pending).
        on_bad_rows: what a row whose candidate is empty or does not parse does, as ``[space] on_bad_rows``:
            ``"refuse"`` raises once the whole file is read, naming the first bad lines and the count (no row is
            scored after the first bad one); ``"skip"`` leaves them out and lists each in ``TopK.skipped_rows``.

    Returns:
        The best candidates, best first (ties to the earlier row), with the counts of what the stream saw.

    Raises:
        SetupError: for a missing, empty or unreadable file, a missing or repeated column, a row with more fields
            than the header, ``k`` or ``chunk_size`` below 1, a scorer returning the wrong shape or NaN, a bad row
            under ``"refuse"``, or a pool in which no row parses.
    """
    path = _check_file(path)
    if k < 1:
        raise SetupError(f"{k=} must be at least 1 candidate")
    wanted = _wanted(path, kind, column, columns)
    if kind == "conditions" and space is None:
        space = _condition_space(path, wanted)
    exclude = set(exclude_ids)
    result = TopK(best=[])
    # A min-heap of (score, -row, id): its root is the weakest of the k kept, the first to be pushed out.
    heap: list[tuple[float, int, str]] = []
    kept: dict[str, ScoredCandidate] = {}
    problems: dict[int, RowProblem] = {}
    labels: dict[int, str] = {}
    lines = _row_lines(path)
    start = 0
    for chunk in _chunks(path, kind, wanted, chunk_size):
        n = len(chunk)
        result.n_chunks += 1
        result.peak_chunk_rows = max(result.peak_chunk_rows, n)
        raw = chunk[wanted].to_dict("records") if kind == "conditions" else chunk[wanted[0]].tolist()
        rows, candidates, seen = [], [], set()
        for offset, item in enumerate(raw):
            line = next(lines, None)
            try:
                empty = empty_fields(item, wanted[0])
                if empty:
                    hint = " (write none for an absent component)" if kind == "conditions" else ""
                    raise InvalidCandidate(f"{', '.join(empty)} is empty{hint}")
                candidate = parse_candidate(kind, item, space)
            except InvalidCandidate as exc:
                problems[start + offset] = RowProblem(str(exc).split("; ")[0])
                labels[start + offset] = f"line {line}" if line is not None else f"data row {start + offset + 1}"
                continue
            if candidate.id in exclude:
                result.n_excluded += 1
            elif candidate.id in kept or candidate.id in seen:
                # A repeat scores as its first row did and ranks after it; if that row fell out, so would this.
                result.n_duplicates += 1
            else:
                seen.add(candidate.id)
                rows.append(start + offset)
                candidates.append(candidate)
        start += n
        if not candidates or (problems and on_bad_rows == "refuse"):
            continue  # a pool that will be refused is read to the end for the count, but no longer scored
        _keep_best(heap, kept, k, rows, candidates, _scores(scorer, _features(kind, candidates, space)))
    result.n_rows = start
    if not result.n_rows:
        raise SetupError(f"pool {path.name} has a header but no rows; add data rows below the header")
    result.n_invalid = len(problems)
    result.skipped_rows = enforce_policy(f"pool {path.name}", problems, labels.__getitem__, on_bad_rows)
    if not kept and result.n_invalid == result.n_rows:
        raise SetupError(f"no row of pool {path.name} parsed as a {kind}; first problem: {result.skipped_rows[0]}")
    result.best = sorted(kept.values(), key=lambda c: (-c.score, c.row))
    return result


def _scores(scorer: Scorer, features: np.ndarray) -> np.ndarray:
    scores = np.asarray(scorer(features), dtype=float)
    if scores.shape != (len(features),):
        raise SetupError(f"the scorer returned shape {scores.shape} for {len(features)} rows; return one score a row")
    if np.isnan(scores).any():
        raise SetupError("the scorer returned NaN; return a number (or -inf) for every row")
    return scores


def _keep_best(heap: list[tuple[float, int, str]], kept: dict[str, ScoredCandidate], k: int, rows: list[int],
               candidates: list[Candidate], scores: np.ndarray) -> None:
    """Merge one chunk's scored candidates into the heap of the k best (and ``kept``, the same k by id)."""
    order = np.lexsort((np.asarray(rows), -scores))[:k]  # best first, ties to the earlier row
    for index in order.tolist():
        key = (float(scores[index]), -rows[index], candidates[index].id)
        if len(heap) < k:
            heapq.heappush(heap, key)
        elif key[:2] > heap[0][:2]:
            dropped = heapq.heappushpop(heap, key)
            del kept[dropped[2]]
        else:
            break  # the rest of this chunk's order ranks lower still
        kept[key[2]] = ScoredCandidate(key[0], rows[index], candidates[index])
