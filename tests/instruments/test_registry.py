"""Driver discovery through the ``closedloop.instruments`` entry points."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

import instruments.registry as registry
from instruments import SimLabDriver, available_drivers, load_driver
from vocabulary.domain import SetupError


def test_simlab_is_registered():
    assert available_drivers()["simlab"] == "instruments.simlab:SimLabDriver"


def test_load_driver_builds_it_with_params():
    lab = load_driver("simlab", oracle=lambda c: 1.0, seed=9, start_time_s=50.0)
    assert isinstance(lab, SimLabDriver)
    assert (lab.seed, lab.now) == (9, 50.0)


def test_unknown_name_lists_available_drivers():
    with pytest.raises(SetupError, match=r"'hplc' is not registered; available: .*simlab"):
        load_driver("hplc")


def test_bad_params_are_a_setup_error():
    with pytest.raises(SetupError, match="rejected its parameters"):
        load_driver("simlab", oracle=lambda c: 1.0, colour="red")


def fake_group(monkeypatch, *eps: tuple[str, str]) -> None:
    points = [EntryPoint(name=name, value=value, group=registry.ENTRY_POINT_GROUP) for name, value in eps]
    monkeypatch.setattr(registry, "entry_points", lambda group: [ep for ep in points if ep.group == group])


def test_duplicate_registrations_are_refused(monkeypatch):
    fake_group(monkeypatch, ("lab", "instruments.simlab:SimLabDriver"), ("lab", "other.module:Lab"))
    with pytest.raises(SetupError, match="registered more than once"):
        load_driver("lab", oracle=lambda c: 1.0)


def test_same_target_listed_twice_is_not_a_duplicate(monkeypatch):
    fake_group(monkeypatch, ("lab", "instruments.simlab:SimLabDriver"), ("lab", "instruments.simlab:SimLabDriver"))
    assert isinstance(load_driver("lab", oracle=lambda c: 1.0), SimLabDriver)


def test_unimportable_target_is_a_setup_error(monkeypatch):
    fake_group(monkeypatch, ("ghost", "no_such_module_xyz:Driver"))
    with pytest.raises(SetupError, match="cannot be imported"):
        load_driver("ghost")


def test_target_that_is_not_a_driver_is_refused(monkeypatch):
    fake_group(monkeypatch, ("dict", "builtins:dict"))
    with pytest.raises(SetupError, match="does not implement InstrumentDriver"):
        load_driver("dict")


def test_driver_members_are_checked_without_touching_the_network():
    from instruments import HttpDriver
    from instruments.registry import missing_members

    remote = HttpDriver("http://127.0.0.1:9", retries=0)  # nothing listens there
    assert missing_members(remote) == []
    assert remote._envelope is None and remote.n_retries == 0  # the envelope property was not run
    assert missing_members(SimLabDriver(oracle=lambda c: 1.0)) == []


def test_http_driver_loads_through_an_entry_point(monkeypatch):
    from instruments import HttpDriver

    fake_group(monkeypatch, ("http", "instruments.http_driver:HttpDriver"))
    remote = load_driver("http", base_url="http://127.0.0.1:9", token="t", retries=0)
    assert isinstance(remote, HttpDriver) and remote.token == "t"
    with pytest.raises(SetupError, match="must start with http"):
        load_driver("http", base_url="127.0.0.1:9")
