"""Rung 1 for materials: the best ionic prototype structure, ranked by Ewald energy, in tens of milliseconds.

The structures come from ``simulators.structures``, which the CHGNet rung shares.
"""

from __future__ import annotations

from simulators.base import AnyCandidate, BaseSimulator
from simulators.structures import PROTOTYPES, bond_valence_misfit, prototype_fits
from vocabulary.domain import Material

__all__ = ["PROTOTYPES", "PrototypeSimulator"]

# Cost per formula = INTERCEPT_S + PER_ATOM_S * n_atoms (atoms in the formula as written), in seconds. Measured with
# simulators.costing.measure_linear_cost over the 81 band-gap formulas the rung places plus 13 textbook ones (2-16
# atoms), median of 5 calls each; three fits gave a = 0.55-1.14 ms and b = 0.65-0.86 ms/atom (R² 0.39-0.49), on a
# shared 2-core machine, OMP_NUM_THREADS=1, pymatgen 2026.10. See DECISIONS.md.
INTERCEPT_S = 9.0e-4
PER_ATOM_S = 7.5e-4

_VERSION = "2"  # 2: Eu compounds and pnictide anions are placed (cached failures of version 1 are stale)


class PrototypeSimulator(BaseSimulator):
    """Place a composition in every matching crystal prototype and keep the one with the lowest Ewald energy.

    Properties:
        ``ewald_energy_per_atom_ev``: point-charge Ewald energy of the best structure, eV/atom (negative).
        ``best_prototype_index``: index of the best prototype in ``PROTOTYPES`` (observations carry only floats;
        ``PROTOTYPES`` is append-only, so an index keeps its meaning).
        ``volume_per_atom_a3``: volume of the best structure at Shannon-radius contact, Å³/atom.
        ``n_matching_prototypes``: how many prototypes fit the stoichiometry.
        ``bond_valence_misfit``: global instability index of the best structure at its best isotropic scale, in
        valence units; omitted when bond-valence parameters do not cover the elements.

    The structures, oxidation states and radii rules are described in ``simulators.structures``. A composition
    with no matching prototype, or with no charge-balanced oxidation states in which its most electronegative
    element is the only anion, comes back failed with the reason.

    Example:
        >>> from vocabulary.domain import Material
        >>> [obs] = PrototypeSimulator().evaluate([Material.parse("CaTiO3")])
        >>> PROTOTYPES[int(obs.properties["best_prototype_index"])], obs.properties["ewald_energy_per_atom_ev"] < 0
        ('perovskite', True)
    """

    name = "prototype"
    fidelity = 1
    implemented_properties = (
        "ewald_energy_per_atom_ev",
        "best_prototype_index",
        "volume_per_atom_a3",
        "n_matching_prototypes",
        "bond_valence_misfit",
    )
    applies_to = frozenset({"material"})

    def __init__(self) -> None:
        from pymatgen.core import __version__ as pymatgen_version

        self.version = f"{_VERSION}+pymatgen{pymatgen_version}"
        super().__init__({})

    def cost_model(self, candidate: AnyCandidate) -> float:
        """Seconds for one formula: a linear fit in atoms of the formula, measured on the reference machine."""
        try:
            n_atoms = candidate.n_atoms if isinstance(candidate, Material) else 0
        except Exception:  # a corrupted formula is still charged; calculate reports why it failed
            n_atoms = 0
        return INTERCEPT_S + PER_ATOM_S * n_atoms

    def calculate(self, candidate: AnyCandidate) -> dict[str, float]:
        """The best prototype of one material; ``SimulationFailed`` when none fits."""
        fits = prototype_fits(candidate)
        best = fits[0]
        properties = {
            "ewald_energy_per_atom_ev": best.ewald_energy_per_atom_ev,
            "best_prototype_index": float(best.prototype_index),
            "volume_per_atom_a3": best.volume_per_atom_a3,
            "n_matching_prototypes": float(len({fit.prototype for fit in fits})),
        }
        misfit = bond_valence_misfit(best.structure)
        if misfit is not None:
            properties["bond_valence_misfit"] = misfit
        return properties
