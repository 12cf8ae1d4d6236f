"""Novelty of a candidate against what the campaign already knows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["novelty"]


def novelty(candidate: Any, reference: Sequence[Any]) -> float:
    """1 − the largest similarity to any ``reference`` candidate, in [0, 1] (1: nothing like it is known).

    Molecules: Tanimoto similarity of Morgan fingerprints (radius 2). Materials: 1 − half the L1 distance of the
    element-fraction vectors (1 for the same reduced formula, 0 for disjoint elements).

    Example:
        >>> from vocabulary.domain import Material, Molecule
        >>> novelty(Molecule.parse("CCO"), [Molecule.parse("CCO")])
        0.0
        >>> round(novelty(Material.parse("KCl"), [Material.parse("NaCl")]), 2)
        0.5
        >>> novelty(Molecule.parse("CCO"), [])
        1.0
    """
    if not reference:
        return 1.0
    if candidate.type == "molecule":
        from rdkit import DataStructs
        from rdkit.Chem import rdFingerprintGenerator

        generator = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=2048)
        fingerprint = generator.GetFingerprint(candidate.to_rdkit())
        others = [generator.GetFingerprint(other.to_rdkit()) for other in reference]
        return float(1.0 - max(DataStructs.BulkTanimotoSimilarity(fingerprint, others)))
    fractions = _fractions(candidate)
    best = 0.0
    for other in reference:
        theirs = _fractions(other)
        keys = set(fractions) | set(theirs)
        distance = sum(abs(fractions.get(k, 0.0) - theirs.get(k, 0.0)) for k in keys)
        best = max(best, 1.0 - distance / 2.0)
    return float(np.clip(1.0 - best, 0.0, 1.0))


def _fractions(material: Any) -> dict[str, float]:
    composition = material.to_composition()
    return {element.symbol: composition.get_atomic_fraction(element) for element in composition.elements}
