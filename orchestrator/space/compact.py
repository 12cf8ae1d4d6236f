"""A conditions pool too large to hold as candidate objects: compact row codes, features assembled chunk by chunk.

``pool.Pool`` turns every row into a ``Conditions`` object and a dense feature row. At 10^6 rows whose four columns
are SMILES that is about 10 GB. A ``CompactPool`` keeps, per candidate, one small integer per categorical parameter
(its position among the sorted choices), one float per continuous parameter, the 64-bit digest its id is spelled
from, and the value columns the campaign reads. The CSV is read ``chunk_rows`` rows at a time (pandas
``chunksize``); each distinct cell value is validated and featurised once (a reagent's fingerprint is computed once,
not once per row); candidates, ids and feature rows are built on demand (``features[rows]``). Duplicates are merged
by canonical id, found from the digests with ``np.unique``, and ``index`` looks an id up by binary search in the
sorted digests (16 bytes a candidate instead of a dict entry).

It answers as ``Pool`` does, row for row: the same candidates in the same order (first appearance), the same ids,
the same features, the same bad rows with the same messages before the first dispatch. ``[space] stream`` chooses:
``true``, ``false``, or ``"auto"`` (``should_stream``: when the in-memory pool would pass its memory budget).

``compact_reading.load_compact_pool`` reads a pool file into one.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from vocabulary.domain import (
    Conditions,
    ConditionSpace,
    InstrumentFault,
    SetupError,
)

__all__ = ["CompactFeatures", "CompactPool", "ColumnOracle", "estimated_rows", "should_stream"]

STREAM_BUDGET_BYTES = 512 * 2**20
"""What an in-memory pool may take before ``stream = "auto"`` streams it: half the 1 GB a campaign may use."""
IN_MEMORY_BYTES_PER_ROW = 5_000
"""Peak bytes per row of an in-memory conditions pool (candidate objects, frame, ids, dense features): issue 17
measured about 10 KB a row (10 GB for 10^6 rows of four SMILES columns); half of that is taken, so ``auto``
streams somewhat early rather than late (an estimate, not a measurement of each pool)."""
CHUNK_ROWS = 100_000


# ------------------------------------------------------------------------------------------------ the choice
def estimated_rows(path: Path, sample_bytes: int = 1 << 20) -> int:
    """Rows of a CSV estimated from its size and the mean length of the lines in its first ``sample_bytes``."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        sample = handle.read(sample_bytes)
    lines = sample.count(b"\n")
    if size <= len(sample) or lines < 2:
        return max(lines - 1, 0) if size <= len(sample) else 1
    return int(size / (len(sample) / lines)) - 1


def should_stream(spec) -> bool:
    """Whether the spec's pool is held compactly (``[space] stream``; ``"auto"``: when rows × 5 KB > 512 MB).

    Only a conditions pool file with a fixed space streams; ``stream = true`` on anything else is refused.
    """
    space = spec.space
    is_eligible = spec.campaign.kind == "conditions" and space.pool is not None and not space.generate
    if space.stream is False:
        return False
    if space.stream is True:
        if not is_eligible:
            raise SetupError(f"[space] stream = true streams conditions pools; this is a {spec.campaign.kind} pool, "
                             "which is held in memory: leave stream out")
        return True
    if not is_eligible:
        return False
    path = spec.resolve(space.pool)
    return path.is_file() and estimated_rows(path) * IN_MEMORY_BYTES_PER_ROW > STREAM_BUDGET_BYTES


# ------------------------------------------------------------------------------------------------ the pool
class CompactFeatures:
    """The pool's feature matrix, shape (n_candidates, n_features), gathered row by row from per-column blocks.

    Each block is a table with one row per distinct value of a column and the candidates' codes into it (or, for a
    continuous column, one row per candidate). ``features[rows]`` returns the dense rows, float64.
    """

    ndim = 2
    dtype = np.dtype(float)

    def __init__(self, blocks: list[tuple[np.ndarray | None, np.ndarray]], n_rows: int):
        self.blocks = blocks
        self.shape = (n_rows, sum(table.shape[1] for _, table in blocks))

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, rows) -> np.ndarray:
        if isinstance(rows, tuple):
            raise TypeError("index the pool's features by rows only: features[rows]")
        rows = np.arange(self.shape[0])[rows] if isinstance(rows, slice) else np.asarray(rows)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        blocks = [table[rows if codes is None else codes[rows]] for codes, table in self.blocks]
        return np.hstack(blocks) if blocks[0].ndim == 2 else np.concatenate(blocks)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        dense = self[np.arange(self.shape[0])]
        return dense if dtype is None else dense.astype(dtype)

    @property
    def nbytes(self) -> int:
        return sum(table.nbytes + (0 if codes is None else codes.nbytes) for codes, table in self.blocks)


