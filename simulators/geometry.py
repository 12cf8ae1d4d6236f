"""3D structures for the molecule rungs, plus the few helpers the quantum rungs share (units, HOMO-LUMO gap).

``mmff_conformer_ensemble`` embeds ETKDGv3 conformers and optimises them with MMFF94; the conformer rung reports on
the whole ensemble, and the xtb and dft rungs run single points on its lowest member (``lowest_mmff_conformer``),
so every rung above rdkit descriptors sees the same geometry for the same parameters. Everything is deterministic:
ETKDG is seeded and single-threaded, and MMFF runs on one thread.

rdkit is imported inside the functions, so importing this module stays light.

Example:
    >>> from vocabulary.domain import Molecule
    >>> water = lowest_mmff_conformer(Molecule.parse("O"))
    >>> water.elements, water.charge, water.n_unpaired_electrons
    (('O', 'H', 'H'), 0, 0)
    >>> round(float(np.linalg.norm(water.positions[1] - water.positions[0])), 2)  # O-H bond, Å
    0.97
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from vocabulary.domain import Molecule, SetupError, SimulationFailed

__all__ = [
    "BOHR_TO_ANGSTROM",
    "DEFAULT_SEED",
    "E_BOHR_TO_DEBYE",
    "HARTREE_TO_EV",
    "HARTREE_TO_KCAL_MOL",
    "ConformerEnsemble",
    "Geometry",
    "check_conformer_parameters",
    "check_quantum_parameters",
    "heavy_atom_count",
    "homo_lumo_gap_hartree",
    "lowest_mmff_conformer",
    "mmff_conformer_ensemble",
    "rung_version",
]

DEFAULT_SEED = 0xF00D
"""ETKDG random seed shared by every molecule rung, so they all see the same conformers."""

HARTREE_TO_KCAL_MOL = 627.509474
HARTREE_TO_EV = 27.211386246
BOHR_TO_ANGSTROM = 0.529177210903
E_BOHR_TO_DEBYE = 2.541746473


@dataclass(frozen=True)
class Geometry:
    """One 3D structure with what a quantum-chemistry code needs.

    ``elements`` are symbols including explicit hydrogens; ``coordinates`` are Cartesian, in Å, one (x, y, z) per
    atom; ``charge`` is the total formal charge (e); ``n_unpaired_electrons`` counts rdkit's radical electrons.
    """

    elements: tuple[str, ...]
    coordinates: tuple[tuple[float, float, float], ...]
    charge: int = 0
    n_unpaired_electrons: int = 0

    @property
    def positions(self) -> np.ndarray:
        """Coordinates as a fresh array of shape (n_atoms, 3), in Å."""
        return np.asarray(self.coordinates, dtype=float).reshape(-1, 3)

    @property
    def atomic_numbers(self) -> np.ndarray:
        """Atomic numbers, shape (n_atoms,)."""
        from rdkit import Chem

        table = Chem.GetPeriodicTable()
        return np.asarray([table.GetAtomicNumber(symbol) for symbol in self.elements], dtype=int)

    @property
    def n_heavy_atoms(self) -> int:
        return sum(symbol != "H" for symbol in self.elements)


@dataclass(frozen=True)
class ConformerEnsemble:
    """MMFF94-optimised ETKDGv3 conformers of one molecule.

    ``energies`` holds the MMFF94 energy (kcal/mol) of each conformer whose optimisation converged, in embedding
    order; ``geometries`` the matching structures. ``n_embedded`` counts the conformers ETKDG produced after
    RMS pruning, converged or not.
    """

    energies: tuple[float, ...]
    geometries: tuple[Geometry, ...]
    n_embedded: int

    @property
    def lowest_index(self) -> int:
        return int(np.argmin(self.energies))

    @property
    def lowest(self) -> Geometry:
        """The lowest-energy converged conformer."""
        return self.geometries[self.lowest_index]

    @property
    def lowest_energy(self) -> float:
        return self.energies[self.lowest_index]


def check_conformer_parameters(n_conformers: int, seed: int, prune_rms_threshold: float, max_iterations: int) -> None:
    """Raise ``ValueError`` naming the fix for parameters ETKDG or MMFF cannot use."""
    if isinstance(n_conformers, bool) or not isinstance(n_conformers, int) or not 1 <= n_conformers <= 1000:
        raise ValueError(f"{n_conformers=} must be an int in 1..1000")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**31:
        raise ValueError(f"{seed=} must be an int in 0..2**31-1 (rdkit's randomSeed)")
    if isinstance(prune_rms_threshold, bool) or not isinstance(prune_rms_threshold, (int, float)):
        raise ValueError(f"{prune_rms_threshold=} must be a number of Å (<= 0 keeps every conformer)")
    if isinstance(max_iterations, bool) or not isinstance(max_iterations, int) or max_iterations < 1:
        raise ValueError(f"{max_iterations=} must be a positive int")



def check_quantum_parameters(simulator: str, problems: list[str], *, n_conformers: int, seed: int) -> None:
    """Raise one ``SetupError`` naming every problem of a quantum rung's parameters: ``problems`` found by the rung,
    then those of the conformer search its single points run on.

    Example:
        >>> check_quantum_parameters("xtb", ["accuracy=0 is too low"], n_conformers=0, seed=1)
        Traceback (most recent call last):
        ...
        vocabulary.domain.SetupError: simulator 'xtb': accuracy=0 is too low; n_conformers=0 must be an int in 1..1000
    """
    try:
        check_conformer_parameters(n_conformers, seed, prune_rms_threshold=0.5, max_iterations=2000)
    except ValueError as exc:
        problems = [*problems, str(exc)]
    if problems:
        raise SetupError(f"simulator {simulator!r}: " + "; ".join(problems))


def rung_version(version: str, distribution: str) -> str:
    """A quantum rung's version: its own, the installed version of the code it runs (``missing`` when it is not
    installed) and rdkit's, since the MMFF geometry can move between rdkit releases: ``"1+pyscf2.14.0+rdkit2025.3.6"``.
    """
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed_version

    import rdkit

    try:
        code = installed_version(distribution)
    except PackageNotFoundError:
        code = "missing"
    return f"{version}+{distribution}{code}+rdkit{rdkit.__version__}"


def heavy_atom_count(candidate: Any) -> int:
    """Heavy atoms of a molecule candidate; 0 for another kind of candidate or a molecule rdkit cannot read."""
    mol = candidate.to_rdkit() if isinstance(candidate, Molecule) else None
    return mol.GetNumHeavyAtoms() if mol is not None else 0

def mmff_conformer_ensemble(
    molecule: Molecule,
    *,
    n_conformers: int = 10,
    seed: int = DEFAULT_SEED,
    prune_rms_threshold: float = 0.5,
    max_iterations: int = 2000,
) -> ConformerEnsemble:
    """Embed up to ``n_conformers`` ETKDGv3 conformers and optimise each with MMFF94.

    Args:
        molecule: the molecule; hydrogens are added.
        n_conformers: conformers to embed before pruning.
        seed: ETKDG ``randomSeed``; with one thread the ensemble is reproducible.
        prune_rms_threshold: heavy-atom RMSD (Å) below which embedded conformers count as duplicates; <= 0 keeps
            all of them.
        max_iterations: MMFF optimisation steps per conformer.

    Raises:
        SimulationFailed: the SMILES cannot be read, ETKDG cannot embed it (even from random coordinates), MMFF94
            has no parameters for it, or no conformer's optimisation converged.
    """
    check_conformer_parameters(n_conformers, seed, prune_rms_threshold, max_iterations)
    return _ensemble(molecule.smiles, n_conformers, seed, float(prune_rms_threshold), max_iterations)


def lowest_mmff_conformer(
    molecule: Molecule,
    *,
    n_conformers: int = 10,
    seed: int = DEFAULT_SEED,
    prune_rms_threshold: float = 0.5,
    max_iterations: int = 2000,
) -> Geometry:
    """The lowest-energy MMFF94 conformer of ``molecule`` (elements and coordinates in Å), deterministically.

    Same arguments and errors as ``mmff_conformer_ensemble``; results are cached per SMILES and arguments.
    """
    return mmff_conformer_ensemble(
        molecule,
        n_conformers=n_conformers,
        seed=seed,
        prune_rms_threshold=prune_rms_threshold,
        max_iterations=max_iterations,
    ).lowest


@lru_cache(maxsize=1024)
def _ensemble(smiles: str, n_conformers: int, seed: int, prune_rms_threshold: float, max_iterations: int):
    # Cached: the conformer, xtb and dft rungs ask for the same ensemble, and the result is immutable.
    from rdkit import Chem, RDLogger
    from rdkit.Chem import AllChem, Descriptors

    RDLogger.DisableLog("rdApp.*")
    mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        raise SimulationFailed(f"rdkit could not read SMILES {smiles!r}; no 3D structure can be built")
    mol = Chem.AddHs(mol)

    conformer_ids = _embed(mol, n_conformers, seed, prune_rms_threshold, use_random_coords=False)
    if not conformer_ids:  # ETKDG's documented fallback for awkward ring systems and cages
        conformer_ids = _embed(mol, n_conformers, seed, prune_rms_threshold, use_random_coords=True)
    if not conformer_ids:
        raise SimulationFailed(
            f"ETKDGv3 could not embed {smiles!r} in 3D ({n_conformers} attempts, also from random coordinates); "
            "check the stereochemistry and ring strain, or try another seed"
        )
    if not AllChem.MMFFHasAllMoleculeParams(mol):
        unusual = sorted({atom.GetSymbol() for atom in mol.GetAtoms()} - _MMFF_COMMON_ELEMENTS)
        hint = f" (it contains {', '.join(unusual)})" if unusual else ""
        raise SimulationFailed(
            f"MMFF94 has no parameters for {smiles!r}{hint}; the conformer rungs cannot optimise it, "
            "use rdkit descriptors only"
        )
    outcomes = AllChem.MMFFOptimizeMoleculeConfs(mol, numThreads=1, maxIters=max_iterations)
    converged = [(cid, energy) for cid, (flag, energy) in zip(conformer_ids, outcomes, strict=True) if flag == 0]
    if not converged:
        raise SimulationFailed(
            f"MMFF94 optimisation of {smiles!r} did not converge for any of {len(conformer_ids)} conformers within "
            f"{max_iterations} steps; raise max_iterations"
        )
    charge = Chem.GetFormalCharge(mol)
    n_unpaired = Descriptors.NumRadicalElectrons(mol)
    elements = tuple(atom.GetSymbol() for atom in mol.GetAtoms())
    geometries = tuple(
        Geometry(elements, _as_coordinates(mol.GetConformer(cid).GetPositions()), charge, n_unpaired)
        for cid, _ in converged
    )
    energies = tuple(float(energy) for _, energy in converged)
    return ConformerEnsemble(energies=energies, geometries=geometries, n_embedded=len(conformer_ids))


def homo_lumo_gap_hartree(orbital_energies: np.ndarray, occupations: np.ndarray) -> float:
    """HOMO-LUMO gap in Hartree, with xtb's convention for open shells (the SOMO counts as the HOMO).

    Takes tblite's arrays: shape (n_orbitals,) with spin-summed occupations, or (2, n_orbitals) per spin.

    Example:
        >>> homo_lumo_gap_hartree(np.array([-0.5, -0.3, 0.1]), np.array([2.0, 1.0, 0.0]))
        0.4
    """
    energies = np.atleast_2d(np.asarray(orbital_energies, dtype=float))
    occupied = np.atleast_2d(np.asarray(occupations, dtype=float))
    spin_summed = occupied.shape[0] == 1  # then ceil(n_electrons / 2) orbitals hold electrons
    homo, lumo = -math.inf, math.inf
    for spin_energies, spin_occupations in zip(energies, occupied, strict=True):
        n_electrons = round(float(spin_occupations.sum()))
        n_filled = math.ceil(n_electrons / 2) if spin_summed else n_electrons
        if n_filled > 0:
            homo = max(homo, spin_energies[n_filled - 1])
        if n_filled < len(spin_energies):
            lumo = min(lumo, spin_energies[n_filled])
    if not (math.isfinite(homo) and math.isfinite(lumo)):
        raise SimulationFailed("the HOMO-LUMO gap is undefined: no occupied or no virtual orbital")
    return float(lumo - homo)


# MMFF94 covers these organic elements; naming the others makes the failure reason useful.
_MMFF_COMMON_ELEMENTS = frozenset({"H", "C", "N", "O", "F", "Si", "P", "S", "Cl", "Br", "I"})


def _embed(mol, n_conformers: int, seed: int, prune_rms_threshold: float, *, use_random_coords: bool) -> list[int]:
    from rdkit.Chem import AllChem

    params = AllChem.ETKDGv3()
    params.randomSeed = seed
    params.numThreads = 1
    params.pruneRmsThresh = prune_rms_threshold
    params.useRandomCoords = use_random_coords
    return list(AllChem.EmbedMultipleConfs(mol, numConfs=n_conformers, params=params))


def _as_coordinates(positions: np.ndarray) -> tuple[tuple[float, float, float], ...]:
    return tuple((float(x), float(y), float(z)) for x, y, z in np.asarray(positions, dtype=float).reshape(-1, 3))
