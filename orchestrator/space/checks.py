"""The validation boundary of a design-space pool: reading its CSV and judging each row before it becomes a candidate.

A row is bad when its candidate does not parse, when a value column the campaign reads holds something that is not
a finite number (the lab's ground truth, ``lab.oracle_column``; a table rung's column may be empty, never
infinite or text), or when it repeats a candidate with different values (unless ``[space] replicates = "average"``).
``[space] on_bad_rows`` decides what happens: ``"refuse"`` (the default) raises one ``SetupError`` naming the
first rows and the count; ``"skip"`` leaves them out and reports every one (a WARNING log, and the campaign's
``CampaignStarted`` event). Never silently.

Example:
    >>> problems = {3: RowProblem("SMILES 'C1CC' is not a valid molecule")}
    >>> enforce_policy("pool p.csv", problems, lambda i: f"line {i + 2}", "skip")
    ["line 5: SMILES 'C1CC' is not a valid molecule"]
"""

from __future__ import annotations

import csv
import logging
import math
import re
import warnings
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from orchestrator.space.csv_limits import bounded_records, check_csv_limits
from vocabulary.domain import SetupError

__all__ = [
    "N_SHOWN",
    "OnBadRows",
    "RowProblem",
    "as_float",
    "as_floats",
    "check_csv_limits",
    "check_csv_shape",
    "conflicting_replicates",
    "csv_header",
    "delimiter_hint",
    "csv_line_numbers",
    "empty_fields",
    "empty_value_problem",
    "enforce_policy",
    "iter_csv_line_numbers",
    "iter_csv_records",
    "line_ranges",
    "missing_markers_as_missing",
    "numeric_column",
    "numeric_value_problems",
    "read_csv_table",
    "require_rows",
    "wide_row_problem",
    "written_cells_at",
]

log = logging.getLogger(__name__)

OnBadRows = Literal["refuse", "skip"]
N_SHOWN = 5
"""Bad rows an error message names before it gives only the count of the rest."""


@dataclass(frozen=True)
class RowProblem:
    """What is wrong with one row; ``is_conflict`` marks a replicate whose values disagree with an earlier row."""

    text: str
    is_conflict: bool = False


def read_csv_table(path: Path, what: str, error: type[SetupError] = SetupError, *,
                   is_rows_required: bool = True, columns: Collection[str] | None = None,
                   text_columns: Collection[str] = ()) -> pd.DataFrame:
    """Read a CSV with a header and (unless ``is_rows_required`` is false) a data row, or raise ``error``.

    The message names the file and the fix. A caller that checks the columns first passes ``is_rows_required=False``
    and calls ``require_rows`` after. A header that names one of ``columns`` (the ones the caller reads; default
    all) twice, or a row with more fields than the header names, is refused: pandas would read the first as ``x``
    and ``x.1`` and silently shift every column of the second (reading its first field as an index). In
    ``text_columns`` (SMILES, formulas) a cell is text as written: pandas reads ``NaN``, ``NA`` or ``None`` as
    missing, but ``NaN`` is sodium nitride (only an empty cell is missing there), and ``1e5`` as 100000.0. A file
    with a cell or row over its size limit (``csv_limits``) is refused before pandas reads any of it.
    """
    check_csv_limits(path, f"{what} {path}", error)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", pd.errors.ParserWarning)
            frame = pd.read_csv(path, encoding="utf-8-sig", index_col=False)
        for warning in caught:
            if not issubclass(warning.category, pd.errors.ParserWarning):
                warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
        check_csv_shape(path, what, error, columns=columns, has_wide_rows=bool(caught))
        for column in frame.columns:
            if column not in text_columns:
                frame[column] = missing_markers_as_missing(frame[column])
        for column in text_columns:
            if column in frame.columns and (frame[column].isna().any()
                                            or not pd.api.types.is_string_dtype(frame[column])):
                _keep_text(frame, path, column)
    except pd.errors.EmptyDataError:
        raise error(f"{what} {path} is empty (no header, no rows); give a CSV with a header row and data rows") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError, csv.Error) as exc:
        reason = " ".join(str(exc).split())
        raise error(f"{what} {path} is not a readable UTF-8 CSV ({reason}); fix the file") from None
    if is_rows_required:
        require_rows(frame, path, what, error)
    return frame


