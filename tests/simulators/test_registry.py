from __future__ import annotations

import subprocess
import sys
from importlib.metadata import EntryPoint

import pytest

import simulators.registry as registry
from simulators import (
    RDKitDescriptorSimulator,
    Simulator,
    TableSimulator,
    available_simulators,
    load_simulator,
)
from vocabulary.domain import Molecule, SetupError


def fake_entry_points(monkeypatch, **targets: str) -> None:
    eps = [EntryPoint(name, value, registry.ENTRY_POINT_GROUP) for name, value in targets.items()]
    monkeypatch.setattr(registry, "_entry_points", lambda: eps)


def test_builtins_are_registered_through_entry_points():
    found = available_simulators()
    assert found["table"].value == "simulators.table:TableSimulator"
    assert found["rdkit_descriptors"].value == "simulators.rdkit_descriptors:RDKitDescriptorSimulator"


def test_load_builds_a_working_simulator_with_params():
    ethanol = Molecule.parse("CCO")
    table = load_simulator("table", name="calc", values={ethanol.id: -5.0}, property="dg", fidelity=1)
    assert isinstance(table, TableSimulator) and isinstance(table, Simulator)
    assert table.evaluate([ethanol])[0].properties == {"dg": -5.0}
    rdkit_sim = load_simulator("rdkit_descriptors")
    assert isinstance(rdkit_sim, RDKitDescriptorSimulator)
    assert rdkit_sim.evaluate([ethanol])[0].properties["n_heavy_atoms"] == 3.0


def test_unknown_name_lists_the_available_ones():
    with pytest.raises(SetupError, match=r"'gaussian16'.*available: \[.*'rdkit_descriptors'.*'table'"):
        load_simulator("gaussian16")


def test_unexpected_parameters_are_a_setup_error():
    with pytest.raises(SetupError, match="does not accept parameters"):
        load_simulator("rdkit_descriptors", method="GFN2")


def test_a_third_party_entry_point_is_loaded(monkeypatch):
    fake_entry_points(monkeypatch, my_table="simulators.table:TableSimulator")
    assert list(available_simulators()) == ["my_table"]
    assert load_simulator("my_table", name="t", values={}, property="p").name == "t"


def test_plugin_that_fails_to_import_is_a_setup_error(monkeypatch):
    fake_entry_points(monkeypatch, ghost="closedloop_ghost_plugin:GhostSimulator")
    with pytest.raises(SetupError, match="could not be imported"):
        load_simulator("ghost")


def test_plugin_that_is_not_a_simulator_is_a_setup_error(monkeypatch):
    fake_entry_points(monkeypatch, odd="collections:OrderedDict")
    with pytest.raises(SetupError, match="lacks the Simulator attributes"):
        load_simulator("odd")


def test_a_name_registered_twice_with_different_targets_is_ambiguous(monkeypatch):
    eps = [
        EntryPoint("table", "simulators.table:TableSimulator", registry.ENTRY_POINT_GROUP),
        EntryPoint("table", "other_pkg.table:TableSimulator", registry.ENTRY_POINT_GROUP),
        EntryPoint("table", "simulators.table:TableSimulator", registry.ENTRY_POINT_GROUP),
    ]
    monkeypatch.setattr(registry, "_entry_points", lambda: eps)
    with pytest.raises(SetupError, match="registered more than once"):
        load_simulator("table", name="t", values={}, property="p")


def test_importing_simulators_loads_no_heavy_backend():
    code = "import sys, simulators; print(sorted(m for m in ('torch', 'rdkit', 'pymatgen') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
