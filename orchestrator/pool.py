"""A finite design space: a CSV pool or an inline list, parsed into canonical candidates.

Rows that describe the same candidate (replicates, or SMILES spellings of one InChIKey) are merged; their numeric
columns are averaged. Rows that fail to parse are counted and reported, never silently used.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .domain import (
    Candidate,
    ConditionSpace,
    Conditions,
    InvalidCandidate,
    Parameter,
    SetupError,
    featurise,
    parse_candidate,
)
from .spec import CampaignSpec

__all__ = ["Pool", "describe", "load_pool"]

log = logging.getLogger(__name__)


def describe(candidate: Candidate) -> str:
    """A short human-readable label: SMILES, formula, or ``name=value`` pairs."""
    if isinstance(candidate, Conditions):
        return "; ".join(f"{k}={v}" for k, v in candidate.values.items())
    return getattr(candidate, "smiles", None) or getattr(candidate, "formula")


@dataclass
class Pool:
    """Parsed candidates with their per-candidate numeric columns (means over merged rows)."""

    kind: str
    candidates: list[Candidate]
    columns: dict[str, np.ndarray] = field(default_factory=dict)
    space: ConditionSpace | None = None
    n_invalid: int = 0
    invalid_examples: list[str] = field(default_factory=list)
    seed_size: int | None = None
    """Open spaces: how many candidates the seed library had (the rest were generated); None for a fixed pool."""

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
                    self.n_invalid, list(self.invalid_examples), self.seed_size or len(self.candidates))

    def extend(self, candidates: list[Candidate]) -> list[Candidate]:
        """Append candidates not yet in the pool (generator mode); returns those added. Their columns are NaN.

        Example:
            >>> from orchestrator.domain import Molecule
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
        series = frame[name].dropna()
        if pd.api.types.is_numeric_dtype(series):
            parameters.append(Parameter(name=name, kind="continuous", low=float(series.min()), high=float(series.max())))
        else:
            choices = tuple(sorted(series.astype(str).unique()))
            parameters.append(Parameter(name=name, kind="categorical", choices=choices))
    return ConditionSpace(parameters=tuple(parameters))


def _parse_rows(kind: str, raw_items: list[Any], space: ConditionSpace | None) -> tuple[list[Candidate | None], list[str]]:
    parsed, bad = [], []
    for raw in raw_items:
        try:
            parsed.append(parse_candidate(kind, raw, space))
        except InvalidCandidate as exc:
            parsed.append(None)
            bad.append(str(exc))
    return parsed, bad


def _build(kind: str, parsed: list[Candidate | None], frame: pd.DataFrame, space, bad: list[str]) -> Pool:
    keep = [i for i, c in enumerate(parsed) if c is not None]
    if not keep:
        raise SetupError(f"no row of the design space parsed as a {kind}; first problem: {bad[0] if bad else 'empty pool'}")
    frame = frame.iloc[keep].copy()
    frame["_id"] = [parsed[i].id for i in keep]
    numeric = frame.select_dtypes(include="number")
    numeric.insert(0, "_id", frame["_id"])
    means = numeric.groupby("_id", sort=False).mean()
    first: dict[str, Candidate] = {}
    for i in keep:
        first.setdefault(parsed[i].id, parsed[i])
    candidates = [first[cid] for cid in means.index]
    columns = {name: means[name].to_numpy(dtype=float) for name in means.columns}
    if bad:
        log.warning("%d design-space rows did not parse and were left out; first: %s", len(bad), bad[0])
    return Pool(kind, candidates, columns, space, len(bad), bad[:5])


_CACHE: dict[tuple, Pool] = {}


def load_pool(spec: CampaignSpec) -> Pool:
    """Load and parse the spec's design space (cached per file and modification time)."""
    kind = spec.campaign.kind
    if spec.space.inline is not None:
        frame = pd.DataFrame({"_raw": spec.space.inline})
        space = None
        if kind == "conditions":
            frame = pd.DataFrame(list(spec.space.inline))
            space = _space_from_frame(frame, list(frame.columns))
            raw_items = frame.to_dict("records")
        else:
            raw_items = list(spec.space.inline)
        parsed, bad = _parse_rows(kind, raw_items, space)
        pool = _build(kind, parsed, frame, space, bad)
        if spec.lab.oracle is not None:
            truth = {parse_candidate(kind, k, space).id: v for k, v in spec.lab.oracle.items()}
            pool.columns["_oracle"] = np.asarray([truth.get(cid, np.nan) for cid in pool.ids], dtype=float)
        return pool

    path = spec.resolve(spec.space.pool)
    if not path.is_file():
        raise SetupError(f"design-space pool {path} does not exist; fix 'space.pool' (paths are relative to the spec file)")
    key = (str(path), path.stat().st_mtime_ns, kind, spec.space.column, tuple(spec.space.columns or ()),
           spec.space.features)
    if key in _CACHE:
        return _CACHE[key]
    frame = pd.read_csv(path, encoding="utf-8-sig")
    wanted = spec.space.columns if kind == "conditions" else [spec.space.column]
    missing = [c for c in wanted if c not in frame.columns]
    if missing:
        raise SetupError(f"pool {Path(path).name} has no column(s) {missing}; its columns are {list(frame.columns)}")
    if kind == "conditions":
        space = _space_from_frame(frame, wanted)
        raw_items = frame[wanted].to_dict("records")
    else:
        space, raw_items = None, frame[spec.space.column].tolist()
    parsed, bad = _parse_rows(kind, raw_items, space)
    pool = _build(kind, parsed, frame, space, bad)
    if kind == "conditions" and spec.space.features == "columns":
        from .pool_features import featurise_columns

        values = pd.DataFrame([c.values for c in pool.candidates])
        pool.features = featurise_columns(values, list(wanted))[0]  # overrides the cached property
    _CACHE[key] = pool
    return pool
