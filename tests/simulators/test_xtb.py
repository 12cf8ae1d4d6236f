from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from simulators import load_simulator
from simulators.conformers import conformer_cost_s
from simulators.geometry import homo_lumo_gap_hartree
from simulators.testing import SimulatorContract
from simulators.xtb import INTERCEPT_S, PER_HEAVY_ATOM_SQUARED_S, XTBSimulator
from vocabulary.domain import Material, Molecule, SetupError

pytest.importorskip("tblite", reason='the xtb rung needs tblite: pip install "closedloop[xtb]"')

WATER, ETHANOL, HEXANE = (Molecule.parse(s) for s in ("O", "CCO", "CCCCCC"))
TRIMETHYLBORANE = Molecule.parse("CB(C)C")  # no MMFF94 parameters, so no geometry
FREESOLV = Path("/work/shared/data/freesolv/FreeSolv_gauche.csv")


@pytest.fixture(scope="module")
def sim() -> XTBSimulator:
    return XTBSimulator()


@pytest.fixture(scope="module")
def small_molecules(sim) -> dict[str, dict[str, float]]:
    observations = sim.evaluate([WATER, ETHANOL, HEXANE])
    assert all(o.status == "ok" for o in observations), [o.reason for o in observations]
    return dict(zip(("water", "ethanol", "hexane"), (o.properties for o in observations), strict=True))


class TestXTBContract(SimulatorContract):
    def make_simulator(self):
        return XTBSimulator()

    def good_candidates(self):
        return [WATER, ETHANOL]

    def failing_candidate(self):
        return TRIMETHYLBORANE

    def wrong_kind_candidate(self):
        return Material.parse("NaCl")


def test_water_has_a_wide_gap_and_a_dipole_near_experiment(small_molecules):
    water = small_molecules["water"]
    assert water["energy_hartree"] == pytest.approx(-5.07, abs=0.01)  # GFN2-xTB total energies are not ab initio
    assert 12.0 < water["homo_lumo_gap_ev"] < 16.0  # GFN2 gives about 14 eV for water
    assert 1.8 < water["dipole_debye"] < 2.6  # experiment 1.85 D; GFN2 at the MMFF geometry about 2.3 D


def test_solvation_free_energies_order_polar_before_apolar(small_molecules):
    water, ethanol, hexane = (small_molecules[k]["dg_solv_kcal_mol"] for k in ("water", "ethanol", "hexane"))
    assert -6.5 < ethanol < -3.0  # FreeSolv experiment -5.0 kcal/mol; ALPB gives about -4.1
    assert water < ethanol < hexane < 0.5
    assert abs(hexane) < 1.5  # experiment +2.5; ALPB puts hexane near zero
    assert small_molecules["hexane"]["dipole_debye"] < 0.1


def test_dg_solv_ranks_freesolv_like_experiment():
    rows = list(csv.DictReader(FREESOLV.open()))[::21][:30]
    observations = XTBSimulator().evaluate([Molecule.parse(row["smiles"]) for row in rows])
    assert all(o.status == "ok" for o in observations), [o.reason for o in observations]
    from scipy.stats import spearmanr

    rho = spearmanr([float(r["expt"]) for r in rows], [o.properties["dg_solv_kcal_mol"] for o in observations])[0]
    assert rho > 0.6  # 0.80 on this sample (0.84 over all 642 molecules)


def test_gbsa_is_available_and_also_solvates_ethanol():
    [obs] = XTBSimulator(solvation_model="gbsa").evaluate([ETHANOL])
    assert obs.status == "ok" and -6.0 < obs.properties["dg_solv_kcal_mol"] < -1.5
    assert obs.parameters["solvation_model"] == "gbsa"


def test_octanol_solvates_hexane_more_than_water_does(sim, small_molecules):
    [obs] = XTBSimulator(solvent="octanol").evaluate([HEXANE])
    assert obs.properties["dg_solv_kcal_mol"] < small_molecules["hexane"]["dg_solv_kcal_mol"] - 1.0


