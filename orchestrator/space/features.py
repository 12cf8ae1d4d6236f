"""Featurisation of a conditions pool's columns by what each column holds (``[space] features = "columns"``).

``auto`` looks at each column: SMILES become Morgan fingerprints (radius 2, 1024 bits), chemical formulas become
composition features (element fractions plus electronegativity and radius statistics), numbers are min-max scaled
to [0, 1], and anything else is one-hot encoded. ``none`` (``NO_COMPONENT``) in a SMILES or formula column is an
absent component (no additive, no ligand): it is left out when judging the column and encoded as all zeros. Columns
constant over the pool are dropped. Every feature lies in
[0, 1], so the Matérn kernel's lengthscale priors (one lengthscale per feature) suit them all, and the Tanimoto
kernel applies when every feature is a bit.

Example:
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"smiles": ["CCO", "c1ccccc1", "CCN"], "T": [20.0, 40.0, 60.0], "base": ["a", "b", "a"]})
    >>> [column_kind(frame[c]) for c in frame.columns]
    ['smiles', 'numeric', 'categorical']
    >>> X, is_binary = featurise_columns(frame, list(frame.columns))
    >>> X.shape[0], bool(X.min() >= 0 and X.max() <= 1), is_binary
    (3, True, False)
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd

from vocabulary.domain import InvalidCandidate, Material

__all__ = ["NO_COMPONENT", "ColumnKind", "column_kind", "featurise_columns"]

ColumnKind = Literal["smiles", "formula", "numeric", "categorical"]
_N_SAMPLE = 25
NO_COMPONENT = "none"
"""The value of an id column for an absent component (what an empty cell of a ``bench --pool`` CSV becomes)."""
_FP_BITS = 1024


def _parses_as_smiles(values: list[str]) -> bool:
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    return all(v.strip() and Chem.MolFromSmiles(v) is not None for v in values)


def _parses_as_formula(values: list[str]) -> bool:
    try:
        for v in values:
            Material.parse(v)
    except InvalidCandidate:
        return False
    return True


def column_kind(series: pd.Series) -> ColumnKind:
    """What a column holds, judged on up to 25 of its distinct values."""
    if pd.api.types.is_numeric_dtype(series):
        return "numeric"
    present = series.dropna()
    sample = [str(v) for v in pd.unique(present[present.astype(str) != NO_COMPONENT])[:_N_SAMPLE]]
    if not sample:
        return "categorical"
    has_lowercase_element = any(any(ch.islower() for ch in v) for v in sample)
    if _parses_as_smiles(sample) and not (has_lowercase_element and _parses_as_formula(sample)):
        return "smiles"  # 'CO' is both; formulas like 'NaCl' are not SMILES, SMILES like 'c1ccccc1' not formulas
    if _parses_as_formula(sample):
        return "formula"
    return "categorical"


def _encode(series: pd.Series, kind: ColumnKind) -> np.ndarray:
    from vocabulary.domain import _composition_features, _morgan_bits

    if kind == "numeric":
        values = series.to_numpy(dtype=float)
        values = np.where(np.isnan(values), np.nanmean(values), values)
        return values[:, None]
    if kind == "smiles":
        cache: dict[str, np.ndarray] = {}
        rows = []
        for value in series.astype(str):
            if value not in cache:
                from rdkit import Chem

                cache[value] = (np.zeros(_FP_BITS) if value == NO_COMPONENT
                                else _morgan_bits(Chem.MolToSmiles(Chem.MolFromSmiles(value)), _FP_BITS))
            rows.append(cache[value])
        return np.vstack(rows)
    if kind == "formula":
        absent = np.zeros(len(_composition_features("H")))
        return np.vstack([absent if str(v) == NO_COMPONENT else _composition_features(Material.parse(str(v)).formula)
                          for v in series])
    codes, uniques = pd.factorize(series.astype(str))
    return np.eye(len(uniques))[codes]


def featurise_columns(frame: pd.DataFrame, columns: list[str]) -> tuple[np.ndarray, bool]:
    """Features for every row of ``frame`` from ``columns``: shape (n_rows, n_features), values in [0, 1].

    Returns the matrix and whether every feature is a 0/1 bit (fingerprints and one-hot codes only).
    """
    blocks = []
    for column in columns:
        block = _encode(frame[column], column_kind(frame[column])).astype(float)
        low, high = block.min(axis=0), block.max(axis=0)
        keep = high > low
        blocks.append((block[:, keep] - low[keep]) / (high - low)[keep])
    X = np.hstack(blocks) if blocks else np.zeros((len(frame), 0))
    if X.shape[1] == 0:
        X = np.zeros((len(frame), 1))
    is_binary = bool(np.all((X == 0) | (X == 1)))
    return X, is_binary
