"""CHGNet rung. Importing torch and chgnet costs several seconds once per session; each relaxation here is small."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from simulators import load_simulator
from simulators.chgnet import INTERCEPT_S, PER_ATOM_S, CHGNetSimulator
from simulators.testing import SimulatorContract
from vocabulary.domain import Material, Molecule, SetupError

NACL, CSCL = Material.parse("NaCl"), Material.parse("CsCl")
needs_chgnet = pytest.mark.skipif(
    importlib.util.find_spec("chgnet") is None, reason='needs chgnet: pip install "closedloop[materials]"'
)


@pytest.fixture(scope="module")
def sim() -> CHGNetSimulator:
    return CHGNetSimulator()


@needs_chgnet
class TestCHGNetContract(SimulatorContract):
    def make_simulator(self):
        return CHGNetSimulator()

    def good_candidates(self):
        return [NACL, CSCL]  # two-atom cells that relax in a few steps

    def failing_candidate(self):
        return Material.parse("Fe")  # no ionic prototype to relax

    def wrong_kind_candidate(self):
        return Molecule.parse("CCO")


@needs_chgnet
def test_relaxed_nacl_energy_and_volume_are_physical(sim):
    [obs] = sim.evaluate([NACL])
    p = obs.properties
    # MPtrj energies carry the MP2020 anion correction, so CHGNet's NaCl sits near -3.67 eV/atom
    assert -3.8 < p["energy_per_atom_ev"] < -3.55
    assert 21.5 < p["volume_per_atom_a3"] < 24.0  # experiment: a = 5.64 Å, 22.4 Å³/atom
    assert p["energy_per_atom_ev"] <= p["initial_energy_per_atom_ev"] + 1e-6
    assert p["is_converged"] == 1.0 and p["max_force_ev_a"] < 0.1
    assert 0 <= p["magmom_mean"] < 0.1  # closed-shell ions


@needs_chgnet
def test_relaxation_lowers_the_energy_of_a_strained_prototype(sim):
    [obs] = sim.evaluate([CSCL])
    p = obs.properties
    assert p["n_relax_steps"] >= 1
    assert p["energy_per_atom_ev"] < p["initial_energy_per_atom_ev"]


@needs_chgnet
def test_zero_steps_is_a_single_point_of_the_prototype():
    [obs] = CHGNetSimulator(steps=0).evaluate([CSCL])
    p = obs.properties
    assert p["n_relax_steps"] == 0.0 and p["is_converged"] == 0.0
    assert p["energy_per_atom_ev"] == p["initial_energy_per_atom_ev"]


@needs_chgnet
def test_the_step_limit_is_respected_and_reported():
    [obs] = CHGNetSimulator(steps=1, optimizer="FIRE").evaluate([CSCL])
    assert obs.properties["n_relax_steps"] == 1.0 and obs.properties["is_converged"] == 0.0
    assert obs.parameters == {"fmax": 0.1, "steps": 1, "optimizer": "FIRE"}


@needs_chgnet
def test_composition_without_a_prototype_fails_with_the_reason(sim):
    [obs] = sim.evaluate([Material.parse("Fe")])
    assert obs.status == "failed" and "no prototype matches the stoichiometry of Fe" in obs.reason
    assert obs.cost_s == INTERCEPT_S


@needs_chgnet
def test_a_relaxation_that_raises_is_a_failed_observation_and_threads_are_restored(sim, monkeypatch):
    import torch

    import simulators.chgnet as chgnet_module

    class ExplodingOptimizer:
        def relax(self, *args, **kwargs):
            assert torch.get_num_threads() == 1  # the relaxation itself runs on one thread
            raise RuntimeError("graph has isolated atoms")

    monkeypatch.setattr(chgnet_module, "_struct_optimizer", lambda name: ExplodingOptimizer())
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        [obs] = sim.evaluate([NACL])
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert obs.status == "failed"
    assert "CHGNet relaxation of the rocksalt structure of NaCl failed: RuntimeError: graph has isolated" in obs.reason


@needs_chgnet
def test_loading_the_model_prints_nothing(capsys):
    import simulators.chgnet as chgnet_module

    chgnet_module._struct_optimizer.cache_clear()
    chgnet_module._model.cache_clear()
    [obs] = CHGNetSimulator(steps=0).evaluate([NACL])
    assert obs.status == "ok"
    assert capsys.readouterr().out == ""


@needs_chgnet
def test_cost_counts_the_atoms_of_the_prototype_cell(sim):
    assert sim.cost_model(NACL) == pytest.approx(INTERCEPT_S + 2 * PER_ATOM_S)
    assert sim.cost_model(Material.parse("MgAl2O4")) == pytest.approx(INTERCEPT_S + 14 * PER_ATOM_S)  # 2 f.u.


@pytest.mark.parametrize(
    "kwargs", [{"fmax": 0}, {"fmax": float("nan")}, {"steps": -1}, {"steps": 2.5}, {"optimizer": "SD"}]
)
def test_bad_parameters_are_setup_errors(kwargs):
    with pytest.raises(SetupError):
        CHGNetSimulator(**kwargs)


INSTALL_HINT = r'pip install "closedloop\[materials\]"'


def hide_chgnet(monkeypatch) -> None:
    real_find_spec = importlib.util.find_spec

    def find_spec(name, *args):
        return None if name == "chgnet" else real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def test_missing_chgnet_is_a_setup_error_with_the_install_hint(monkeypatch):
    hide_chgnet(monkeypatch)
    with pytest.raises(SetupError, match=INSTALL_HINT):
        CHGNetSimulator()


@needs_chgnet
def test_chgnet_lost_after_construction_is_a_setup_error_before_running(sim, monkeypatch):
    hide_chgnet(monkeypatch)
    with pytest.raises(SetupError, match=INSTALL_HINT):
        sim.evaluate([NACL])


@needs_chgnet
def test_registered_under_its_entry_point():
    sim = load_simulator("chgnet", fmax=0.05, steps=50)
    assert isinstance(sim, CHGNetSimulator) and sim.fidelity == 2
    assert sim.parameters == {"fmax": 0.05, "steps": 50, "optimizer": "BFGS"}


def test_importing_the_ladder_loads_neither_torch_nor_chgnet():
    code = (
        "import sys, simulators.chgnet, simulators.prototypes, simulators.composition; "
        "print(sorted(m for m in ('torch', 'chgnet', 'pymatgen') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