def test_ions_and_radicals_get_their_charge_and_spin(sim):
    acetate, methyl = sim.evaluate([Molecule.parse("CC(=O)[O-]"), Molecule.parse("[CH3]")])
    assert acetate.status == "ok" and acetate.properties["dg_solv_kcal_mol"] < -50.0  # an anion in water
    assert methyl.status == "ok" and 0.0 < methyl.properties["homo_lumo_gap_ev"] < 15.0


def test_scf_that_does_not_converge_is_a_failed_observation_saying_so():
    [obs] = XTBSimulator(max_iterations=2).evaluate([ETHANOL])
    assert obs.status == "failed"
    assert "GFN2-xTB (gas phase) failed" in obs.reason and "not converged" in obs.reason
    assert "raise max_iterations" in obs.reason


def test_no_geometry_is_a_failed_observation(sim):
    [obs] = sim.evaluate([TRIMETHYLBORANE])
    assert obs.status == "failed" and "MMFF94 has no parameters" in obs.reason


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"solvent": "unobtainium"}, "no GFN2 ALPB parameters for solvent='unobtainium'"),
        ({"solvent": "octanol", "solvation_model": "gbsa"}, "solvation_model='alpb'"),
        ({"solvation_model": "cosmo"}, "solvation_model='cosmo' must be one of"),
        ({"solvent": ["water"]}, "must be a solvent name"),
        ({"accuracy": 0.0}, "accuracy=0.0"),
        ({"max_iterations": 0}, "max_iterations=0"),
        ({"n_conformers": 0}, "n_conformers=0"),
    ],
)
def test_bad_parameters_are_setup_errors_naming_the_fix(params, message):
    with pytest.raises(SetupError, match=message.replace("(", r"\(").replace(")", r"\)")):
        XTBSimulator(**params)


def _hide_module(monkeypatch, hidden: str) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == hidden else real(name, *a))


def test_missing_tblite_is_a_setup_error_with_the_install_hint(monkeypatch):
    built = XTBSimulator()
    _hide_module(monkeypatch, "tblite")
    with pytest.raises(SetupError, match=r'pip install "closedloop\[xtb\]"'):
        XTBSimulator()
    with pytest.raises(SetupError, match="tblite"):  # checked again before each batch
        built.evaluate([WATER])


def test_parameters_are_provenance_and_part_of_the_cache_key(sim):
    [obs] = sim.evaluate([WATER])
    assert obs.parameters == sim.parameters == {
        "accuracy": 1.0,
        "max_iterations": 250,
        "n_conformers": 10,
        "seed": 0xF00D,
        "solvation_model": "alpb",
        "solvent": "water",
    }
    assert XTBSimulator(solvent="octanol").parameters != sim.parameters
    assert sim.version.startswith("1+tblite") and "+rdkit" in sim.version


def test_cost_is_the_conformer_search_plus_two_single_points(sim):
    expected = conformer_cost_s(ETHANOL) + INTERCEPT_S + 9 * PER_HEAVY_ATOM_SQUARED_S
    assert sim.cost_model(ETHANOL) == pytest.approx(expected)
    assert 0 < sim.cost_model(WATER) < sim.cost_model(ETHANOL) < sim.cost_model(HEXANE) < 1.0


def test_registered_under_its_entry_point():
    assert isinstance(load_simulator("xtb", solvent="octanol"), XTBSimulator)


# --------------------------------------------------------------------------------------------------- the gap
def test_gap_of_a_closed_shell_is_lumo_minus_homo():
    assert homo_lumo_gap_hartree(np.array([-0.6, -0.4, 0.2, 0.5]), np.array([2.0, 2.0, 0.0, 0.0])) == pytest.approx(0.6)


def test_gap_of_an_open_shell_starts_at_the_singly_occupied_orbital():
    assert homo_lumo_gap_hartree(np.array([-0.6, -0.4, 0.2]), np.array([2.0, 1.0, 0.0])) == pytest.approx(0.6)
    per_spin = homo_lumo_gap_hartree(
        np.array([[-0.6, -0.4, 0.2], [-0.5, 0.1, 0.3]]), np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    )
    assert per_spin == pytest.approx(0.5)  # alpha HOMO -0.4 to beta LUMO 0.1
