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
    >>> X, kinds = featurise_columns(frame, list(frame.columns))
    >>> X.shape[0], bool(X.min() >= 0 and X.max() <= 1), sorted(set(kinds))
    (3, True, ['categorical', 'numeric', 'smiles'])
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd

from vocabulary.domain import InvalidCandidate, Material, SetupError

__all__ = ["NO_COMPONENT", "ColumnKind", "column_kind", "feature_mode", "featurise_columns", "unparsed_rows"]

ColumnKind = Literal["smiles", "formula", "numeric", "categorical"]
_N_SAMPLE = 25
NO_COMPONENT = "none"
"""The value of an id column for an absent component (what an empty cell of a ``bench --pool`` CSV becomes)."""
_FP_BITS = 1024
_MAX_UNPARSED_SHARE = 0.1


def _is_smiles(value: str) -> bool:
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    return bool(value.strip()) and Chem.MolFromSmiles(value) is not None


def _is_formula(value: str) -> bool:
    try:
        Material.parse(value)
    except InvalidCandidate:
        return False
    return True


def _mostly(values: list[str], parses) -> bool:
    """Whether at most ``_MAX_UNPARSED_SHARE`` of ``values`` fail ``parses`` (none, for fewer than 10 values)."""
    failures = sum(not parses(v) for v in values)
    return failures <= int(_MAX_UNPARSED_SHARE * len(values))


def column_kind(series: pd.Series) -> ColumnKind:
    """What a column holds, judged on up to 25 of its distinct values.

    A column is SMILES (or formulas) when at most one in ten of those values fails to parse: a few typos do not
    turn a molecule column into categories. The rows that fail are bad rows (``unparsed_rows``).
    """
    if pd.api.types.is_numeric_dtype(series):
        return "numeric"
    present = series.dropna()
    sample = [str(v) for v in pd.unique(present[present.astype(str) != NO_COMPONENT])[:_N_SAMPLE]]
    if not sample:
        return "categorical"
    has_lowercase_element = any(any(ch.islower() for ch in v) for v in sample)
    if _mostly(sample, _is_smiles) and not (has_lowercase_element and _mostly(sample, _is_formula)):
        return "smiles"  # 'CO' is both; formulas like 'NaCl' are not SMILES, SMILES like 'c1ccccc1' not formulas
    if _mostly(sample, _is_formula):
        return "formula"
    return "categorical"


def feature_mode(mode: str, space) -> Literal["parameters", "columns"]:
    """How a conditions pool is featurised: ``[space] features`` as given, or for "auto" "columns" when a category
    parameter of ``space`` (a ``ConditionSpace``) holds SMILES or formulas, else "parameters".

    One-hot names of molecules tell a surrogate nothing about how two of them relate; Morgan bits do. On numbers and
    plain categories the two modes encode the same.

    Example:
        >>> from vocabulary.domain import ConditionSpace
        >>> space = ConditionSpace.model_validate({"parameters": [
        ...     {"name": "solvent", "kind": "categorical", "choices": ["CCO", "c1ccccc1", "CS(C)=O"]},
        ...     {"name": "T", "kind": "continuous", "low": 20, "high": 80}]})
        >>> feature_mode("auto", space), feature_mode("parameters", space)
        ('columns', 'parameters')
    """
    if mode != "auto":
        return mode  # type: ignore[return-value]
    for parameter in space.parameters:
        if parameter.kind == "categorical" and column_kind(pd.Series(list(parameter.choices), dtype=object,
                                                                     name=parameter.name)) in ("smiles", "formula"):
            return "columns"
    return "parameters"


def unparsed_rows(series: pd.Series, kind: ColumnKind) -> np.ndarray:
    """Per row of a SMILES or formula column: whether its value fails to parse (an absent or empty one does not)."""
    if kind not in ("smiles", "formula"):
        return np.zeros(len(series), dtype=bool)
    parses = _is_smiles if kind == "smiles" else _is_formula
    verdicts: dict[str, bool] = {}
    out = np.zeros(len(series), dtype=bool)
    for row, value in enumerate(series.tolist()):
        if pd.isna(value):
            continue  # an empty cell is a row problem of its own (or an absent component, where it is filled)
        text = str(value)
        if text not in verdicts:
            verdicts[text] = text != NO_COMPONENT and not parses(text)
        out[row] = verdicts[text]
    return out


def _fingerprint(value: str) -> np.ndarray | None:
    """Morgan bits of a SMILES (all zeros for an absent component); None when it does not parse."""
    from rdkit import Chem

    from vocabulary.domain import _morgan_bits

    if value == NO_COMPONENT:
        return np.zeros(_FP_BITS)
    mol = Chem.MolFromSmiles(value) if value.strip() else None
    return None if mol is None else _morgan_bits(Chem.MolToSmiles(mol), _FP_BITS)


def _composition(value: str) -> np.ndarray | None:
    """Composition features of a formula (all zeros for an absent component); None when it does not parse."""
    from vocabulary.domain import _composition_features

    if value == NO_COMPONENT:
        return np.zeros(len(_composition_features("H")))
    try:
        return _composition_features(Material.parse(value).formula)
    except InvalidCandidate:
        return None


def _encode(series: pd.Series, kind: ColumnKind) -> np.ndarray:
    if kind == "numeric":
        values = series.to_numpy(dtype=float)
        values = np.where(np.isnan(values), np.nanmean(values), values)
        return values[:, None]
    if kind in ("smiles", "formula"):
        encode = _fingerprint if kind == "smiles" else _composition
        cache: dict[str, np.ndarray] = {}
        rows = []
        for value in series.astype(str):
            if value not in cache:
                cache[value] = encode(value)
                if cache[value] is None:
                    column = f"column {series.name!r}" if series.name is not None else "a pool column"
                    raise SetupError(f"{column} holds {kind}, but {value!r} is not one; fix or remove "
                                     "its rows, or set [space] features = \"parameters\" to read each value of the "
                                     "column as a name (a column that mixes formulas and SMILES needs it)")
            rows.append(cache[value])
        return np.vstack(rows)
    codes, uniques = pd.factorize(series.astype(str))
    return np.eye(len(uniques))[codes]


def featurise_columns(frame: pd.DataFrame, columns: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Features for every row of ``frame`` from ``columns``: shape (n_rows, n_features), values in [0, 1].

    Returns the matrix and, per feature, the kind of column it comes from (``column_kind``: "smiles" for a
    fingerprint bit, "categorical" for a one-hot code, "numeric" or "formula" for a scaled number), which is how the
    surrogate's kernel treats it (``bo.choose_kernel``).
    """
    blocks, kinds = [], []
    for column in columns:
        kind = column_kind(frame[column])
        block = _encode(frame[column], kind).astype(float)
        low, high = block.min(axis=0), block.max(axis=0)
        keep = high > low
        blocks.append((block[:, keep] - low[keep]) / (high - low)[keep])
        kinds += [kind] * int(keep.sum())
    X = np.hstack(blocks) if blocks else np.zeros((len(frame), 0))
    if X.shape[1] == 0:
        X, kinds = np.zeros((len(frame), 1)), ["numeric"]
    return X, np.asarray(kinds, dtype=object)
