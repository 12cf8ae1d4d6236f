"""The constraints a generated candidate must meet: size and allowed elements."""

from __future__ import annotations

from typing import Any

__all__ = ["constraint_error", "elements_of"]


def elements_of(candidate: Any) -> set[str]:
    """Element symbols of a molecule (heavy atoms) or a material."""
    if candidate.type == "molecule":
        from rdkit import Chem

        return {atom.GetSymbol() for atom in Chem.MolFromSmiles(candidate.smiles).GetAtoms()}
    return {element.symbol for element in candidate.to_composition().elements}


def constraint_error(space: Any, candidate: Any) -> str | None:
    """Why ``candidate`` lies outside an open space's constraints (a message naming the fix), or None.

    ``space`` is the spec's ``SpaceSpec``: ``max_heavy_atoms`` (molecules), ``max_atoms`` (materials, per formula
    unit) and ``elements`` (allowed symbols).

    Example:
        >>> from types import SimpleNamespace
        >>> from vocabulary.domain import Molecule
        >>> space = SimpleNamespace(max_heavy_atoms=3, max_atoms=None, elements=["C", "O"])
        >>> constraint_error(space, Molecule.parse("CCO")) is None
        True
        >>> constraint_error(space, Molecule.parse("CCCN"))
        "CCCN has 4 heavy atoms (at most 3 allowed) and uses N (allowed elements: ['C', 'O']); propose a smaller molecule of the allowed elements"
    """
    problems = []
    if candidate.type == "molecule":
        n_heavy = candidate.n_heavy_atoms
        if space.max_heavy_atoms is not None and n_heavy > space.max_heavy_atoms:
            problems.append(f"has {n_heavy} heavy atoms (at most {space.max_heavy_atoms} allowed)")
        label = candidate.smiles
    else:
        n_atoms = candidate.n_atoms
        if space.max_atoms is not None and n_atoms > space.max_atoms:
            problems.append(f"has {n_atoms} atoms per formula unit (at most {space.max_atoms} allowed)")
        label = candidate.formula
    if space.elements:
        outside = sorted(elements_of(candidate) - set(space.elements))
        if outside:
            problems.append(f"uses {', '.join(outside)} (allowed elements: {sorted(space.elements)})")
    if not problems:
        return None
    fix = "a smaller molecule of the allowed elements" if candidate.type == "molecule" else "a smaller composition of the allowed elements"
    return f"{label} {' and '.join(problems)}; propose {fix}"