def check_csv_shape(path: Path, what: str, error: type[SetupError] = SetupError, *,
                    columns: Collection[str] | None = None, has_wide_rows: bool = True) -> None:
    """Raise ``error`` when the header names one of ``columns`` (default: any) twice, or (``has_wide_rows``: pandas
    warned of it) a row has more non-empty fields than the header names. Empty trailing fields ("a,b,") are only
    trailing delimiters."""
    header = csv_header(path)
    read = set(header if columns is None else columns)
    repeated = sorted({name for name in header if name and name in read and header.count(name) > 1})
    if repeated:
        raise error(f"{what} {path} names column(s) {repeated} more than once in its header; give each column "
                    "one name")
    if has_wide_rows:
        for line, record in iter_csv_records(path):
            problem = wide_row_problem(record, len(header))
            if problem:
                raise error(f"{what} {path} line {line} {problem}")


def delimiter_hint(columns) -> str:
    """A hint for a header read as one column that holds another separator (``;`` or a tab), else ``""``.

    Example:
        >>> delimiter_hint(["smiles;y"]), delimiter_hint(["smiles", "y"])
        ("; the header reads as one column holding ';': save the file comma-separated", '')
    """
    columns = [str(c) for c in columns]
    for separator, name in ((";", "';'"), ("\t", "tabs")):
        if len(columns) == 1 and separator in columns[0]:
            return f"; the header reads as one column holding {name}: save the file comma-separated"
    return ""


def missing_column_hint(missing, columns) -> str:
    """A hint for columns a file lacks: the separator it seems to use (``delimiter_hint``), else the columns it has
    that are spelt like the missing ones (case, spaces, a typo), else ``""``.

    Example:
        >>> missing_column_hint(["yield"], ["smiles", "Yield (%)"]), missing_column_hint(["y"], ["smiles"])
        ("; did you mean 'Yield (%)' for 'yield'?", '')
    """
    import difflib

    columns = [str(c) for c in columns]
    hint = delimiter_hint(columns)
    if hint:
        return hint
    by_key = {_spelling_key(c): c for c in columns}
    guesses = []
    for name in missing:
        key = _spelling_key(str(name))
        close = [c for k, c in by_key.items() if key and k == key] or \
            [c for k, c in by_key.items() if min(len(k), len(key)) >= 3 and (k.startswith(key) or key.startswith(k))] or \
            difflib.get_close_matches(str(name), columns, n=1, cutoff=0.75)
        if close:
            guesses.append(f"{close[0]!r} for {str(name)!r}")
    return f"; did you mean {', '.join(guesses)}?" if guesses else ""


def _spelling_key(name: str) -> str:
    """A column name without case, spaces, punctuation or a unit in brackets: 'Yield (%)' and 'yield' meet."""
    return re.sub(r"[^0-9a-z]", "", re.sub(r"\s*[(\[].*?[)\]]\s*", "", name.lower()))


def csv_header(path: Path) -> list[str]:
    """The header row's names as written (empty for an empty file)."""
    return next(_records(path), (0, []))[1]


def wide_row_problem(record: list[str], n_columns: int) -> str | None:
    """What is wrong with a row that has non-empty fields beyond the header's ``n_columns`` names, or None."""
    if len(record) > n_columns and any(cell.strip() for cell in record[n_columns:]):
        return (f"has {len(record)} fields but the header names {n_columns} column(s); remove the extra field(s) or "
                "name them in the header")
    return None


_MISSING_MARKERS = frozenset({"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
                              "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"})
"""The cells pandas reads as missing by default (``pandas.read_csv``'s ``na_values``)."""


