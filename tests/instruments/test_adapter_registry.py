"""The adapters are registered in the ``closedloop.instruments`` entry-point group as pylabrobot, sila2 and madsci,
and ``load_driver`` builds each from plain parameters, as a campaign spec's ``lab.parameters`` gives them."""

from __future__ import annotations

import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from instruments import available_drivers, load_driver, registry
from instruments.registry import ENTRY_POINT_GROUP, missing_members

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
ADAPTERS = {
    "pylabrobot": "instruments.adapters.pylabrobot_driver:PyLabRobotDriver",
    "sila2": "instruments.adapters.sila2_driver:Sila2Driver",
    "madsci": "instruments.adapters.madsci_driver:MadsciDriver",
}


@pytest.fixture
def pyproject_entry_points(monkeypatch):
    """Resolve drivers from pyproject.toml's entry points, as an install of this checkout would."""
    declared = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"][ENTRY_POINT_GROUP]
    points = [EntryPoint(name=name, value=value, group=ENTRY_POINT_GROUP) for name, value in declared.items()]
    monkeypatch.setattr(registry, "entry_points", lambda group: points if group == ENTRY_POINT_GROUP else [])
    return declared


def test_pyproject_registers_the_three_adapters(pyproject_entry_points):
    assert {name: pyproject_entry_points[name] for name in ADAPTERS} == ADAPTERS
    assert {name: available_drivers()[name] for name in ADAPTERS} == ADAPTERS


def test_the_installed_metadata_matches_when_this_checkout_is_installed():
    installed = available_drivers()
    if not set(ADAPTERS) & set(installed):
        pytest.skip("the installed closedloop predates the adapters; pip install -e . registers them")
    assert {name: installed[name] for name in ADAPTERS} == ADAPTERS


def test_load_driver_builds_the_sila2_and_madsci_drivers_from_plain_parameters(pyproject_entry_points):
    pytest.importorskip("sila2", reason='pip install "closedloop[sila2]"')
    sila = load_driver("sila2", host="127.0.0.1", port=50052, insecure=True)
    madsci = load_driver("madsci", node_url="http://127.0.0.1:2000", action="measure",
                         envelope={"name": "node", "forbidden_hazards": ["H224"]})
    assert (sila.name, sila.port, madsci.name, madsci.action) == ("sila2", 50052, "madsci", "measure")
    assert missing_members(sila) == missing_members(madsci) == []
    assert madsci.envelope.name == "node" and len(madsci.envelope.forbidden_hazards) == 1  # a dict becomes the model


def test_load_driver_builds_the_pylabrobot_driver_from_a_saved_deck(pyproject_entry_points, tmp_path):
    pytest.importorskip("pylabrobot", reason='pip install "closedloop[pylabrobot]"')
    from pylabrobot.plate_reading.chatterbox import PlateReaderChatterboxBackend

    from instruments.adapters.pylabrobot_driver import PyLabRobotDriver

    lh = PyLabRobotDriver.simulated(lambda candidate: 0.0).liquid_handler
    lh.deck.get_resource("plate_reader").backend = PlateReaderChatterboxBackend()
    lh.save(str(tmp_path / "deck.json"))
    driver = load_driver("pylabrobot", liquid_handler=str(tmp_path / "deck.json"),
                         reagents={"buffer": "reagents_well_A1"}, plate="assay", tip_racks=["tips"])
    assert driver.name == "pylabrobot" and missing_members(driver) == []
    assert sorted(driver.envelope.parameters) == ["buffer"]
