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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from .domain import SetupError

__all__ = [
    "N_SHOWN",
    "OnBadRows",
    "RowProblem",
    "conflicting_replicates",
    "csv_line_numbers",
    "enforce_policy",
    "line_ranges",
    "numeric_value_problems",
    "read_csv_table",
    "require_rows",
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
                   is_rows_required: bool = True) -> pd.DataFrame:
    """Read a CSV with a header and (unless ``is_rows_required`` is false) a data row, or raise ``error``.

    The message names the file and the fix. A caller that checks the columns first passes ``is_rows_required=False``
    and calls ``require_rows`` after.
    """
    try:
        frame = pd.read_csv(path, encoding="utf-8-sig")
    except pd.errors.EmptyDataError:
        raise error(f"{what} {path} is empty (no header, no rows); give a CSV with a header row and data rows") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        reason = " ".join(str(exc).split())
        raise error(f"{what} {path} is not a readable UTF-8 CSV ({reason}); fix the file") from None
    if is_rows_required:
        require_rows(frame, path, what, error)
    return frame


def require_rows(frame: pd.DataFrame, path: Path, what: str, error: type[SetupError] = SetupError) -> None:
    """Raise ``error`` when a CSV read has a header but no data rows."""
    if frame.empty:
        raise error(f"{what} {path} has a header but no rows; add data rows below the header")


def csv_line_numbers(path: Path, n_rows: int) -> list[int]:
    """The 1-based file line on which each data row starts (blank lines skipped, as pandas does).

    Falls back to ``row + 2`` (one line per row after the header) when the file reads differently here.
    """
    lines: list[int] = []
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle)
            start = 1
            for k, record in enumerate(reader):
                if k > 0 and any(cell.strip() for cell in record):
                    lines.append(start)
                start = reader.line_num + 1
    except (OSError, UnicodeDecodeError, csv.Error):
        lines = []
    return lines if len(lines) == n_rows else [k + 2 for k in range(n_rows)]


def numeric_value_problems(frame: pd.DataFrame, column: str, *,
                           is_required: bool) -> tuple[pd.Series, dict[int, RowProblem]]:
    """A value column as floats, and the rows (by position) whose value is text, infinite, or empty when required.

    Example:
        >>> values, problems = numeric_value_problems(pd.DataFrame({"y": ["1.5", "abc", "inf", None]}), "y",
        ...                                             is_required=True)
        >>> values.tolist()[:1], {k: p.text for k, p in problems.items()}
        ([1.5], {1: "y='abc' is not a number", 2: 'y=inf is not finite', 3: 'y is empty'})
    """
    raw = frame[column]
    values = pd.to_numeric(raw, errors="coerce").astype(float)
    problems: dict[int, RowProblem] = {}
    for position, (given, value) in enumerate(zip(raw.tolist(), values.tolist(), strict=True)):
        is_empty = given is None or (isinstance(given, float) and math.isnan(given)) or str(given).strip() == ""
        if is_empty:
            if is_required:
                problems[position] = RowProblem(f"{column} is empty")
        elif math.isnan(value):
            problems[position] = RowProblem(f"{column}={given!r} is not a number")
        elif not math.isfinite(value):
            problems[position] = RowProblem(f"{column}={value} is not finite")
    return values, problems


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
