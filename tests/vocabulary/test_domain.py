import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vocabulary.domain import (
    ConditionSpace,
    InvalidCandidate,
    Material,
    Molecule,
    Observation,
    Parameter,
    Proposal,
    SetupError,
    candidate_from_dict,
    featurise,
    parse_candidate,
)

SPACE = ConditionSpace(parameters=(
    Parameter(name="temperature_c", kind="continuous", low=20, high=120, unit="°C"),
    Parameter(name="equivalents", kind="integer", low=1, high=5),
    Parameter(name="base", kind="categorical", choices=("DBU", "K2CO3", "Et3N")),
))


def test_molecule_is_canonical_and_keyed_by_inchikey():
    a, b = Molecule.parse("OCC"), Molecule.parse("C(O)C")
    assert a == b
    assert a.smiles == "CCO"
    assert a.id == "LFQSCWFLJHTTHZ-UHFFFAOYSA-N"
    assert a.n_heavy_atoms == 3


@pytest.mark.parametrize("bad", ["C1CC", "not a smiles", "", "C(C", "[Xx]"])
def test_invalid_smiles_names_the_value_and_a_fix(bad):
    with pytest.raises(InvalidCandidate) as err:
        Molecule.parse(bad)
    assert repr(bad) in str(err.value)
    assert "e.g." in str(err.value)


def test_material_reduced_formula_id():
    m = Material.parse("Fe4O6")
    assert m.id == "Fe2O3"
    assert m.n_atoms == 10


@pytest.mark.parametrize("bad,fragment", [("XzO2", "Xz"), ("", "empty"), ("Fe-2O3", "Fe-2O3")])
def test_invalid_formula_is_explained(bad, fragment):
    with pytest.raises(InvalidCandidate) as err:
        Material.parse(bad)
    assert fragment in str(err.value)


def test_conditions_checked_against_the_space():
    c = SPACE.parse({"temperature_c": 80, "equivalents": 2, "base": "DBU"})
    assert c.values == {"temperature_c": 80.0, "equivalents": 2, "base": "DBU"}
    assert c == SPACE.parse({"base": "DBU", "equivalents": 2.0, "temperature_c": 80.0})


@pytest.mark.parametrize("values,fragment", [
    ({"temperature_c": 300, "equivalents": 2, "base": "DBU"}, "temperature_c=300 is outside its range 20..120 °C"),
    ({"temperature_c": 80, "equivalents": 2.5, "base": "DBU"}, "whole number"),
    ({"temperature_c": 80, "equivalents": 2, "base": "NaOH"}, "pick one of"),
    ({"temperature_c": 80, "equivalents": 2}, "lack parameters ['base']"),
    ({"temperature_c": 80, "equivalents": 2, "base": "DBU", "ph": 7}, "unknown parameters ['ph']"),
    ({"temperature_c": "hot", "equivalents": 2, "base": "DBU"}, "not a number"),
])
def test_conditions_errors_name_the_value_and_the_fix(values, fragment):
    with pytest.raises(InvalidCandidate) as err:
        SPACE.parse(values)
    assert fragment in str(err.value)


def test_parameter_definition_errors():
    with pytest.raises(ValueError, match="low <= high"):
        Parameter(name="T", kind="continuous", low=5, high=1)
    with pytest.raises(ValueError, match="choices"):
        Parameter(name="base", kind="categorical")


def test_parse_candidate_dispatch_and_missing_space():
    assert parse_candidate("molecule", "c1ccccc1").smiles == "c1ccccc1"
    assert parse_candidate("material", "NaCl").id == "NaCl"
    with pytest.raises(SetupError, match="ConditionSpace"):
        parse_candidate("conditions", {"a": 1})


def test_featurisers_shapes_and_content():
    mols = [Molecule.parse(s) for s in ("CCO", "c1ccccc1", "CC(=O)O")]
    X = featurise(mols)
    assert X.shape == (3, 1024) and set(np.unique(X)) <= {0.0, 1.0}
    assert not np.array_equal(X[0], X[1])
    Xm = featurise([Material.parse("NaCl"), Material.parse("Fe2O3")])
    assert Xm.shape == (2, 107)
    assert Xm[0, 10] == pytest.approx(0.5) and Xm[1, 25] == pytest.approx(0.4)  # Na (Z=11), Fe (Z=26) fractions
    Xc = featurise([SPACE.parse({"temperature_c": 120, "equivalents": 1, "base": "Et3N"})], SPACE)
    assert Xc.tolist() == [[1.0, 0.0, 0.0, 0.0, 1.0]]  # T and equivalents scaled to [0, 1], then one-hot base


def test_failed_observation_needs_a_reason():
    with pytest.raises(ValueError, match="reason"):
        Observation(candidate_id="x", source="s", status="failed")


@settings(max_examples=40, deadline=None)
@given(t=st.floats(20, 120), eq=st.integers(1, 5), base=st.sampled_from(["DBU", "K2CO3", "Et3N"]))
def test_conditions_round_trip(t, eq, base):
    c = SPACE.parse({"temperature_c": t, "equivalents": eq, "base": base})
    assert candidate_from_dict(c.model_dump(mode="json")) == c


@settings(max_examples=30, deadline=None)
@given(smiles=st.sampled_from(["CCO", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1", "ClC(Cl)Cl", "C1CCCCC1"]),
       arm=st.sampled_from(["bo", "random", "llm"]), expected=st.none() | st.floats(-50, 50))
def test_proposal_round_trip(smiles, arm, expected):
    p = Proposal(candidate=Molecule.parse(smiles), arm=arm, hypothesis="h", expected=expected)
    assert Proposal.model_validate_json(p.model_dump_json()) == p
