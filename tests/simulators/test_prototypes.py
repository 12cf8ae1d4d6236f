from __future__ import annotations

import pytest

from simulators import load_simulator
from simulators.prototypes import INTERCEPT_S, PER_ATOM_S, PrototypeSimulator
from simulators.structures import (
    PROTOTYPES,
    best_prototype_structure,
    bond_valence_misfit,
    integer_composition,
    prototype_fits,
)
from simulators.testing import SimulatorContract
from vocabulary.domain import Material, Molecule

NACL, MGO, CATIO3 = (Material.parse(f) for f in ("NaCl", "MgO", "CaTiO3"))
COULOMB_EV_A = 14.399645  # e² / (4 π ε0), eV·Å


@pytest.fixture(scope="module")
def sim() -> PrototypeSimulator:
    return PrototypeSimulator()


def best(sim: PrototypeSimulator, formula: str) -> tuple[str, dict[str, float]]:
    [obs] = sim.evaluate([Material.parse(formula)])
    assert obs.status == "ok", obs.reason
    return PROTOTYPES[int(obs.properties["best_prototype_index"])], obs.properties


class TestPrototypeContract(SimulatorContract):
    def make_simulator(self):
        return PrototypeSimulator()

    def good_candidates(self):
        return [NACL, MGO, CATIO3]

    def failing_candidate(self):
        return Material.parse("NaCl2")

    def wrong_kind_candidate(self):
        return Molecule.parse("CCO")


def test_prototype_names_are_append_only():
    assert PROTOTYPES[:11] == (
        "rocksalt",
        "cesium_chloride",
        "zincblende",
        "wurtzite",
        "fluorite",
        "antifluorite",
        "rutile",
        "perovskite",
        "spinel",
        "corundum",
        "layered_rocksalt",
    )


@pytest.mark.parametrize(
    ("formula", "expected"),
    [
        ("NaCl", "rocksalt"),
        ("MgO", "rocksalt"),
        ("CsCl", "cesium_chloride"),  # radius ratio above 0.72
        ("BeO", "wurtzite"),  # radius ratio below about 0.33
        ("CaF2", "fluorite"),
        ("TiO2", "rutile"),
        ("Li2O", "antifluorite"),
        ("CaTiO3", "perovskite"),
        ("MgAl2O4", "spinel"),
        ("Al2O3", "corundum"),
        ("LiCoO2", "layered_rocksalt"),
    ],
)
def test_each_composition_lands_in_its_known_prototype(sim, formula, expected):
    assert best(sim, formula)[0] == expected


def test_nacl_ewald_energy_is_the_madelung_energy_at_shannon_contact(sim):
    name, p = best(sim, "NaCl")
    d = 1.02 + 1.81  # Shannon six-coordinate radii of Na+ and Cl-, Å
    assert p["ewald_energy_per_atom_ev"] == pytest.approx(-1.747565 * COULOMB_EV_A / d / 2, rel=1e-4)
    assert p["volume_per_atom_a3"] == pytest.approx((2 * d) ** 3 / 8)
    assert p["n_matching_prototypes"] == 4.0


def test_ewald_energies_are_negative_and_grow_with_ionic_charge(sim):
    energies = {f: best(sim, f)[1]["ewald_energy_per_atom_ev"] for f in ("NaCl", "MgO", "CaTiO3", "Al2O3")}
    assert all(e < 0 for e in energies.values()), energies
    assert energies["MgO"] < energies["NaCl"]  # charges ±2 against ±1


def test_perovskite_puts_the_large_cation_on_the_a_site_and_spinel_the_single_one_on_a():
    assert dict(prototype_fits(CATIO3)[0].assignment) == {"A": "Ca", "B": "Ti", "X": "O"}
    assert dict(prototype_fits(Material.parse("MgAl2O4"))[0].assignment) == {"A": "Mg", "B": "Al", "X": "O"}


def test_bond_valence_misfit_is_zero_for_binaries_and_tracks_the_tolerance_factor(sim):
    assert best(sim, "NaCl")[1]["bond_valence_misfit"] == pytest.approx(0.0, abs=1e-4)
    cubic, strained = best(sim, "SrTiO3")[1], best(sim, "CaTiO3")[1]
    assert cubic["bond_valence_misfit"] < strained["bond_valence_misfit"]  # SrTiO3 is the cubic one
    assert best(sim, "KMgF3")[1]["bond_valence_misfit"] < 0.05  # an ideal cubic fluoride perovskite


