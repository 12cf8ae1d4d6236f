"""Rung 0 for materials: composition heuristics from pymatgen, in about a millisecond per formula.

pymatgen is imported inside the methods, so ``import simulators`` stays fast.
"""

from __future__ import annotations

import math
from typing import Any

from simulators.base import AnyCandidate, BaseSimulator
from simulators.structures import (
    integer_composition,
    oxidation_state_guesses,
    quiet_electronegativity,
)
from vocabulary.domain import Material, SetupError, SimulationFailed

__all__ = ["CompositionSimulator"]

# Cost per formula = INTERCEPT_S + PER_ATOM_SQUARED_S * n_atoms**2 (atoms in the formula as written), in seconds.
# Quadratic, not linear, because oxi_state_guesses enumerates combinations: over the 486 band-gap formulas of up to
# 40 atoms (/work/shared/data/bandgap_expt_vs_pbe) the mean cost is 1 ms up to 5 atoms, 6 ms at 9-12, 36 ms at
# 13-20 and 0.1-0.25 s above 20, with a long tail (seconds for a few 25-atom sulfides). The intercept is the
# median below 5 atoms; the n² coefficient is a least-squares fit of the rest; the model charges 18.6 s for the
# 486 formulas that took 15.3 s. See DECISIONS.md.
INTERCEPT_S = 5.0e-4
PER_ATOM_SQUARED_S = 2.3e-4

DEFAULT_MAX_SITES = 40
"""Largest reduced formula (in atoms) whose oxidation states are enumerated; the enumeration is combinatorial."""

# Radioactive elements a normal lab cannot handle: pymatgen's is_radioactive (Tc, Pm, Z >= 84) minus Th and U,
# which are primordial, long-lived and common in materials databases.
_HANDLEABLE_RADIOACTIVE = frozenset({"Th", "U"})

_VERSION = "1"


class CompositionSimulator(BaseSimulator):
    """Cheap chemistry of a composition, without a structure.

    Properties:
        ``is_charge_balanced``: 1.0 if pymatgen's ``oxi_state_guesses`` (ICSD oxidation states) finds at least one
        charge-neutral assignment, else 0.0. A single element counts as balanced (oxidation state 0).
        ``n_oxidation_state_solutions``: how many distinct assignments it finds.
        ``n_elements``, ``n_atoms_reduced`` (atoms in the reduced whole-number formula; ``Li0.5CoO2`` -> 7).
        ``mean_electronegativity`` (atomic-fraction-weighted Pauling), ``electronegativity_spread`` (max - min),
        ``max_ionic_character`` (Pauling, 1 - exp(-spread²/4), 0..1). He, Ne and Ar have no Pauling value and are
        left out of these three, which are omitted when no element has a value.
        ``fraction_metal`` and ``fraction_transition_metal``: atomic fractions, 0..1.
        ``has_noble_gas``; ``has_radioactive_element``: Tc, Pm or Z >= 84 other than Th and U. Both 1.0 or 0.0.

    A charge-imbalanced composition is a valid result (``is_charge_balanced`` = 0). Failed observations are for a
    formula that cannot be read, amounts that are not small whole-number ratios, or a reduced formula larger than
    ``max_sites`` atoms, where the oxidation-state enumeration would take seconds or more.

    Args:
        max_sites: the largest reduced formula, in atoms, to enumerate oxidation states for.

    Example:
        >>> from vocabulary.domain import Material
        >>> sim = CompositionSimulator()
        >>> [(o.properties["is_charge_balanced"], o.properties["electronegativity_spread"])
        ...  for o in sim.evaluate([Material.parse("NaCl"), Material.parse("NaCl2")])]
        [(1.0, 2.23), (0.0, 2.23)]
    """

    name = "composition"
    fidelity = 0
    implemented_properties = (
        "is_charge_balanced",
        "n_oxidation_state_solutions",
        "n_elements",
        "n_atoms_reduced",
        "mean_electronegativity",
        "electronegativity_spread",
        "max_ionic_character",
        "fraction_metal",
        "fraction_transition_metal",
        "has_noble_gas",
        "has_radioactive_element",
    )
    applies_to = frozenset({"material"})

    def __init__(self, max_sites: int = DEFAULT_MAX_SITES) -> None:
        from pymatgen.core import __version__ as pymatgen_version

        if isinstance(max_sites, bool) or not isinstance(max_sites, int) or max_sites < 1:
            raise SetupError(f"{max_sites=} must be a positive whole number of atoms, e.g. {DEFAULT_MAX_SITES}")
        self.max_sites = max_sites
        self.version = f"{_VERSION}+pymatgen{pymatgen_version}"
        super().__init__({"max_sites": max_sites})

    def cost_model(self, candidate: AnyCandidate) -> float:
        """Seconds for one formula: quadratic in atoms of the formula, measured on the reference machine."""
        return INTERCEPT_S + PER_ATOM_SQUARED_S * _n_atoms(candidate) ** 2

    def calculate(self, candidate: AnyCandidate) -> dict[str, Any]:
        """Composition heuristics of one material; ``SimulationFailed`` if the formula cannot be analysed."""
        with quiet_electronegativity():  # pymatgen orders formulas by electronegativity, even for He
            return self._heuristics(candidate)

    def _heuristics(self, candidate: Material) -> dict[str, float]:
        composition = integer_composition(candidate)
        n_atoms = int(composition.num_atoms)
        if n_atoms > self.max_sites:
            raise SimulationFailed(
                f"{composition.reduced_formula} has {n_atoms} atoms in its reduced formula, more than "
                f"max_sites={self.max_sites}; enumerating its oxidation states grows combinatorially, so construct "
                f"the rung with a larger max_sites if the wait is acceptable"
            )
        guesses = oxidation_state_guesses(composition)  # shared with the rubric's stoichiometry scorer
        fractions = {el: composition.get_atomic_fraction(el) for el in composition.elements}
        properties: dict[str, float] = {
            "is_charge_balanced": float(bool(guesses)),
            "n_oxidation_state_solutions": float(len(guesses)),
            "n_elements": float(len(composition.elements)),
            "n_atoms_reduced": float(n_atoms),
            "fraction_metal": sum(f for el, f in fractions.items() if el.is_metal),
            "fraction_transition_metal": sum(f for el, f in fractions.items() if el.is_transition_metal),
            "has_noble_gas": float(any(el.is_noble_gas for el in fractions)),
            "has_radioactive_element": float(
                any(el.is_radioactive and el.symbol not in _HANDLEABLE_RADIOACTIVE for el in fractions)
            ),
        }
        electronegativity = {el: float(el.X) for el in fractions if not math.isnan(el.X)}
        if electronegativity:
            weight = sum(fractions[el] for el in electronegativity)
            spread = max(electronegativity.values()) - min(electronegativity.values())
            mean = sum(fractions[el] * x for el, x in electronegativity.items()) / weight
            properties["mean_electronegativity"] = mean
            properties["electronegativity_spread"] = spread
            properties["max_ionic_character"] = 1.0 - math.exp(-(spread**2) / 4.0)
        return properties


def _n_atoms(candidate: AnyCandidate) -> int:
    """Atoms in the formula as written; 0 when it cannot be read (the failure is reported by ``calculate``)."""
    try:
        return candidate.n_atoms if isinstance(candidate, Material) else 0
    except Exception:  # a corrupted formula must still be charged, and its failure reported by calculate
        return 0
