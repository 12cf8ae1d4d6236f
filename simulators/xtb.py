"""Rung 2 for molecules: GFN2-xTB single points (gas phase and implicit solvent) through tblite.

Both single points run on the lowest MMFF94 conformer from ``simulators.geometry``; there is no xTB geometry
optimisation (DECISIONS.md says why). tblite is an optional dependency (``pip install "closedloop[xtb]"``) imported
inside the functions.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal, get_args

import numpy as np

from simulators.base import AnyCandidate, BaseSimulator
from simulators.conformers import conformer_cost_s
from simulators.geometry import (
    BOHR_TO_ANGSTROM,
    DEFAULT_SEED,
    E_BOHR_TO_DEBYE,
    HARTREE_TO_EV,
    HARTREE_TO_KCAL_MOL,
    Geometry,
    check_quantum_parameters,
    heavy_atom_count,
    homo_lumo_gap_hartree,
    lowest_mmff_conformer,
    rung_version,
)
from vocabulary.domain import SetupError, SimulationFailed, import_optional

__all__ = ["SolvationModel", "XTBSimulator", "gfn2_single_point"]

SolvationModel = Literal["alpb", "gbsa"]


# Cost per molecule = conformer_cost_s(molecule) + INTERCEPT_S + PER_HEAVY_ATOM_SQUARED_S * n_heavy_atoms**2, in
# seconds: the MMFF conformer search (the conformer rung's measured model) plus two GFN2-xTB single points (gas,
# then implicit solvent). The single points were measured on the first 100 molecules of
# /work/shared/data/freesolv/FreeSolv_gauche.csv (1..20 heavy atoms) with their conformers cached: CPU seconds
# (time.process_time; the shared machine was loaded) of single-candidate evaluate() calls, median of 5; 1 AMD EPYC
# core, OMP_NUM_THREADS=1, tblite 0.8.0. A free linear fit has a negative intercept (-35 ms, 7.9 ms/atom), so the
# intercept is the median of the 1..3-heavy-atom molecules and the slope a least-squares fit in n_heavy_atoms**2
# (R² 0.83). Together with the conformers: about 0.1 s at 10 heavy atoms, 0.37 s at 20. See DECISIONS.md.
INTERCEPT_S = 3.8e-3
PER_HEAVY_ATOM_SQUARED_S = 3.6e-4

_VERSION = "1"


class XTBSimulator(BaseSimulator):
    """GFN2-xTB energy, gap, dipole and solvation free energy of the lowest MMFF94 conformer.

    Properties: ``energy_hartree`` (gas-phase GFN2-xTB total energy, Hartree), ``homo_lumo_gap_ev`` (gas phase,
    eV), ``dipole_debye`` (magnitude of the gas-phase dipole, Debye; origin-dependent for ions) and
    ``dg_solv_kcal_mol`` (E(implicit solvent) − E(gas) at the same geometry, kcal/mol; negative means the solvent
    stabilises the molecule). The total charge is rdkit's formal charge and the unpaired electrons are rdkit's
    radical electrons.

    Args:
        solvent: a solvent name tblite knows (``"water"``, ``"octanol"``, ``"hexane"``, …).
        solvation_model: ``"alpb"`` (analytical linearised Poisson-Boltzmann) or ``"gbsa"`` (generalised Born;
            tblite 0.8 has GFN2 GBSA parameters for fewer solvents).
        accuracy: tblite's SCC accuracy multiplier (lower is tighter).
        max_iterations: SCC iteration limit; a non-converged SCC is a failed observation.
        n_conformers, seed: the MMFF conformer search that picks the geometry (see ``ConformerSimulator``).

    Example:
        >>> from vocabulary.domain import Molecule
        >>> [obs] = XTBSimulator().evaluate([Molecule.parse("CCO")])
        >>> obs.status, round(obs.properties["dg_solv_kcal_mol"], 1)
        ('ok', -4.1)
    """

    name = "xtb"
    fidelity = 2
    implemented_properties = ("energy_hartree", "homo_lumo_gap_ev", "dipole_debye", "dg_solv_kcal_mol")
    applies_to = frozenset({"molecule"})
    requires = (("tblite", "xtb"),)

    def __init__(
        self,
        solvent: str = "water",
        solvation_model: SolvationModel = "alpb",
        accuracy: float = 1.0,
        max_iterations: int = 250,
        n_conformers: int = 10,
        seed: int = DEFAULT_SEED,
    ) -> None:
        problems = []
        if not isinstance(solvent, str) or not solvent:
            problems.append(f"{solvent=} must be a solvent name such as 'water'")
        if solvation_model not in get_args(SolvationModel):
            problems.append(f"{solvation_model=} must be one of {list(get_args(SolvationModel))}")
        if isinstance(accuracy, bool) or not isinstance(accuracy, (int, float)) or not 1e-4 <= accuracy <= 1e3:
            problems.append(f"{accuracy=} must be a number in 1e-4..1e3 (tblite's default is 1.0)")
        if isinstance(max_iterations, bool) or not isinstance(max_iterations, int) or max_iterations < 1:
            problems.append(f"{max_iterations=} must be a positive int (tblite's default is 250)")
        check_quantum_parameters("xtb", problems, n_conformers=n_conformers, seed=seed)
        self.version = rung_version(_VERSION, "tblite")
        super().__init__(  # checks that tblite is installed before _check_solvent imports it
            {
                "solvent": solvent,
                "solvation_model": solvation_model,
                "accuracy": float(accuracy),  # 1 and 1.0 are one cache key
                "max_iterations": max_iterations,
                "n_conformers": n_conformers,
                "seed": seed,
            }
        )
        _check_solvent(solvent, solvation_model)

    def cost_model(self, candidate: AnyCandidate) -> float:
        """Seconds for one molecule: its conformer search plus two single points, quadratic in heavy atoms."""
        n_heavy_atoms = heavy_atom_count(candidate)
        single_points = INTERCEPT_S + PER_HEAVY_ATOM_SQUARED_S * n_heavy_atoms**2
        return conformer_cost_s(candidate, self.parameters["n_conformers"]) + single_points

    def calculate(self, candidate: AnyCandidate) -> dict[str, float]:
        """Two single points on the lowest MMFF conformer; ``SimulationFailed`` names the step that failed."""
        p = self.parameters
        geometry = lowest_mmff_conformer(candidate, n_conformers=p["n_conformers"], seed=p["seed"])
        settings = dict(accuracy=p["accuracy"], max_iterations=p["max_iterations"])
        gas = gfn2_single_point(geometry, **settings)
        solvated = gfn2_single_point(geometry, solvation=(p["solvation_model"], p["solvent"]), **settings)
        energy_gas, energy_solvated = float(gas.get("energy")), float(solvated.get("energy"))
        return {
            "energy_hartree": energy_gas,
            "homo_lumo_gap_ev": homo_lumo_gap_hartree(gas.get("orbital-energies"), gas.get("orbital-occupations"))
            * HARTREE_TO_EV,
            "dipole_debye": float(np.linalg.norm(gas.get("dipole"))) * E_BOHR_TO_DEBYE,
            "dg_solv_kcal_mol": (energy_solvated - energy_gas) * HARTREE_TO_KCAL_MOL,
        }


def gfn2_single_point(
    geometry: Geometry,
    *,
    solvation: tuple[SolvationModel, str] | None = None,
    accuracy: float = 1.0,
    max_iterations: int = 250,
):
    """One GFN2-xTB single point; returns tblite's ``Result`` (atomic units).

    Args:
        geometry: the structure (Å), its charge and unpaired electrons.
        solvation: ``(model, solvent)``, e.g. ``("alpb", "water")``; None for the gas phase.
        accuracy, max_iterations: tblite's SCC settings.

    Raises:
        SimulationFailed: tblite rejected the input or the SCC did not converge; the reason says which phase.
    """
    import_optional("tblite", "xtb", "the xtb rung")
    from tblite.exceptions import TBLiteRuntimeError, TBLiteValueError
    from tblite.interface import Calculator

    phase = "gas phase" if solvation is None else f"{solvation[0].upper()} {solvation[1]}"
    try:
        calculator = Calculator(
            "GFN2-xTB",
            geometry.atomic_numbers,
            geometry.positions / BOHR_TO_ANGSTROM,
            charge=float(geometry.charge),
            uhf=geometry.n_unpaired_electrons,
        )
        calculator.set("verbosity", 0)
        calculator.set("accuracy", float(accuracy))
        calculator.set("max-iter", int(max_iterations))
        if solvation is not None:
            calculator.add(f"{solvation[0]}-solvation", solvation[1])
        return calculator.singlepoint()
    except (TBLiteRuntimeError, TBLiteValueError) as exc:
        hint = "; raise max_iterations or loosen accuracy" if "converge" in str(exc).lower() else ""
        raise SimulationFailed(f"GFN2-xTB ({phase}) failed: {exc}{hint}") from exc


@lru_cache(maxsize=64)
def _check_solvent(solvent: str, solvation_model: str) -> None:
    """Raise ``SetupError`` now, not per molecule, when tblite has no parameters for the solvent."""
    import_optional("tblite", "xtb", "the xtb rung")
    from tblite.exceptions import TBLiteRuntimeError, TBLiteValueError
    from tblite.interface import Calculator

    h2 = Calculator("GFN2-xTB", np.array([1, 1]), np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 1.4]]))
    h2.set("verbosity", 0)
    try:
        h2.add(f"{solvation_model}-solvation", solvent)
    except (TBLiteRuntimeError, TBLiteValueError) as exc:
        also = " or solvation_model='alpb', which covers more solvents than 'gbsa'" if solvation_model == "gbsa" else ""
        raise SetupError(
            f"simulator 'xtb': tblite has no GFN2 {solvation_model.upper()} parameters for {solvent=} ({exc}); "
            f"use a named solvent such as 'water', 'octanol' or 'hexane'{also}"
        ) from exc