def test_bond_valence_misfit_is_none_when_parameters_do_not_cover_the_anion():
    from pymatgen.core import Lattice, Species, Structure

    # Au- is not among the electronegative elements of the bond-valence parameter set
    cesium_auride = Structure(Lattice.cubic(4.26), [Species("Cs", 1), Species("Au", -1)], [[0, 0, 0], [0.5] * 3])
    assert bond_valence_misfit(cesium_auride) is None


def test_best_structure_is_decorated_neutral_and_a_private_copy():
    name, structure = best_prototype_structure(NACL)
    assert name == "rocksalt" and len(structure) == 2
    assert sorted(site.specie.oxi_state for site in structure) == [-1, 1]
    structure.scale_lattice(1000.0)
    assert best_prototype_structure(NACL)[1].volume == pytest.approx(2 * 22.665187, rel=1e-6)


@pytest.mark.parametrize(
    ("name", "n_sites", "formula"),
    [
        ("rocksalt", 2, "NaCl"),
        ("cesium_chloride", 2, "CsCl"),
        ("zincblende", 2, "ZnS"),
        ("wurtzite", 4, "ZnO"),
        ("fluorite", 3, "CaF2"),
        ("antifluorite", 3, "Li2O"),
        ("rutile", 6, "TiO2"),
        ("perovskite", 5, "SrTiO3"),
        ("spinel", 14, "MgAl2O4"),
        ("corundum", 10, "Al2O3"),
        ("layered_rocksalt", 4, "LiCoO2"),
    ],
)
def test_every_prototype_builds_its_primitive_cell(name, n_sites, formula):
    [fit] = [f for f in prototype_fits(Material.parse(formula)) if f.prototype == name][:1]
    assert len(fit.structure) == n_sites
    assert fit.structure.composition.reduced_formula == Material.parse(formula).id
    assert abs(fit.structure.charge) < 1e-9
    assert min(fit.structure.distance_matrix[fit.structure.distance_matrix > 0]) > 1.5  # no overlapping ions


def test_fractional_formula_is_scaled_to_whole_numbers():
    def whole(formula: str) -> str:
        return integer_composition(Material.parse(formula)).formula.replace(" ", "")

    assert whole("Li0.5CoO2") == "Li1Co2O4"
    assert whole("Li0.333CoO2") == "Li1Co3O6"  # a rounded third reads as a third
    assert whole("Ba0.95Sr0.05TiO3") == "Ba19Sr1Ti20O60"
    assert prototype_fits(Material.parse("Li0.5CoO2"))[0].prototype == "spinel"


@pytest.mark.parametrize(
    ("formula", "reason"),
    [
        ("NaCl2", "no charge-balanced oxidation states with Cl as the only anion"),
        ("Fe", "no prototype matches the stoichiometry of Fe"),
        ("Fe3O4", "no prototype matches"),
        ("Na0.0012345Cl", "not ratios of whole numbers"),
    ],
)
def test_unplaceable_compositions_fail_with_a_reason(sim, formula, reason):
    [obs] = sim.evaluate([Material.parse(formula)])
    assert obs.status == "failed" and reason in obs.reason, obs.reason
    assert obs.properties == {}


def test_corrupted_formula_fails_and_is_still_charged(sim):
    [obs] = sim.evaluate([Material(formula="Xx2", id="BROKEN")])
    assert obs.status == "failed" and "unknown elements ['Xx']" in obs.reason
    assert obs.cost_s == pytest.approx(INTERCEPT_S + 2 * PER_ATOM_S)


def test_cost_follows_the_measured_linear_model(sim):
    assert sim.cost_model(NACL) == pytest.approx(INTERCEPT_S + 2 * PER_ATOM_S)
    assert sim.cost_model(Material.parse("MgAl2O4")) == pytest.approx(INTERCEPT_S + 7 * PER_ATOM_S)


def test_registered_under_its_entry_point():
    assert isinstance(load_simulator("prototype"), PrototypeSimulator)



def test_europium_compounds_are_placed_despite_pymatgens_blank_shannon_key(sim):
    # pymatgen's Shannon table for Eu has a key "" besides "2" and "3"; it used to fail every Eu compound.
    assert best(sim, "EuS")[0] == "rocksalt"
    assert best(sim, "EuGa2S4")[0] == "spinel"


@pytest.mark.parametrize("formula", ["GaAs", "InP", "GaSb", "Al0.5Ga0.5As"])
def test_pnictide_anions_take_paulings_radius(sim, formula):
    # pymatgen tabulates P, As and Sb only as cations; the trivalent anions fall back to Pauling's radii.
    from simulators.structures import PAULING_ANION_RADII_A, _shannon_radius

    assert best(sim, formula)[1]["ewald_energy_per_atom_ev"] < 0
    assert _shannon_radius("As", -3) == PAULING_ANION_RADII_A["As"] == 2.22
