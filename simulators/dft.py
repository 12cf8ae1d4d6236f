"""Rung 3 for molecules: a B3LYP/def2-SVP single point with density fitting (pyscf), for small molecules only.

It runs on the lowest MMFF94 conformer from ``simulators.geometry``, the same geometry as the xtb rung. pyscf is an
optional dependency (``pip install "closedloop[dft]"``) imported inside the functions; it costs seconds to import.
"""

from __future__ import annotations

import numpy as np

from simulators.base import AnyCandidate, BaseSimulator
from simulators.geometry import (
    DEFAULT_SEED,
    HARTREE_TO_EV,
    Geometry,
    check_quantum_parameters,
    heavy_atom_count,
    homo_lumo_gap_hartree,
    lowest_mmff_conformer,
    rung_version,
)
from vocabulary.domain import SimulationFailed, import_optional

__all__ = ["DFTSimulator", "b3lyp_single_point"]

FUNCTIONAL = "b3lyp"  # pyscf's B3LYP is libxc's HYB_GGA_XC_B3LYP, with VWN-RPA as in Gaussian
BASIS = "def2-svp"
AUXBASIS = "def2-universal-jkfit"  # Weigend's JK-fitting basis, what pyscf picks for def2-SVP with a hybrid

# Cost per molecule = INTERCEPT_S + PER_HEAVY_ATOM_SQUARED_S * n_heavy_atoms**2, in seconds, at the default
# parameters (grid level 1), conformer search included. Measured on water, methane, methanol, ethanol, acetone,
# butane, benzene, phenol, toluene, naphthalene and isobutylbenzene (1..10 heavy atoms): CPU seconds
# (time.process_time; the shared machine was loaded) of one single-candidate evaluate() call each with the geometry
# cache cleared; 1 AMD EPYC core, OMP_NUM_THREADS=1, pyscf 2.14.0. 10 heavy atoms took 18 s (naphthalene) and 27 s
# (isobutylbenzene). The intercept is the median of the one-heavy-atom molecules and the slope a least-squares fit in
# n_heavy_atoms**2 (R² 0.91); about 30 s at the default cap of 12 heavy atoms. See DECISIONS.md.
INTERCEPT_S = 0.25
PER_HEAVY_ATOM_SQUARED_S = 0.21

_VERSION = "1"


class DFTSimulator(BaseSimulator):
    """B3LYP/def2-SVP energy, gap and dipole of the lowest MMFF94 conformer (gas phase, density fitting).

    Properties: ``energy_hartree`` (total electronic energy, Hartree), ``homo_lumo_gap_ev`` (Kohn-Sham gap, eV) and
    ``dipole_debye`` (magnitude of the dipole about the origin, Debye; origin-dependent for ions). Closed shells
    run restricted (RKS), radicals unrestricted (UKS) with rdkit's radical electrons as the spin.

    Args:
        max_heavy_atoms: molecules with more heavy atoms fail at once, without running (and cost nothing).
        grid_level: pyscf's DFT integration grid level, 0..9. Level 1 is the default: on ethanol and
            isobutylbenzene it moves the energy by about 1e-5 Hartree from level 3 at a third of the cost.
        max_iterations: SCF cycle limit; a non-converged SCF is a failed observation.
        n_conformers, seed: the MMFF conformer search that picks the geometry (see ``ConformerSimulator``).

    Example (a molecule over the cap is refused without running; a real single point takes seconds):
        >>> from vocabulary.domain import Molecule
        >>> [obs] = DFTSimulator().evaluate([Molecule.parse("CCCCc1cccc2ccccc12")])
        >>> obs.status, obs.cost_s, obs.reason
        ('failed', 0.0, "'CCCCc1cccc2ccccc12' is too large for the dft rung (14 heavy atoms > 12); raise \
max_heavy_atoms or stop at xtb")
    """

    name = "dft"
    fidelity = 3
    implemented_properties = ("energy_hartree", "homo_lumo_gap_ev", "dipole_debye")
    applies_to = frozenset({"molecule"})
    requires = (("pyscf", "dft"),)

    def __init__(
        self,
        max_heavy_atoms: int = 12,
        grid_level: int = 1,
        max_iterations: int = 50,
        n_conformers: int = 10,
        seed: int = DEFAULT_SEED,
    ) -> None:
        problems = []
        if isinstance(max_heavy_atoms, bool) or not isinstance(max_heavy_atoms, int) or max_heavy_atoms < 1:
            problems.append(f"{max_heavy_atoms=} must be a positive int")
        if isinstance(grid_level, bool) or not isinstance(grid_level, int) or not 0 <= grid_level <= 9:
            problems.append(f"{grid_level=} must be an int in 0..9 (pyscf's grids.level)")
        if isinstance(max_iterations, bool) or not isinstance(max_iterations, int) or max_iterations < 1:
            problems.append(f"{max_iterations=} must be a positive int (pyscf's default is 50)")
        check_quantum_parameters("dft", problems, n_conformers=n_conformers, seed=seed)
        self.version = rung_version(_VERSION, "pyscf")
        super().__init__(
            {
                "max_heavy_atoms": max_heavy_atoms,
                "grid_level": grid_level,
                "max_iterations": max_iterations,
                "n_conformers": n_conformers,
                "seed": seed,
            }
        )

    def cost_model(self, candidate: AnyCandidate) -> float:
        """Seconds for one molecule at the default grid: quadratic in heavy atoms; 0 above ``max_heavy_atoms``."""
        n_heavy_atoms = heavy_atom_count(candidate)
        if n_heavy_atoms > self.parameters["max_heavy_atoms"]:
            return 0.0  # refused before anything runs
        return INTERCEPT_S + PER_HEAVY_ATOM_SQUARED_S * n_heavy_atoms**2

    def calculate(self, candidate: AnyCandidate) -> dict[str, float]:
        """One DFT single point; ``SimulationFailed`` for a molecule over the size cap or a failed SCF."""
        p = self.parameters
        n_heavy_atoms = heavy_atom_count(candidate)
        if n_heavy_atoms > p["max_heavy_atoms"]:
            raise SimulationFailed(
                f"{candidate.smiles!r} is too large for the dft rung ({n_heavy_atoms} heavy atoms > "
                f"{p['max_heavy_atoms']}); raise max_heavy_atoms or stop at xtb"
            )
        geometry = lowest_mmff_conformer(candidate, n_conformers=p["n_conformers"], seed=p["seed"])
        return b3lyp_single_point(geometry, grid_level=p["grid_level"], max_iterations=p["max_iterations"])


