"""charge_balanced_guesses is pymatgen's oxi_state_guesses, bit for bit, only faster."""

from __future__ import annotations

import pytest
from pymatgen.core import Composition

from simulators.oxidation_states import charge_balanced_guesses
from simulators.structures import ionic_oxidation_states, oxidation_state_guesses

FORMULAS = [
    "Fe3O4",  # mixed valence: a non-integer average
    "NaCl2",  # no charge-balanced assignment
    "Fe",  # one element: oxidation state 0
    "CuFeS2", "Cu2ZnSnS4", "Ba3Er2P4S16", "Bi2Se3", "Mn3O4", "V2O5", "Co3O4", "KMnO4",  # several solutions, ties
    "Pb3O4", "Ti4O7", "Fe7S8", "Cs2AgBiBr6", "Ag2HgI4", "CaTiO3", "Tl6SI4", "In2S3", "LiCoO2",
]


@pytest.mark.parametrize("formula", FORMULAS)
def test_guesses_are_pymatgens_bit_for_bit(formula):
    for composition in (Composition(formula), Composition(formula).reduced_composition):
        assert repr(charge_balanced_guesses(composition)) == repr(composition.oxi_state_guesses())


def test_non_integer_amounts_raise_as_pymatgen_does():
    with pytest.raises(ValueError, match="integer values"):
        charge_balanced_guesses(Composition("Li0.5CoO2"))
    with pytest.raises(ValueError, match="integer values"):
        Composition("Li0.5CoO2").oxi_state_guesses()


def test_the_memo_and_the_ionic_states_use_it():
    composition = Composition("Fe2O3")
    assert oxidation_state_guesses(composition) is oxidation_state_guesses(Composition("Fe2O3"))
    assert ionic_oxidation_states(composition) == {"Fe": 3.0, "O": -2.0}
    assert ionic_oxidation_states(Composition("NaCl2")) is None