def missing_markers_as_missing(values: pd.Series) -> pd.Series:
    """A column with every missing-value marker (``NA``, ``nan``, ``None``, ...) missing.

    pandas leaves them as text in a column it first read as integers and then as text (an integer too long for 64
    bits beside a decimal or a word: ``nan,9999999999999999999999999,-2.5``), so whether ``nan`` is missing would
    depend on the rows around it, and on how many rows a reader reads at a time.

    Example:
        >>> missing_markers_as_missing(pd.Series(["nan", "9" * 25, "-2.5"], dtype=object)).tolist()
        [nan, '9999999999999999999999999', '-2.5']
    """
    if pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
        return values
    is_marker = values.map(lambda value: isinstance(value, str) and value in _MISSING_MARKERS).astype(bool)
    return values.where(~is_marker, np.nan) if is_marker.any() else values


def _keep_text(frame: pd.DataFrame, path: Path, column: str) -> None:
    """Replace ``column`` with its cells as written (an empty cell stays missing)."""
    position = list(frame.columns).index(column)
    written = pd.read_csv(path, usecols=[position], dtype=str, keep_default_na=False, encoding="utf-8-sig",
                          index_col=False).iloc[:, 0]
    if len(written) == len(frame):
        frame[column] = [None if text == "" else text for text in written.tolist()]


def require_rows(frame: pd.DataFrame, path: Path, what: str, error: type[SetupError] = SetupError) -> None:
    """Raise ``error`` when a CSV read has a header but no data rows."""
    if frame.empty:
        raise error(f"{what} {path} has a header but no rows; add data rows below the header")


def _records(path: Path) -> Iterator[tuple[int, list[str]]]:
    """Every record of a CSV that pandas reads (the header first), with the 1-based file line it starts on.

    A line of whitespace only is skipped, as pandas skips it; a line with a delimiter or a quoted empty field is a
    record. A record over the size limits raises ``csv_limits.OversizedRow`` (a ``csv.Error``) having read no more than
    the limit of it.
    """
    with open(path, newline="", encoding="utf-8-sig") as handle:
        for start, record in bounded_records(handle):
            if record and not (len(record) == 1 and record[0] != "" and not record[0].strip()):
                yield start, record


def iter_csv_records(path: Path) -> Iterator[tuple[int, list[str]]]:
    """Each data row of a CSV (``_records`` after the header) with its 1-based file line, read as a stream.

    Raises ``UnicodeDecodeError`` or ``csv.Error`` where the file is not UTF-8 CSV.
    """
    records = _records(path)
    next(records, None)
    yield from records


def iter_csv_line_numbers(path: Path) -> Iterator[int]:
    """The 1-based file line on which each data row starts (``iter_csv_records``); stops where the file cannot be
    read as UTF-8 CSV here."""
    try:
        for line, _record in iter_csv_records(path):
            yield line
    except (OSError, UnicodeDecodeError, csv.Error):
        return


def csv_line_numbers(path: Path, n_rows: int) -> list[int]:
    """The 1-based file line on which each data row starts (blank lines skipped, as pandas does).

    Falls back to ``row + 2`` (one line per row after the header) when the file reads differently here.
    """
    lines = list(iter_csv_line_numbers(path))
    return lines if len(lines) == n_rows else [k + 2 for k in range(n_rows)]


def as_float(value: Any) -> float:
    """One cell as a float: NaN when it is not a number, ±inf for an integer too large for a float.

    pandas keeps an integer beyond 64 bits as a Python int, and converting it raises ``OverflowError``; a decimal
    that large already reads as inf, so the integer does too.

    Example:
        >>> as_float("2.5"), as_float(10**400), as_float("-" + "9" * 400), as_float("high")
        (2.5, inf, -inf, nan)
    """
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
    try:
        return float(pd.to_numeric(value, errors="coerce"))
    except (OverflowError, TypeError, ValueError):
        text = str(value).strip()
        if text.lstrip("+-").isdigit():
            return -math.inf if text.startswith("-") else math.inf
        return math.nan


