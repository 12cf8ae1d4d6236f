"""Rung 1 for molecules: an ETKDGv3 conformer ensemble optimised with MMFF94, in tens of milliseconds.

The ensemble itself is built by ``simulators.geometry``; the xtb and dft rungs reuse its lowest conformer.
rdkit is imported inside the functions, so ``import simulators`` stays fast.
"""

from __future__ import annotations

import numpy as np

from simulators.base import AnyCandidate, BaseSimulator
from simulators.geometry import (
    DEFAULT_SEED,
    Geometry,
    check_conformer_parameters,
    mmff_conformer_ensemble,
)
from vocabulary.domain import Molecule, SetupError

__all__ = ["ConformerSimulator", "conformer_cost_s", "radius_of_gyration"]

# Cost per molecule = (INTERCEPT_S + PER_HEAVY_ATOM_SQUARED_S * n_heavy_atoms**2) * n_conformers / 10, in seconds.
# Measured on the first 100 molecules of /work/shared/data/freesolv/FreeSolv_gauche.csv (1..20 heavy atoms) with the
# default parameters: CPU seconds (time.process_time; the shared machine was loaded) of single-candidate evaluate()
# calls, median of 3 per molecule, the geometry cache cleared before each call so that every call pays for its
# embedding; 1 AMD EPYC core, OMP_NUM_THREADS=1, rdkit 2026.09.1. The cost grows faster than linearly (flexible
# chains need more embedding and MMFF work; a free linear fit has a negative intercept), so the intercept is the
# median of the 1..3-heavy-atom molecules (4.4 ms) and the slope a least-squares fit in n_heavy_atoms**2 (R² 0.51).
# Embedding and MMFF scale with the number of attempts, hence the n_conformers / 10. See DECISIONS.md.
INTERCEPT_S = 4.4e-3
PER_HEAVY_ATOM_SQUARED_S = 5.5e-4

_VERSION = "1"


class ConformerSimulator(BaseSimulator):
    """MMFF94 energies and shape of an ETKDGv3 conformer ensemble.

    Properties: ``mmff_energy_min`` (MMFF94 energy of the lowest converged conformer, kcal/mol),
    ``mmff_energy_spread`` (highest minus lowest converged conformer, kcal/mol; 0 for a single conformer),
    ``n_conformers`` (conformers whose MMFF optimisation converged, after RMS pruning of the embedded ones) and
    ``radius_of_gyration`` (mass-weighted, all atoms including hydrogens, of the lowest conformer, Å).

    MMFF94 energies are force-field energies: compare them between conformers of one molecule, not between
    molecules.

    Args:
        n_conformers: conformers to embed before pruning.
        seed: ETKDG random seed; the ensemble is deterministic for a given seed.
        prune_rms_threshold: heavy-atom RMSD (Å) under which embedded conformers are duplicates (<= 0 keeps all).
        max_iterations: MMFF94 optimisation steps per conformer.

    Embedding failure, missing MMFF94 parameters (boron, metals, …) or no converged conformer give a failed
    observation whose reason says which.

    Example:
        >>> from vocabulary.domain import Molecule
        >>> [obs] = ConformerSimulator().evaluate([Molecule.parse("CCO")])
        >>> obs.status, obs.properties["n_conformers"], round(obs.properties["radius_of_gyration"], 1)
        ('ok', 1.0, 1.2)
    """

    name = "conformers"
    fidelity = 1
    implemented_properties = ("mmff_energy_min", "mmff_energy_spread", "n_conformers", "radius_of_gyration")
    applies_to = frozenset({"molecule"})

    def __init__(
        self,
        n_conformers: int = 10,
        seed: int = DEFAULT_SEED,
        prune_rms_threshold: float = 0.5,
        max_iterations: int = 2000,
    ) -> None:
        import rdkit

        try:
            check_conformer_parameters(n_conformers, seed, prune_rms_threshold, max_iterations)
        except ValueError as exc:
            raise SetupError(f"simulator 'conformers': {exc}") from exc
        self.version = f"{_VERSION}+rdkit{rdkit.__version__}"
        super().__init__(
            {
                "n_conformers": n_conformers,
                "seed": seed,
                "prune_rms_threshold": float(prune_rms_threshold),
                "max_iterations": max_iterations,
            }
        )

    def cost_model(self, candidate: AnyCandidate) -> float:
        """Seconds for one molecule: quadratic in heavy atoms, proportional to ``n_conformers``."""
        return conformer_cost_s(candidate, self.parameters["n_conformers"])

    def calculate(self, candidate: AnyCandidate) -> dict[str, float]:
        """Ensemble properties of one molecule; ``SimulationFailed`` when no conformer can be built."""
        ensemble = mmff_conformer_ensemble(candidate, **self.parameters)
        return {
            "mmff_energy_min": ensemble.lowest_energy,
            "mmff_energy_spread": max(ensemble.energies) - min(ensemble.energies),
            "n_conformers": len(ensemble.energies),
            "radius_of_gyration": radius_of_gyration(ensemble.lowest),
        }


def conformer_cost_s(candidate: AnyCandidate, n_conformers: int = 10) -> float:
    """Measured seconds to build the MMFF conformer ensemble of ``candidate``; the xtb and dft rungs add it too."""
    mol = candidate.to_rdkit() if isinstance(candidate, Molecule) else None
    n_heavy_atoms = mol.GetNumHeavyAtoms() if mol is not None else 0
    return (INTERCEPT_S + PER_HEAVY_ATOM_SQUARED_S * n_heavy_atoms**2) * n_conformers / 10


def radius_of_gyration(geometry: Geometry) -> float:
    """Mass-weighted radius of gyration over all atoms, in Å.

    Example:
        >>> round(radius_of_gyration(Geometry(("H", "H"), ((0.0, 0.0, 0.0), (0.74, 0.0, 0.0)))), 2)
        0.37
    """
    from rdkit import Chem

    table = Chem.GetPeriodicTable()
    masses = np.asarray([table.GetAtomicWeight(symbol) for symbol in geometry.elements])
    positions = geometry.positions
    centre = masses @ positions / masses.sum()
    return float(np.sqrt(masses @ ((positions - centre) ** 2).sum(axis=1) / masses.sum()))
