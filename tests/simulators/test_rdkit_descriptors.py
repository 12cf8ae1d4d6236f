from __future__ import annotations

import pytest

from simulators.rdkit_descriptors import (
    INTERCEPT_S,
    PER_HEAVY_ATOM_S,
    RDKitDescriptorSimulator,
)
from simulators.testing import SimulatorContract
from vocabulary.domain import Material, Molecule, SetupError

ETHANOL, BENZENE, ASPIRIN = (Molecule.parse(s) for s in ("CCO", "c1ccccc1", "CC(=O)Oc1ccccc1C(=O)O"))
BROKEN = Molecule(smiles="C1CC", id="BROKEN-RING")  # bypasses parse, as a corrupted ledger row would


@pytest.fixture(scope="module")
def sim() -> RDKitDescriptorSimulator:
    return RDKitDescriptorSimulator()


class TestRDKitContract(SimulatorContract):
    def make_simulator(self):
        return RDKitDescriptorSimulator()

    def good_candidates(self):
        return [ETHANOL, BENZENE, ASPIRIN]

    def failing_candidate(self):
        return BROKEN

    def wrong_kind_candidate(self):
        return Material.parse("NaCl")


def test_ethanol_descriptors_match_known_values(sim):
    [obs] = sim.evaluate([ETHANOL])
    p = obs.properties
    assert set(p) == set(sim.implemented_properties)
    assert p["logp"] == pytest.approx(-0.0014, abs=1e-4)  # Wildman-Crippen
    assert p["tpsa"] == pytest.approx(20.23)
    assert p["mol_weight"] == pytest.approx(46.069, abs=1e-3)
    assert (p["n_hbd"], p["n_hba"], p["n_heavy_atoms"], p["n_rotatable_bonds"]) == (1.0, 1.0, 3.0, 0.0)
    assert p["fraction_csp3"] == 1.0


def test_benzene_is_flat_apolar_and_easy_to_make(sim):
    [obs] = sim.evaluate([BENZENE])
    p = obs.properties
    assert p["tpsa"] == 0.0 and p["fraction_csp3"] == 0.0
    assert p["logp"] == pytest.approx(1.6866, abs=1e-4)
    assert p["sa_score"] == pytest.approx(1.0, abs=0.05)


def test_aspirin_qed_and_sa_score_are_in_range_and_ordered(sim):
    aspirin, ethanol = (o.properties for o in sim.evaluate([ASPIRIN, ETHANOL]))
    assert 0.0 < aspirin["qed"] < 1.0 and aspirin["qed"] == pytest.approx(0.55, abs=0.01)
    assert 1.0 <= aspirin["sa_score"] <= 10.0
    assert aspirin["n_rotatable_bonds"] == 2.0 and aspirin["tpsa"] == pytest.approx(63.6)
    assert aspirin["mr"] > ethanol["mr"] > 0


def test_a_complex_natural_product_is_harder_to_make_than_ethanol(sim):
    paclitaxel_core = "CC1=C2C(C(=O)C3(C(CC4C(C3C(C(C2(C)C)(CC1O)O)OC(=O)C5=CC=CC=C5)(CO4)OC(=O)C)O)C)OC(=O)C"
    taxol_core = Molecule.parse(paclitaxel_core)
    hard, easy = (o.properties["sa_score"] for o in sim.evaluate([taxol_core, ETHANOL]))
    assert hard > easy + 2


def test_unreadable_smiles_fails_with_reason_and_keeps_its_place(sim):
    observations = sim.evaluate([ETHANOL, BROKEN, BENZENE])
    assert [o.status for o in observations] == ["ok", "failed", "ok"]
    assert "could not read SMILES 'C1CC'" in observations[1].reason
    assert observations[1].cost_s == INTERCEPT_S


def test_molecule_without_heavy_atoms_fails_with_reason(sim):
    [obs] = sim.evaluate([Molecule.parse("[H][H]")])
    assert obs.status == "failed" and "no heavy atoms" in obs.reason


def test_cost_grows_with_heavy_atoms_per_the_measured_model(sim):
    assert sim.cost_model(ETHANOL) == pytest.approx(INTERCEPT_S + 3 * PER_HEAVY_ATOM_S)
    assert sim.cost_model(ASPIRIN) == pytest.approx(INTERCEPT_S + 13 * PER_HEAVY_ATOM_S)
    assert 0 < sim.cost_model(ETHANOL) < sim.cost_model(ASPIRIN) < 0.1


def test_version_names_the_rdkit_release(sim):
    import rdkit

    assert sim.version.endswith(f"+rdkit{rdkit.__version__}")


def test_materials_are_refused_before_running(sim):
    with pytest.raises(SetupError, match="is a material"):
        sim.evaluate([ETHANOL, Material.parse("Fe2O3")])
