from __future__ import annotations

import importlib.util

import pytest

from simulators import load_simulator
from simulators.dft import INTERCEPT_S, PER_HEAVY_ATOM_SQUARED_S, DFTSimulator
from simulators.testing import SimulatorContract
from vocabulary.domain import Material, Molecule, SetupError

pytestmark = pytest.mark.dft
pytest.importorskip("pyscf", reason='the dft rung needs pyscf: pip install "closedloop[dft]"')

WATER, METHANE, METHANOL = (Molecule.parse(s) for s in ("O", "C", "CO"))
BUTYLNAPHTHALENE = Molecule.parse("CCCCc1cccc2ccccc12")  # 14 heavy atoms: over the default cap


@pytest.fixture(scope="module")
def sim() -> DFTSimulator:
    return DFTSimulator()


@pytest.fixture(scope="module")
def water_and_methanol(sim) -> tuple[dict[str, float], dict[str, float]]:
    water, methanol = sim.evaluate([WATER, METHANOL])
    assert water.status == methanol.status == "ok", (water.reason, methanol.reason)
    return water.properties, methanol.properties


class TestDFTContract(SimulatorContract):
    def make_simulator(self):
        return DFTSimulator()

    def good_candidates(self):
        return [WATER, METHANE]  # the cheapest molecules with an MMFF geometry: the contract runs them often

    def failing_candidate(self):
        return BUTYLNAPHTHALENE

    def wrong_kind_candidate(self):
        return Material.parse("NaCl")


def test_water_and_methanol_match_b3lyp_def2svp(water_and_methanol):
    water, methanol = water_and_methanol
    assert water["energy_hartree"] == pytest.approx(-76.358, abs=2e-3)
    assert methanol["energy_hartree"] == pytest.approx(-115.630, abs=2e-3)
    assert 8.0 < water["homo_lumo_gap_ev"] < 10.5  # B3LYP Kohn-Sham gaps are far below GFN2's ~14 eV
    assert 1.8 < water["dipole_debye"] < 2.2  # experiment 1.85 D
    assert 1.4 < methanol["dipole_debye"] < 1.9  # experiment 1.70 D
    assert methanol["homo_lumo_gap_ev"] < water["homo_lumo_gap_ev"]


def test_a_radical_runs_unrestricted(sim):
    [methyl] = sim.evaluate([Molecule.parse("[CH3]")])
    assert methyl.status == "ok" and methyl.properties["energy_hartree"] == pytest.approx(-39.81, abs=0.01)
    assert 2.0 < methyl.properties["homo_lumo_gap_ev"] < 8.0


def test_a_molecule_over_the_cap_fails_at_once_and_costs_nothing(sim):
    observations = sim.evaluate([BUTYLNAPHTHALENE])
    assert [o.status for o in observations] == ["failed"] and observations[0].cost_s == 0.0
    assert observations[0].reason.endswith(
        "is too large for the dft rung (14 heavy atoms > 12); raise max_heavy_atoms or stop at xtb"
    )


def test_the_cap_is_a_parameter(monkeypatch):
    raised = DFTSimulator(max_heavy_atoms=20)
    ran = []
    monkeypatch.setattr("simulators.dft.b3lyp_single_point", lambda geometry, **kw: ran.append(geometry) or {})
    raised.evaluate([BUTYLNAPHTHALENE])
    assert len(ran) == 1 and ran[0].n_heavy_atoms == 14
    assert raised.cost_model(BUTYLNAPHTHALENE) == pytest.approx(INTERCEPT_S + 196 * PER_HEAVY_ATOM_SQUARED_S)


def test_scf_that_does_not_converge_is_a_failed_observation():
    [obs] = DFTSimulator(max_iterations=1).evaluate([WATER])
    assert obs.status == "failed" and "did not converge in 1 cycles; raise max_iterations" in obs.reason


@pytest.mark.parametrize("params", [{"max_heavy_atoms": 0}, {"grid_level": 12}, {"max_iterations": 0}, {"seed": -1}])
def test_bad_parameters_are_setup_errors(params):
    with pytest.raises(SetupError, match="simulator 'dft'"):
        DFTSimulator(**params)


def test_missing_pyscf_is_a_setup_error_with_the_install_hint(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyscf" else real(name, *a))
    with pytest.raises(SetupError, match=r'pip install "closedloop\[dft\]"'):
        DFTSimulator()


def test_cost_grows_with_size_under_the_cap(sim):
    assert sim.cost_model(WATER) == pytest.approx(INTERCEPT_S + PER_HEAVY_ATOM_SQUARED_S)
    assert sim.cost_model(WATER) < sim.cost_model(METHANOL) < sim.cost_model(Molecule.parse("c1ccccc1"))


def test_registered_under_its_entry_point():
    loaded = load_simulator("dft", max_heavy_atoms=6)
    assert isinstance(loaded, DFTSimulator) and loaded.parameters["max_heavy_atoms"] == 6
