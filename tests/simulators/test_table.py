from __future__ import annotations

import math

import pytest

from simulators.table import TableSimulator
from simulators.testing import SimulatorContract
from vocabulary.domain import ConditionSpace, Material, Molecule, Parameter, SetupError

ETHANOL, BENZENE, WATER = (Molecule.parse(s) for s in ("CCO", "c1ccccc1", "O"))


def freesolv_calc(**kwargs) -> TableSimulator:
    values = {ETHANOL.id: -4.88, BENZENE.id: -0.86, WATER.id: math.nan}
    return TableSimulator("freesolv_calc", values, "dg_hydration", **kwargs)


class TestTableContract(SimulatorContract):
    def make_simulator(self):
        return freesolv_calc(fidelity=1, cost_s=30.0, applies_to=("molecule",))

    def good_candidates(self):
        return [ETHANOL, BENZENE]

    def failing_candidate(self):
        return Molecule.parse("CC(=O)O")

    def wrong_kind_candidate(self):
        return Material.parse("NaCl")


def test_looks_values_up_by_candidate_id():
    observations = freesolv_calc(fidelity=2, cost_s=30.0).evaluate([BENZENE, ETHANOL])
    assert [o.properties for o in observations] == [{"dg_hydration": -0.86}, {"dg_hydration": -4.88}]
    assert all(o.fidelity == 2 and o.cost_s == 30.0 and o.source == "freesolv_calc" for o in observations)


def test_missing_id_and_nan_fail_with_reasons_that_say_so():
    acetic_acid = Molecule.parse("CC(=O)O")
    missing, nan = freesolv_calc().evaluate([acetic_acid, WATER])
    assert missing.status == "failed" and acetic_acid.id in missing.reason and "not in table" in missing.reason
    assert nan.status == "failed" and "NaN" in nan.reason


def test_uncertainty_is_reported_per_value():
    [obs] = freesolv_calc(uncertainty=0.6).evaluate([ETHANOL])
    assert obs.uncertainty == {"dg_hydration": 0.6}
    [obs] = freesolv_calc().evaluate([ETHANOL])
    assert obs.uncertainty == {}


def test_serves_materials_and_conditions_by_id():
    space = ConditionSpace(parameters=(Parameter(name="T", kind="continuous", low=20, high=80, unit="°C"),))
    warm, nacl = space.parse({"T": 60}), Material.parse("NaCl")
    table = TableSimulator("yields", {warm.id: 0.7, nacl.id: 1.2}, "value")
    assert [o.properties["value"] for o in table.evaluate([warm, nacl])] == [0.7, 1.2]


def test_content_hash_in_parameters_changes_with_the_values():
    a = TableSimulator("t", {"x": 1.0}, "p").parameters
    b = TableSimulator("t", {"x": 2.0}, "p").parameters
    assert a["values_sha256"] != b["values_sha256"]
    assert a["n_values"] == 1 and a["property"] == "p"


def test_wrong_kind_is_a_setup_error():
    with pytest.raises(SetupError, match="molecule"):
        freesolv_calc(applies_to=("material",)).evaluate([ETHANOL])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"applies_to": ("protein",)}, "applies_to"),
        ({"applies_to": ()}, "applies_to"),
        ({"cost_s": -1.0}, "cost_s"),
        ({"uncertainty": math.nan}, "uncertainty"),
        ({"fidelity": -1}, "fidelity"),
    ],
)
def test_bad_settings_are_setup_errors(kwargs, message):
    with pytest.raises(SetupError, match=message):
        freesolv_calc(**kwargs)


def test_non_numeric_values_and_empty_property_are_setup_errors():
    with pytest.raises(SetupError, match="not a number"):
        TableSimulator("t", {"x": "high"}, "p")
    with pytest.raises(SetupError, match="property"):
        TableSimulator("t", {"x": 1.0}, "")
