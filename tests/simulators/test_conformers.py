from __future__ import annotations

import numpy as np
import pytest

import simulators.geometry as geometry
from simulators import load_simulator
from simulators.conformers import (
    INTERCEPT_S,
    PER_HEAVY_ATOM_SQUARED_S,
    ConformerSimulator,
    radius_of_gyration,
)
from simulators.geometry import Geometry, lowest_mmff_conformer, mmff_conformer_ensemble
from simulators.testing import SimulatorContract
from vocabulary.domain import Material, Molecule, SetupError

ETHANOL, BENZENE, OCTANOL = (Molecule.parse(s) for s in ("CCO", "c1ccccc1", "CCCCCCCCO"))
TRIMETHYLBORANE = Molecule.parse("CB(C)C")  # MMFF94 has no boron parameters


@pytest.fixture(scope="module")
def sim() -> ConformerSimulator:
    return ConformerSimulator()


class TestConformerContract(SimulatorContract):
    def make_simulator(self):
        return ConformerSimulator()

    def good_candidates(self):
        return [ETHANOL, BENZENE]

    def failing_candidate(self):
        return TRIMETHYLBORANE

    def wrong_kind_candidate(self):
        return Material.parse("NaCl")


def test_rigid_and_flexible_molecules_have_sensible_ensembles(sim):
    ethanol, benzene, octanol = (o.properties for o in sim.evaluate([ETHANOL, BENZENE, OCTANOL]))
    assert set(octanol) == set(sim.implemented_properties)
    assert benzene["n_conformers"] == 1.0 and benzene["mmff_energy_spread"] == 0.0
    assert ethanol["n_conformers"] == 1.0  # three heavy atoms: every embedding is the same after pruning
    assert 3 <= octanol["n_conformers"] <= 10
    assert 0.0 < octanol["mmff_energy_spread"] < 15.0  # kcal/mol between alkyl-chain rotamers
    assert -30.0 < octanol["mmff_energy_min"] < 30.0
    assert ethanol["radius_of_gyration"] < benzene["radius_of_gyration"] < octanol["radius_of_gyration"] < 6.0


def test_the_ensemble_is_deterministic_when_built_afresh():
    first = ConformerSimulator().evaluate([OCTANOL, BENZENE])
    geometry._ensemble.cache_clear()  # rebuild the conformers instead of reading the cache
    second = ConformerSimulator().evaluate([OCTANOL, BENZENE])
    assert first == second


def test_another_seed_is_another_cache_key_and_still_finds_a_low_minimum():
    reference, reseeded = ConformerSimulator(), ConformerSimulator(seed=7)
    assert reseeded.parameters["seed"] == 7 and reseeded.parameters != reference.parameters
    [a], [b] = reference.evaluate([OCTANOL]), reseeded.evaluate([OCTANOL])
    assert b.status == "ok" and abs(a.properties["mmff_energy_min"] - b.properties["mmff_energy_min"]) < 3.0


def test_missing_mmff_parameters_fail_with_the_element_named(sim):
    observations = sim.evaluate([ETHANOL, TRIMETHYLBORANE])
    assert [o.status for o in observations] == ["ok", "failed"]
    assert "MMFF94 has no parameters" in observations[1].reason and "contains B" in observations[1].reason


def test_embedding_failure_is_a_failed_observation(monkeypatch):
    geometry._ensemble.cache_clear()
    monkeypatch.setattr(geometry, "_embed", lambda *args, **kwargs: [])
    [obs] = ConformerSimulator().evaluate([Molecule.parse("CCCN")])
    assert obs.status == "failed" and "ETKDGv3 could not embed" in obs.reason


def test_mmff_that_does_not_converge_says_to_raise_max_iterations():
    [obs] = ConformerSimulator(max_iterations=1).evaluate([OCTANOL])
    assert obs.status == "failed" and "did not converge" in obs.reason and "raise max_iterations" in obs.reason


def test_unreadable_smiles_fails_with_reason(sim):
    [obs] = sim.evaluate([Molecule(smiles="C1CC", id="BROKEN-RING")])
    assert obs.status == "failed" and "could not read SMILES" in obs.reason


@pytest.mark.parametrize(
    "params", [{"n_conformers": 0}, {"seed": -1}, {"max_iterations": 0}, {"prune_rms_threshold": "tight"}]
)
def test_bad_parameters_are_setup_errors(params):
    with pytest.raises(SetupError, match="simulator 'conformers'"):
        ConformerSimulator(**params)


def test_cost_follows_the_measured_model_and_scales_with_conformers(sim):
    assert sim.cost_model(ETHANOL) == pytest.approx(INTERCEPT_S + 9 * PER_HEAVY_ATOM_SQUARED_S)
    assert 0 < sim.cost_model(ETHANOL) < sim.cost_model(OCTANOL) < 1.0
    assert ConformerSimulator(n_conformers=20).cost_model(OCTANOL) == pytest.approx(2 * sim.cost_model(OCTANOL))


def test_registered_under_its_entry_point():
    loaded = load_simulator("conformers", n_conformers=5)
    assert isinstance(loaded, ConformerSimulator) and loaded.parameters["n_conformers"] == 5


# --------------------------------------------------------------------------------------------------- geometry
def test_lowest_conformer_has_explicit_hydrogens_and_angstrom_coordinates():
    conformer = lowest_mmff_conformer(ETHANOL)
    assert conformer.elements.count("H") == 6 and conformer.n_heavy_atoms == 3
    assert conformer.positions.shape == (9, 3) and list(conformer.atomic_numbers[:3]) == [6, 6, 8]
    c_c = np.linalg.norm(conformer.positions[0] - conformer.positions[1])
    assert c_c == pytest.approx(1.51, abs=0.03)  # Å
    assert lowest_mmff_conformer(ETHANOL) == conformer


def test_lowest_conformer_is_the_ensemble_minimum():
    ensemble = mmff_conformer_ensemble(OCTANOL)
    assert ensemble.lowest_energy == min(ensemble.energies)
    assert lowest_mmff_conformer(OCTANOL) == ensemble.geometries[int(np.argmin(ensemble.energies))]
    assert len(ensemble.geometries) == len(ensemble.energies) <= ensemble.n_embedded


def test_charge_and_unpaired_electrons_come_from_rdkit():
    acetate = lowest_mmff_conformer(Molecule.parse("CC(=O)[O-]"))
    methyl = lowest_mmff_conformer(Molecule.parse("[CH3]"))
    assert (acetate.charge, acetate.n_unpaired_electrons) == (-1, 0)
    assert (methyl.charge, methyl.n_unpaired_electrons, methyl.elements) == (0, 1, ("C", "H", "H", "H"))


def test_radius_of_gyration_is_mass_weighted():
    # C at the origin and H 1 Å away: the centre sits near carbon, so Rg is well under 0.5 Å
    ch = Geometry(("C", "H"), ((0.0, 0.0, 0.0), (1.0, 0.0, 0.0)))
    assert radius_of_gyration(ch) == pytest.approx(np.sqrt(12.011 * 1.008) / (12.011 + 1.008), rel=1e-3)