def as_floats(values: pd.Series) -> pd.Series:
    """A column as floats, NaN where a cell is not a number and ±inf for an integer too large for a float."""
    try:
        return pd.to_numeric(values, errors="coerce").astype(float)
    except (OverflowError, TypeError, ValueError):
        return pd.Series([as_float(v) for v in values.tolist()], index=values.index, dtype=float)


def numeric_column(values: pd.Series) -> pd.Series | None:
    """The non-empty cells of a column as floats when each is a number, else None.

    A column of numbers spans a continuous range, any other is categorical. An integer too long for 64 bits counts
    as a number (±inf, which no range holds), not as a category.
    """
    present = values.dropna()
    numbers = as_floats(present)
    if pd.api.types.is_numeric_dtype(present) or (len(numbers) and not numbers.isna().any()):
        return numbers
    return None


def empty_fields(raw: Any, column: str) -> list[str]:
    """The fields of a raw candidate that are empty: the names of a conditions row's empty cells, or ``[column]``
    for an empty SMILES or formula cell."""
    if isinstance(raw, dict):
        return [name for name, value in raw.items() if not isinstance(value, str) and pd.isna(value)]
    return [column] if raw is None or (isinstance(raw, float) and math.isnan(raw)) else []


def numeric_value_problems(frame: pd.DataFrame, column: str, *, is_required: bool,
                           written: Callable[[list[int]], dict[int, str]] | None = None,
                           ) -> tuple[pd.Series, dict[int, RowProblem]]:
    """A value column as floats, and the rows (by position) whose value is text, infinite, or empty when required.

    pandas reads ``NaN``, ``NA`` or ``null`` as a missing value; ``written`` (the cells as written at some
    positions, ``written_cells_at``) lets a required one be named as written ("y is 'NaN' (not a number)"), not
    reported as empty.

    Example:
        >>> values, problems = numeric_value_problems(pd.DataFrame({"y": ["1.5", "abc", "inf", None, None]}), "y",
        ...                                             is_required=True, written=lambda rows: {4: "NaN"})
        >>> values.tolist()[:1], {k: p.text for k, p in problems.items()}
        ([1.5], {1: "y='abc' is not a number", 2: 'y=inf is not finite', 3: 'y is empty', 4: "y is 'NaN' (not a number)"})
    """
    raw = frame[column]
    values = as_floats(raw)
    problems: dict[int, RowProblem] = {}
    empty: list[int] = []
    for position, (given, value) in enumerate(zip(raw.tolist(), values.tolist(), strict=True)):
        is_empty = given is None or (isinstance(given, float) and math.isnan(given)) or str(given).strip() == ""
        if is_empty:
            if is_required:
                empty.append(position)
        elif math.isnan(value):
            problems[position] = RowProblem(f"{column}={given!r} is not a number")
        elif not math.isfinite(value):
            shown = value if isinstance(given, float) else _abbreviated(given)
            problems[position] = RowProblem(f"{column}={shown} is not finite")
    as_written = written(empty) if written is not None and empty else {}
    for position in empty:
        problems[position] = empty_value_problem(column, as_written.get(position))
    return values, dict(sorted(problems.items()))


def empty_value_problem(column: str, written: str | None) -> RowProblem:
    """A required value that pandas read as missing: empty, or a missing-value marker named as written.

    Example:
        >>> empty_value_problem("expt", " "), empty_value_problem("expt", "NaN")
        (RowProblem(text='expt is empty', is_conflict=False), RowProblem(text="expt is 'NaN' (not a number)", is_conflict=False))
    """
    text = (written or "").strip()
    return RowProblem(f"{column} is {_abbreviated(text)!r} (not a number)" if text else f"{column} is empty")