def b3lyp_single_point(geometry: Geometry, *, grid_level: int = 1, max_iterations: int = 50) -> dict[str, float]:
    """B3LYP/def2-SVP with density fitting on one geometry (Å): ``energy_hartree``, ``homo_lumo_gap_ev``,
    ``dipole_debye``.

    Raises:
        SimulationFailed: pyscf rejected the structure or the SCF did not converge within ``max_iterations``.
    """
    import_optional("pyscf", "dft", "the dft rung")
    from pyscf import dft, gto

    try:
        mol = gto.M(
            atom=list(zip(geometry.elements, geometry.coordinates, strict=True)),
            unit="Angstrom",
            basis=BASIS,
            ecp=_def2_ecp(geometry),
            charge=geometry.charge,
            spin=geometry.n_unpaired_electrons,
            verbose=0,
        )
        mf = (dft.RKS(mol) if mol.spin == 0 else dft.UKS(mol)).density_fit(auxbasis=AUXBASIS)
        mf.xc = FUNCTIONAL
        mf.grids.level = grid_level
        mf.max_cycle = max_iterations
        mf.verbose = 0
        energy = mf.kernel()
        converged = bool(mf.converged)
    except Exception as exc:  # pyscf raises RuntimeError, ValueError, KeyError… for inputs it cannot handle
        raise SimulationFailed(f"B3LYP/def2-SVP could not run: {type(exc).__name__}: {exc}") from exc
    if not converged:
        raise SimulationFailed(f"B3LYP/def2-SVP SCF did not converge in {max_iterations} cycles; raise max_iterations")
    dipole = mf.dip_moment(unit="Debye", verbose=0)
    return {
        "energy_hartree": float(energy),
        "homo_lumo_gap_ev": homo_lumo_gap_hartree(mf.mo_energy, mf.mo_occ) * HARTREE_TO_EV,
        "dipole_debye": float(np.linalg.norm(dipole)),
    }


def _def2_ecp(geometry: Geometry) -> dict[str, str]:
    # def2 has effective core potentials only beyond Kr (iodine, tin, …); pyscf warns if asked for lighter elements
    heavy = {symbol for symbol, z in zip(geometry.elements, geometry.atomic_numbers, strict=True) if z > 36}
    return {symbol: BASIS for symbol in sorted(heavy)}
