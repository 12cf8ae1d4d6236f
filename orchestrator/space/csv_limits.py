"""How large a cell and a row of a CSV a campaign reads may be, checked in bounded pieces before pandas reads it.

pandas tokenises a whole row before it yields any of it and holds about ten times a cell's size while it does, so a
pool with a 2 GB line was killed for memory instead of refused. Every CSV a user hands in (a design-space pool, a
``--history`` file, ``bench --pool``) is checked here first, reading at most ``MAX_ROW_CHARS`` of it at a time:

- a cell holds at most ``MAX_CELL_CHARS`` characters (64 KiB): a SMILES, a formula or a value never needs more;
- a row holds at most ``MAX_ROW_CHARS`` characters (1 MiB): a thousand columns of such cells fit.

A file over either gets one line naming the file, the row's line and the limit. A file no line of which is longer
than a cell may be, with no quote character in it, holds no oversized cell or row (a cell or row could only span
lines inside quotes): that is checked with a block scan of the bytes, without parsing the CSV.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "pool.csv"
    >>> _ = path.write_text("smiles,y\\nCCO,1.5\\n" + "C" * (MAX_CELL_CHARS + 1) + ",2.0\\n")
    >>> check_csv_limits(path, "pool pool.csv")
    Traceback (most recent call last):
    ...
    vocabulary.domain.SetupError: pool pool.csv line 3 has a cell longer than 65,536 characters (64 KiB), the most \
a cell may hold (a SMILES, formula or value is far shorter); fix or remove the row
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import TextIO

import numpy as np

from vocabulary.domain import SetupError
from vocabulary.text_files import wide_encoding_problem

__all__ = ["MAX_CELL_CHARS", "MAX_ROW_CHARS", "OversizedRow", "bounded_records", "check_csv_limits"]

MAX_CELL_CHARS = 64 * 1024
"""The most characters one cell of a CSV may hold (64 KiB)."""
MAX_ROW_CHARS = 1024 * 1024
"""The most characters one row of a CSV may hold, line ends included (1 MiB)."""
_BLOCK_BYTES = 1 << 20
_LONG_FIELD = re.compile(f"[^,]{{{MAX_CELL_CHARS + 1}}}")

_CELL_PROBLEM = (f"has a cell longer than {MAX_CELL_CHARS:,} characters (64 KiB), the most a cell may hold (a SMILES, "
                 "formula or value is far shorter); fix or remove the row")
_ROW_PROBLEM = (f"is longer than {MAX_ROW_CHARS:,} characters (1 MiB), the most a row may hold (a cell may hold "
                f"{MAX_CELL_CHARS:,}; a SMILES, formula or value is far shorter); fix or remove the row")


class OversizedRow(csv.Error):
    """A CSV row over ``MAX_ROW_CHARS`` or with a cell over ``MAX_CELL_CHARS``; ``line`` is the file line it starts
    on. A ``csv.Error``, so every reader that refuses an unreadable CSV refuses this one too."""

    def __init__(self, line: int, problem: str):
        self.line, self.problem = line, problem
        super().__init__(f"line {line} {problem}")


class _RowTooLong(Exception):
    """A record's lines ran past the budget; ``piece`` is the last part read (at most the budget and a character)."""

    def __init__(self, piece: str):
        self.piece = piece


def bounded_records(handle: TextIO) -> Iterator[tuple[int, list[str]]]:
    """Each record of a CSV opened as text with ``newline=""``, with the 1-based file line it starts on.

    ``csv.reader`` reads its file's lines whole; here it reads lines of at most ``MAX_ROW_CHARS`` (``readline``
    with a limit), counted as they are read, so no record is read past its budget however long its line.

    Raises:
        OversizedRow: a record is longer than ``MAX_ROW_CHARS`` or has a cell longer than ``MAX_CELL_CHARS``;
            no more than ``MAX_ROW_CHARS`` of it was read.
    """
    counts = [0, 0]  # characters read so far, and where the record being read starts

    def counted(line: str) -> str:
        counts[0] += len(line)
        if counts[0] - counts[1] > MAX_ROW_CHARS:
            raise _RowTooLong(line)
        return line

    # C-level iteration: a Python frame per line only for the count (the row check costs ~10 % over csv alone)
    reader = csv.reader(map(counted, iter(partial(handle.readline, MAX_ROW_CHARS + 1), "")))
    start = 1
    try:
        for record in reader:
            if counts[0] - counts[1] > MAX_CELL_CHARS and record and max(map(len, record)) > MAX_CELL_CHARS:
                raise OversizedRow(start, _CELL_PROBLEM)
            yield start, record
            counts[1], start = counts[0], reader.line_num + 1
    except _RowTooLong as exc:
        # the wording only: a piece of one long field is a cell over its limit, many short ones a long row
        is_cell = _LONG_FIELD.search(exc.piece) is not None
        raise OversizedRow(start, _CELL_PROBLEM if is_cell else _ROW_PROBLEM) from None
    except csv.Error as exc:
        if "field larger than field limit" in str(exc):  # the csv module's own limit, 128 KiB by default
            raise OversizedRow(start, _CELL_PROBLEM) from None
        raise


def _has_only_short_lines(path: Path) -> bool:
    """Whether no line of the file is longer than a cell may be and no quote character appears in it: no cell or
    row can then be over its limit. Read in blocks of 1 MiB, as bytes (a line's bytes are at least its
    characters)."""
    run = 0  # bytes of the line the previous block ended in
    with open(path, "rb") as handle:
        while block := handle.read(_BLOCK_BYTES):
            if b'"' in block:
                return False
            ends = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 0x0A)
            if not len(ends):
                run += len(block)
                if run > MAX_CELL_CHARS:
                    return False
                continue
            longest = max(run + int(ends[0]), int(np.diff(ends).max(initial=1)) - 1)
            if longest > MAX_CELL_CHARS:
                return False
            run = len(block) - int(ends[-1]) - 1
    return run <= MAX_CELL_CHARS


def check_csv_limits(path: Path, source: str, error: Callable[[str], Exception] = SetupError) -> None:
    """Raise ``error`` when the CSV at ``path`` is UTF-16 or UTF-32 text, has a cell over ``MAX_CELL_CHARS`` or a
    row over ``MAX_ROW_CHARS``; memory stays O(``MAX_ROW_CHARS``) whatever the file holds.

    ``source`` starts the message ("pool pool.csv"); the message names the row's line and the limit. A file
    that cannot be opened is refused in one line; one that is not readable UTF-8 CSV for another reason passes: the
    caller's reader refuses it in its own words.
    """
    try:
        with open(path, "rb") as handle:
            head = handle.read(4)
    except OSError as exc:  # unreadable (permissions, an I/O error): say so, and quote nothing of it
        raise error(f"{source} cannot be read ({exc.strerror or type(exc).__name__}); make the file readable or give "
                    "another one") from None
    problem = wide_encoding_problem(head)
    if problem:
        raise error(f"{source} {problem}")
    if _has_only_short_lines(path):
        return
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            for _ in bounded_records(handle):
                pass
    except OversizedRow as exc:
        raise error(f"{source} {exc}") from None
    except (UnicodeDecodeError, csv.Error):
        return