def written_cells_at(path: Path, column: str, positions: Collection[int], chunk_rows: int = 100_000) -> dict[int, str]:
    """The cells of ``column`` as written (no missing-value marker read as NaN) at the data-row ``positions`` (as
    pandas numbers the rows), read ``chunk_rows`` rows at a time. A blank cell is left out, and so is every cell
    when the file cannot be read so."""
    wanted = set(positions)
    found: dict[int, str] = {}
    if not wanted:
        return found
    try:
        start = 0
        for chunk in pd.read_csv(path, usecols=[column], dtype=str, keep_default_na=False, encoding="utf-8-sig",
                                 index_col=False, chunksize=chunk_rows):
            for offset, text in enumerate(chunk[column].tolist()):
                if text.strip() and start + offset in wanted:
                    found[start + offset] = text
            start += len(chunk)
    except (OSError, ValueError, UnicodeDecodeError, pd.errors.ParserError):
        return {}
    return found


def _abbreviated(value: Any, limit: int = 24) -> str:
    """A cell as a message shows it: whole when short, else its start and its length."""
    try:
        text = str(value)
    except ValueError:  # an integer beyond Python's digit limit for str()
        return "an integer of thousands of digits"
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


def conflicting_replicates(ids: list[str | None], names: list[str], frame: pd.DataFrame, columns: list[str],
                           label: Callable[[int], str]) -> dict[int, RowProblem]:
    """Rows that repeat an earlier row's candidate with different values in ``columns`` (NaN equals NaN).

    ``ids[k]`` is row k's candidate id, None for a row already judged bad, and ``names[k]`` how a message shows it.
    The first row of a candidate is the reference; each later row that differs from it in any column is a conflict.
    """
    first: dict[str, int] = {}
    problems: dict[int, RowProblem] = {}
    table = frame[columns].to_numpy(dtype=float) if columns else np.zeros((len(ids), 0))
    for position, candidate_id in enumerate(ids):
        if candidate_id is None:
            continue
        if candidate_id not in first:
            first[candidate_id] = position
            continue
        reference = first[candidate_id]
        for j, column in enumerate(columns):
            a, b = table[reference, j], table[position, j]
            if not (a == b or (math.isnan(a) and math.isnan(b))):
                problems[position] = RowProblem(
                    f"{names[position]} repeats {label(reference)} with {column}={b:g} against {a:g}",
                    is_conflict=True)
                break
    return problems


def enforce_policy(source: str, problems: dict[int, RowProblem], label: Callable[[int], str],
                   on_bad_rows: OnBadRows) -> list[str]:
    """Refuse the pool (``SetupError``), or under ``"skip"`` log every bad row and return them as text.

    ``problems`` maps row positions to what is wrong; ``label`` turns a position into "line 7" or "inline item 3".
    """
    if not problems:
        return []
    rows = [f"{label(position)}: {problems[position].text}" for position in sorted(problems)]
    if on_bad_rows == "skip":
        log.warning("%s: left out %d bad row(s) ([space] on_bad_rows = \"skip\"): %s", source, len(rows),
                    "; ".join(rows))
        return rows
    shown = "; ".join(rows[:N_SHOWN]) + (f"; and {len(rows) - N_SHOWN} more" if len(rows) > N_SHOWN else "")
    fixes = "fix or remove them"
    if any(p.is_conflict for p in problems.values()):
        fixes += ", set [space] replicates = \"average\" if differing replicates should be averaged"
    raise SetupError(f"{source} has {len(rows)} bad row(s): {shown}. Either {fixes}, or set [space] on_bad_rows = "
                     "\"skip\" to leave them out (each is reported)")


def line_ranges(lines: list[int]) -> str:
    """Line numbers as compact ranges.

    Example:
        >>> line_ranges([3, 4, 5, 9, 11, 12])
        '3-5, 9, 11-12'
    """
    parts: list[str] = []
    for line in sorted(lines):
        if parts and line == int(parts[-1].split("-")[-1]) + 1:
            parts[-1] = f"{parts[-1].split('-')[0]}-{line}"
        else:
            parts.append(str(line))
    return ", ".join(parts)