class CompactPool:
    """A conditions pool held as per-candidate codes; answers as ``pool.Pool`` does (candidates, ids, index,
    features, columns), building candidate objects and feature rows only when asked."""

    kind = "conditions"
    seed_size = None

    def __init__(self, space: ConditionSpace, parameters: list[np.ndarray], digests: np.ndarray,
                 columns: dict[str, np.ndarray], feature_blocks: list[tuple[np.ndarray | None, np.ndarray]],
                 skipped_rows: list[str] | None = None, n_rows_read: int = 0):
        self.space = space
        self.parameters = parameters
        """Per parameter (space order): the candidates' choice codes (categorical) or values (continuous)."""
        self.digests = digests
        self.columns = columns
        self.skipped_rows = list(skipped_rows or [])
        self.n_rows_read = n_rows_read
        self._order = np.argsort(digests, kind="stable")
        self._sorted = digests[self._order]
        self.features = CompactFeatures(feature_blocks, len(digests))

    def __len__(self) -> int:
        return len(self.digests)

    def values(self, row: int) -> dict[str, float | str]:
        out: dict[str, float | str] = {}
        for parameter, data in zip(self.space.parameters, self.parameters, strict=True):
            out[parameter.name] = (parameter.choices[int(data[row])] if parameter.kind == "categorical"
                                   else float(data[row]))
        return out

    def candidate(self, row: int) -> Conditions:
        return self.space.parse(self.values(row))

    def row_of(self, candidate_id: Any) -> int | None:
        """The row of a candidate id, or None (binary search in the sorted digests)."""
        if not isinstance(candidate_id, str) or len(candidate_id) != 21 or not candidate_id.startswith("cond-"):
            return None
        try:
            digest = int(candidate_id[5:], 16)
        except ValueError:
            return None
        if f"cond-{digest:016x}" != candidate_id:
            return None
        position = int(np.searchsorted(self._sorted, np.uint64(digest)))
        if position < len(self._sorted) and int(self._sorted[position]) == digest:
            return int(self._order[position])
        return None

    @cached_property
    def candidates(self) -> _Candidates:
        return _Candidates(self)

    @cached_property
    def ids(self) -> _Ids:
        return _Ids(self)

    @cached_property
    def index(self) -> _Index:
        return _Index(self)

    def get(self, candidate_id: str) -> Conditions:
        return self.candidate(self.index[candidate_id])

    def column(self, name: str) -> PoolColumn:
        """A numeric column as a read-only mapping ``{candidate id: value}``, NaN rows left out."""
        if name not in self.columns:
            raise SetupError(f"column {name!r} is not a numeric column of the pool; numeric columns: {sorted(self.columns)}")
        return PoolColumn(self, self.columns[name])

    def oracle(self, column: str, property: str) -> ColumnOracle:
        """The simulated lab's ground truth from a column, looked up by row (no {id: value} dict of the pool)."""
        self.column(column)
        return ColumnOracle(self, self.columns[column], property)

    def copy(self) -> CompactPool:
        """The same pool (its arrays are never modified, so sharing them is safe)."""
        return self

    def extend(self, candidates: list) -> list:
        """A streamed pool is fixed: candidates already in it are a no-op; a new one is refused."""
        new = [c for c in candidates if c.id not in self.index]
        if new:
            raise SetupError(f"{new[0].id} is not in the streamed pool, which cannot grow; set [space] stream = false "
                             "to hold the pool in memory")
        return []


class _Candidates(Sequence):
    def __init__(self, pool: CompactPool):
        self._pool = pool

    def __len__(self) -> int:
        return len(self._pool)

    def __getitem__(self, key):
        if isinstance(key, slice):
            return [self._pool.candidate(i) for i in range(*key.indices(len(self._pool)))]
        key = int(key)
        if not -len(self._pool) <= key < len(self._pool):
            raise IndexError(f"candidate {key} is outside the pool of {len(self._pool)}")
        return self._pool.candidate(key % len(self._pool))


class _Ids(Sequence):
    def __init__(self, pool: CompactPool):
        self._digests = pool.digests

    def __len__(self) -> int:
        return len(self._digests)

    def __getitem__(self, key):
        if isinstance(key, slice):
            return [f"cond-{int(d):016x}" for d in self._digests[key]]
        return f"cond-{int(self._digests[key]):016x}"

    def __iter__(self) -> Iterator[str]:
        for chunk in range(0, len(self._digests), CHUNK_ROWS):
            yield from self[chunk:chunk + CHUNK_ROWS]


class _Index(Mapping):
    """Candidate id → row, by binary search in the sorted digests."""

    def __init__(self, pool: CompactPool):
        self._pool = pool

    def __getitem__(self, candidate_id) -> int:
        row = self._pool.row_of(candidate_id)
        if row is None:
            raise KeyError(candidate_id)
        return row

    def __contains__(self, candidate_id) -> bool:
        return self._pool.row_of(candidate_id) is not None

    def __len__(self) -> int:
        return len(self._pool)

    def __iter__(self) -> Iterator[str]:
        return iter(self._pool.ids)


class PoolColumn(Mapping):
    """One numeric column of a compact pool as ``{candidate id: value}`` (NaN rows are not keys)."""

    def __init__(self, pool: CompactPool, values: np.ndarray):
        self._pool, self._values = pool, values

    def __getitem__(self, candidate_id) -> float:
        row = self._pool.row_of(candidate_id)
        if row is None or math.isnan(self._values[row]):
            raise KeyError(candidate_id)
        return float(self._values[row])

    def __len__(self) -> int:
        return int(np.count_nonzero(~np.isnan(self._values)))

    def __iter__(self) -> Iterator[str]:
        for row in np.flatnonzero(~np.isnan(self._values)).tolist():
            yield self._pool.ids[row]


class ColumnOracle:
    """The SimLab's ground truth read from a compact pool's column; fails as ``instruments.TableOracle`` does."""

    def __init__(self, pool: CompactPool, values: np.ndarray, property: str):
        self._pool, self._values, self.property = pool, values, property

    def __call__(self, candidate: Any) -> float:
        row = self._pool.row_of(candidate.id)
        if row is None:
            raise InstrumentFault(
                f"the lab table for {self.property!r} has no row for candidate id {candidate.id!r} "
                f"({len(self._pool)} rows); add a row for it or restrict the design space to the table's ids")
        value = float(self._values[row])
        if math.isnan(value):
            raise InstrumentFault(f"the lab table row for candidate id {candidate.id!r} has no {self.property!r} "
                                  "value (NaN); fill it in or drop the row")
        return value
