"""The BaseSimulator rules, checked with small in-test simulators."""

from __future__ import annotations

import math

import pytest

from simulators.base import BaseSimulator, Result, Simulator, require
from simulators.testing import SimulatorContract
from vocabulary.domain import Material, Molecule, SetupError, SimulationFailed


class AtomCountSimulator(BaseSimulator):
    """Reports the formula-unit size of a material; fails on request."""

    name, version, fidelity = "atom_count", "1", 1
    implemented_properties = ("n_atoms", "half")
    applies_to = frozenset({"material"})

    def __init__(self, fail_on: str = "Xe", **parameters) -> None:
        self.fail_on = fail_on
        self.calls: list[str] = []
        super().__init__({"fail_on": fail_on, **parameters})

    def cost_model(self, candidate):
        return 0.5 * candidate.n_atoms

    def calculate(self, candidate):
        self.calls.append(candidate.id)
        if self.fail_on in candidate.formula:
            raise SimulationFailed(f"{self.fail_on} refused to converge")
        return Result({"n_atoms": candidate.n_atoms}, {"n_atoms": 0.1})


class TestAtomCountContract(SimulatorContract):
    def make_simulator(self):
        return AtomCountSimulator()

    def good_candidates(self):
        return [Material.parse("Fe2O3"), Material.parse("NaCl"), Material.parse("LiFePO4")]

    def failing_candidate(self):
        return Material.parse("XeF2")

    def wrong_kind_candidate(self):
        return Molecule.parse("CCO")


def test_observation_carries_values_uncertainty_cost_and_provenance():
    [obs] = AtomCountSimulator().evaluate([Material.parse("Fe2O3")])
    assert obs.properties == {"n_atoms": 5.0}
    assert obs.uncertainty == {"n_atoms": 0.1}
    assert obs.cost_s == 2.5
    assert (obs.source, obs.source_version, obs.fidelity) == ("atom_count", "1", 1)
    assert obs.parameters == {"fail_on": "Xe"}


def test_failure_reason_is_the_simulation_failed_message():
    [obs] = AtomCountSimulator().evaluate([Material.parse("XeF2")])
    assert (obs.status, obs.reason, obs.cost_s) == ("failed", "Xe refused to converge", 1.5)


def test_unexpected_exception_becomes_a_failed_observation_naming_its_type():
    class Broken(AtomCountSimulator):
        def calculate(self, candidate):
            raise ZeroDivisionError("division by zero")

    [obs] = Broken().evaluate([Material.parse("NaCl")])
    assert obs.status == "failed" and obs.reason == "ZeroDivisionError: division by zero"


@pytest.mark.parametrize(
    ("returned", "reason_part"),
    [
        ({"n_atoms": math.nan}, "came out nan"),
        ({"n_atoms": "many"}, "not a number"),
        ({"volume": 1.0}, "undeclared properties ['volume']"),
        ({}, "no properties"),
        (Result({"n_atoms": 1.0}, {"n_atoms": -1.0}), "negative or unmatched"),
    ],
)
def test_unusable_results_become_failed_observations(returned, reason_part):
    class Odd(AtomCountSimulator):
        def calculate(self, candidate):
            return returned

    [obs] = Odd().evaluate([Material.parse("NaCl")])
    assert obs.status == "failed" and reason_part in obs.reason


def test_a_batch_that_fails_as_a_whole_fails_every_candidate():
    class NativeBatch(AtomCountSimulator):
        def calculate_batch(self, candidates):
            raise MemoryError("out of memory on the GPU")

    observations = NativeBatch().evaluate([Material.parse("NaCl"), Material.parse("KCl")])
    assert [o.status for o in observations] == ["failed", "failed"]
    assert all("out of memory" in o.reason for o in observations)


def test_a_batch_of_the_wrong_length_is_reported_not_truncated():
    class Short(AtomCountSimulator):
        def calculate_batch(self, candidates):
            return [{"n_atoms": 1.0}]

    observations = Short().evaluate([Material.parse("NaCl"), Material.parse("KCl")])
    assert [o.status for o in observations] == ["failed", "failed"]
    assert "returned 1 results for 2 candidates" in observations[0].reason


def test_a_broken_cost_model_fails_the_candidate_with_zero_cost():
    class Negative(AtomCountSimulator):
        def cost_model(self, candidate):
            return -1.0

    [obs] = Negative().evaluate([Material.parse("NaCl")])
    assert obs.status == "failed" and obs.reason.startswith("cost model failed") and obs.cost_s == 0.0


def test_wrong_kind_anywhere_in_the_batch_stops_it_before_any_calculation():
    sim = AtomCountSimulator()
    with pytest.raises(SetupError, match=r"applies to \['material'\].*is a molecule"):
        sim.evaluate([Material.parse("NaCl"), Molecule.parse("CCO")])
    assert sim.calls == []


def test_raw_input_instead_of_a_candidate_is_a_setup_error():
    with pytest.raises(SetupError, match="parse raw input first"):
        AtomCountSimulator().evaluate(["NaCl"])


def test_missing_optional_dependency_raises_setup_error_with_install_hint():
    class NeedsXtb(AtomCountSimulator):
        requires = (("closedloop_no_such_module.sub", "xtb"),)

    with pytest.raises(SetupError, match=r'pip install "closedloop\[xtb\]"'):
        NeedsXtb()


def test_require_accepts_an_installed_module():
    require("numpy", extra="dev", purpose="test")


def test_parameters_must_be_json_serialisable():
    with pytest.raises(SetupError, match="JSON-serialisable"):
        AtomCountSimulator(threshold=math.inf)
    with pytest.raises(SetupError, match="JSON-serialisable"):
        AtomCountSimulator(callback=print)


def test_wrong_declaration_is_a_setup_error_naming_every_problem():
    class Sloppy(AtomCountSimulator):
        name, fidelity, applies_to = "", -1, frozenset({"protein"})

    with pytest.raises(SetupError) as info:
        Sloppy()
    message = str(info.value)
    assert "name must be" in message and "fidelity=-1" in message and "protein" in message


def test_protocol_is_satisfied_by_a_duck_typed_class_and_not_by_a_plain_object():
    class Duck:
        name, version, fidelity = "duck", "1", 0
        implemented_properties, applies_to, parameters = ("x",), frozenset({"molecule"}), {}

        def cost_model(self, candidate):
            return 0.0

        def evaluate(self, candidates):
            return []

    assert isinstance(Duck(), Simulator)
    assert not isinstance(object(), Simulator)
