"""Deterministic neighbours of known candidates: small edits of molecules (rdkit) and substitutions in compositions
(pymatgen). They give the surrogate-driven arms something new to choose from in an open space, and are what the llm
arm's fallback picks from when the model's own ideas fail validation."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from orchestrator.policy.generation.constraints import constraint_error
from vocabulary.domain import InvalidCandidate, Material, Molecule

__all__ = ["material_neighbours", "molecule_neighbours", "neighbours"]

_ATOMS = ("C", "N", "O", "S", "F", "Cl")
_SUBSTITUENTS = ("C", "N", "O", "F", "Cl")


def _edits(smiles: str) -> Iterable[str]:
    """Raw SMILES one edit away: swap an element, add a substituent, drop a terminal atom, raise a bond order."""
    from rdkit import Chem

    mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        return
    numbers = {symbol: Chem.GetPeriodicTable().GetAtomicNumber(symbol) for symbol in _ATOMS}
    for atom in mol.GetAtoms():
        index = atom.GetIdx()
        # aromatic atoms only swap C -> N (benzene -> pyridine); other swaps there rarely kekulise
        swaps = ("N",) if atom.GetIsAromatic() and atom.GetSymbol() == "C" else () if atom.GetIsAromatic() else _ATOMS
        for symbol in swaps:
            if symbol != atom.GetSymbol():
                edited = Chem.RWMol(mol)
                edited.GetAtomWithIdx(index).SetAtomicNum(numbers[symbol])
                edited.GetAtomWithIdx(index).SetNoImplicit(False)
                edited.GetAtomWithIdx(index).SetNumExplicitHs(0)
                yield Chem.MolToSmiles(edited)
        if atom.GetTotalNumHs() > 0:
            for symbol in _SUBSTITUENTS:
                edited = Chem.RWMol(mol)
                new = edited.AddAtom(Chem.Atom(numbers[symbol]))
                edited.AddBond(index, new, Chem.BondType.SINGLE)
                yield Chem.MolToSmiles(edited)
        if atom.GetDegree() == 1 and mol.GetNumHeavyAtoms() > 2:
            edited = Chem.RWMol(mol)
            edited.RemoveAtom(index)
            yield Chem.MolToSmiles(edited)
    for bond in mol.GetBonds():
        a, b = bond.GetBeginAtom(), bond.GetEndAtom()
        if bond.GetBondType() == Chem.BondType.SINGLE and not bond.IsInRing() and a.GetTotalNumHs() and b.GetTotalNumHs():
            edited = Chem.RWMol(mol)
            edited.GetBondWithIdx(bond.GetIdx()).SetBondType(Chem.BondType.DOUBLE)
            yield Chem.MolToSmiles(edited)


def molecule_neighbours(parent: Molecule, space: Any) -> list[Molecule]:
    """Valid, constraint-satisfying molecules one edit from ``parent``, sorted by canonical id.

    Example:
        >>> from types import SimpleNamespace
        >>> space = SimpleNamespace(max_heavy_atoms=4, max_atoms=None, elements=None)
        >>> ids = [m.smiles for m in molecule_neighbours(Molecule.parse("CCO"), space)]
        >>> "CCCO" in ids and "CC=O" in ids and "CO" in ids and "CCN" in ids
        True
    """
    found: dict[str, Molecule] = {}
    for raw in _edits(parent.smiles):
        try:
            molecule = Molecule.parse(raw)
        except InvalidCandidate:
            continue  # an edit that breaks valence: not a molecule
        if molecule.id != parent.id and constraint_error(space, molecule) is None:
            found.setdefault(molecule.id, molecule)
    return [found[key] for key in sorted(found)]


def material_neighbours(parent: Material, space: Any) -> list[Material]:
    """Charge-balanceable compositions one substitution or one stoichiometry step from ``parent``, sorted by id.

    Substitutions stay within the element's periodic-table group (and within ``space.elements`` when given).

    Example:
        >>> from types import SimpleNamespace
        >>> space = SimpleNamespace(max_heavy_atoms=None, max_atoms=6, elements=None)
        >>> ids = [m.id for m in material_neighbours(Material.parse("NaCl"), space)]
        >>> "KCl" in ids and "NaBr" in ids
        True
    """
    from pymatgen.core import Composition, Element

    from simulators.structures import oxidation_state_guesses

    composition = parent.to_composition().reduced_composition
    allowed = set(space.elements) if space.elements else None
    raws: list[str] = []
    for element in composition.elements:
        for z in range(1, 87):
            other = Element.from_Z(z)
            if other != element and other.group == element.group and (allowed is None or other.symbol in allowed) \
                    and other.symbol not in {e.symbol for e in composition.elements} and not other.is_noble_gas:
                raws.append(Composition({other if e == element else e: n for e, n in composition.items()}).formula)
        for step in (-1, 1):
            amounts = {e: n + (step if e == element else 0) for e, n in composition.items()}
            if all(n > 0 for n in amounts.values()):
                raws.append(Composition(amounts).formula)
    found: dict[str, Material] = {}
    for raw in raws:
        try:
            material = Material.parse(raw.replace(" ", ""))
        except InvalidCandidate:
            continue
        if material.id == parent.id or constraint_error(space, material) is not None:
            continue
        if not oxidation_state_guesses(material.to_composition().reduced_composition):  # oxi_state_guesses(max_sites=-1)
            continue  # no charge-balanced assignment of common oxidation states
        found.setdefault(material.id, material)
    return [found[key] for key in sorted(found)]


def neighbours(parents: Sequence[Any], space: Any, *, n: int, known: set[str], seed: int) -> list[Any]:
    """Up to ``n`` new candidates near ``parents`` (best first), none of them in ``known``.

    Each parent contributes in turn (round robin), in an order drawn from ``seed``, so the best parents get their
    share and the same inputs always give the same neighbours.
    """
    rng = np.random.default_rng(seed)
    lists = []
    for parent in parents:
        found = molecule_neighbours(parent, space) if parent.type == "molecule" else material_neighbours(parent, space)
        fresh = [c for c in found if c.id not in known]
        lists.append([fresh[i] for i in rng.permutation(len(fresh))])
    out: list[Any] = []
    taken: set[str] = set()
    depth = 0
    while len(out) < n and any(depth < len(lst) for lst in lists):
        for lst in lists:
            if depth < len(lst) and lst[depth].id not in taken and len(out) < n:
                out.append(lst[depth])
                taken.add(lst[depth].id)
        depth += 1
    return out
