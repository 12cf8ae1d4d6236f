"""What an error message may quote of a file the user pointed at: at most the header line of a CSV.

A spec's pool, a ``--history`` file or a lab's oracle file can be any path, and an error that lists "its columns" of
a file that is not a CSV would print its first line: a key, a password hash, a token. So the names of a header are
quoted only when the file reads as a CSV: it is named ``.csv`` or ``.tsv`` (compressed or not), or its header has
at least two comma-separated names that look like column names; and every name is printable and short. Otherwise
the message says that the first line is not shown and why, and gives no part of it.

Example:
    >>> columns_text("pool.csv", ["SMILES", "expt"])
    "its columns are ['SMILES', 'expt']"
    >>> columns_text("/etc/shadow", ["root:$6$salt$hash:19000:0:99999:7:::"])  # doctest: +NORMALIZE_WHITESPACE
    'its first line is not shown: the file does not read as a CSV with a header (1 field); give a CSV file
     (named .csv) whose first line names its columns'
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

__all__ = ["MAX_SHOWN_CHARS", "columns_text", "is_shown_header", "shown_names"]

MAX_SHOWN_CHARS = 2000
"""The longest header (as a Python list) a message quotes; a longer one is not shown at all."""
_MAX_NAME_CHARS = 200
_CSV_SUFFIXES = {".csv", ".tsv"}
_COMPRESSION_SUFFIXES = {".gz", ".bz2", ".xz", ".zip", ".zst"}
_COLUMN_NAME = re.compile(r"[\w][\w .()%/\[\]+\-#:°µ·]*")


def _is_csv_named(path: str | os.PathLike[str]) -> bool:
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] in _COMPRESSION_SUFFIXES:
        suffixes.pop()
    return bool(suffixes) and suffixes[-1] in _CSV_SUFFIXES


def is_shown_header(path: str | os.PathLike[str], names: Iterable[object]) -> bool:
    """Whether an error may quote ``names``, the header of the file at ``path`` (see the module's rule).

    Example:
        >>> is_shown_header("data.dat", ["smiles", "yield (%)"]), is_shown_header("creds", ["API_KEY=sk-1"])
        (True, False)
    """
    names = [str(name) for name in names]
    if not names or any(len(name) > _MAX_NAME_CHARS or not name.isprintable() for name in names):
        return False
    if len(repr(names)) > MAX_SHOWN_CHARS:
        return False
    return _is_csv_named(path) or (len(names) >= 2 and all(_COLUMN_NAME.fullmatch(name) for name in names))


def shown_names(path: str | os.PathLike[str], names: Iterable[object]) -> list[str]:
    """``names`` when an error may quote them, else ``[]`` (for a "did you mean" hint, which then says nothing)."""
    names = [str(name) for name in names]
    return names if is_shown_header(path, names) else []


def columns_text(path: str | os.PathLike[str], names: Iterable[object]) -> str:
    """``"its columns are [...]"`` for a header an error may quote, else a sentence that quotes none of it."""
    names = [str(name) for name in names]
    if is_shown_header(path, names):
        return f"its columns are {names}"
    return (f"its first line is not shown: the file does not read as a CSV with a header ({len(names)} field"
            f"{'' if len(names) == 1 else 's'}); give a CSV file (named .csv) whose first line names its columns")
