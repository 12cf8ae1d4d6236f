"""SafetyEnvelope: every kind of limit, the messages, serialisation, and EnvelopeViolation."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from instruments import (
    EnvelopeViolation,
    FaultPlan,
    LabJob,
    ParameterLimit,
    SafetyEnvelope,
)
from vocabulary.domain import Conditions, InstrumentFault, Molecule

FURNACE = SafetyEnvelope(
    name="furnace",
    parameters={
        "temperature_c": (25, 250, "°C"),
        "pressure_bar": ParameterLimit(high=10.0, unit="bar"),
        "solvent": ParameterLimit(choices={"DMF", "THF"}),
    },
    allowed_reagents={"CCO", "c1ccccc1"},
    forbidden_hazards={"pyrophoric", "H224"},
    allowed_steps={"synthesis", "workup", "characterisation"},
    max_job_duration_s=86_400.0,
)


def job(values=None, **parameters) -> LabJob:
    return LabJob(job_key="j", candidate=Conditions(values=values or {}, id="c"), parameters=parameters)


def test_a_job_inside_every_limit_passes():
    ok = job({"temperature_c": 80.0}, solvent="THF", reagents=["CCO"], hazards=["H302"], ttl_s=3600, priority=-5)
    assert FURNACE.check(ok) == []
    FURNACE.require(ok)


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        (job({"temperature_c": 300}), "temperature_c=300 is outside the furnace envelope 25..250 °C; lower it"),
        (job({"temperature_c": 5.5}), "temperature_c=5.5 is outside the furnace envelope 25..250 °C; raise it"),
        (job(pressure_bar=12), "pressure_bar=12 (job parameter) is outside the furnace envelope <= 10 bar"),
        (job(temperature_c="hot"), "temperature_c='hot' (job parameter) is not a number"),
        (job(solvent="DCM"), "solvent='DCM' (job parameter) is not allowed on the furnace; use one of 'DMF', 'THF'"),
        (job(reagents=["CCN"]), "reagent 'CCN' is not on the furnace's allowed list"),
        (job(reagents="CCO"), "must be a list of identifiers"),
        (job(hazards=["h224"]), "hazard class 'h224' is forbidden on the furnace"),
        (job(ttl_s=2 * 86_400), "ttl_s=172800 s exceeds the furnace maximum job duration 86400 s"),
        (job(duration_s=-1), "duration_s=-1 must be a positive number of seconds"),
    ],
)
def test_each_violation_names_the_value_the_limit_and_the_fix(bad, expected):
    violations = FURNACE.check(bad)
    assert len(violations) == 1 and expected in violations[0], violations


def test_steps_outside_the_allowed_set_are_refused():
    bad = LabJob(job_key="j", candidate=Conditions(values={}, id="c"), steps=("synthesis", "calcination"))
    assert FURNACE.check(bad) == [
        "step 'calcination' is not allowed on the furnace (allowed: characterisation, synthesis, workup); "
        "remove it from the protocol or run the job in another lab"
    ]


def test_all_violations_are_reported_together_and_require_raises():
    bad = job({"temperature_c": 900}, hazards=["pyrophoric"], reagents=["[Na]"])
    with pytest.raises(EnvelopeViolation) as refused:
        FURNACE.require(bad)
    assert len(refused.value.violations) == 3
    assert refused.value.job_key == "j"
    assert isinstance(refused.value, InstrumentFault)
    assert str(refused.value).startswith("job 'j' is outside the furnace safety envelope: temperature_c=900")


def test_a_job_parameter_repeating_the_candidate_value_is_checked_once():
    repeated = LabJob(job_key="j", candidate=Conditions(values={"temperature_c": 300}, id="c"),
                      parameters={"temperature_c": 300, "reagents": ["CCO"]})
    assert len(FURNACE.check(repeated)) == 1
    different = LabJob(job_key="j", candidate=Conditions(values={"temperature_c": 300}, id="c"),
                       parameters={"temperature_c": 400})
    assert len(FURNACE.check(different)) == 2


def test_required_setting_missing():
    strict = SafetyEnvelope(parameters={"temperature_c": ParameterLimit(low=0, high=100, is_required=True)})
    assert "temperature_c is required by the lab envelope (0..100)" in strict.check(job())[0]
    assert strict.check(job({"temperature_c": 50})) == []


def test_settings_of_non_conditions_candidates_come_from_parameters_only():
    mol = LabJob(job_key="m", candidate=Molecule(smiles="CCO", id="LFQSCWFLJHTTHZ-UHFFFAOYSA-N"),
                 parameters={"temperature_c": 400})
    assert "temperature_c=400 (job parameter)" in FURNACE.check(mol)[0]


def test_default_envelope_is_permissive():
    assert SafetyEnvelope().is_permissive and not FURNACE.is_permissive
    assert SafetyEnvelope().check(job({"temperature_c": 1e9}, hazards=["anything"], reagents=["x"])) == []


def test_bad_limits_are_refused():
    with pytest.raises(ValidationError, match="swap them"):
        ParameterLimit(low=5, high=1)
    with pytest.raises(ValidationError, match="not both"):
        ParameterLimit(low=0, choices={"a"})
    with pytest.raises(ValidationError):
        SafetyEnvelope(max_job_duration_s=0)


def test_envelope_violation_pickles_with_its_violations():
    error = EnvelopeViolation.for_job("k", ["a is too big", "b is forbidden"], envelope_name="furnace")
    again = pickle.loads(pickle.dumps(error))
    assert (str(again), again.violations, again.job_key) == (str(error), error.violations, "k")


names = st.text(alphabet="abcdefghij_", min_size=1, max_size=8)
bounds = st.one_of(st.none(), st.floats(min_value=-1e6, max_value=1e6))


@st.composite
def limits(draw):
    if draw(st.booleans()):
        return ParameterLimit(choices=draw(st.frozensets(names, min_size=1, max_size=3)))
    low, high = sorted([draw(st.floats(-1e6, 1e6)), draw(st.floats(-1e6, 1e6))])
    return ParameterLimit(low=draw(st.sampled_from([None, low])), high=draw(st.sampled_from([None, high])),
                          unit=draw(st.sampled_from(["", "°C", "bar"])), is_required=draw(st.booleans()))


@given(
    name=names,
    parameters=st.dictionaries(names, limits(), max_size=3),
    reagents=st.one_of(st.none(), st.frozensets(names, max_size=3)),
    hazards=st.frozensets(names, max_size=3),
    steps=st.one_of(st.none(), st.frozensets(names, max_size=3)),
    max_s=st.one_of(st.none(), st.floats(min_value=1.0, max_value=1e7)),
)
def test_safety_envelope_round_trips(name, parameters, reagents, hazards, steps, max_s):
    envelope = SafetyEnvelope(name=name, parameters=parameters, allowed_reagents=reagents, forbidden_hazards=hazards,
                              allowed_steps=steps, max_job_duration_s=max_s)
    assert SafetyEnvelope.model_validate_json(envelope.model_dump_json()) == envelope


@given(
    p=st.floats(0.0, 1.0), jam_s=st.floats(0.0, 1e5), factor=st.floats(1.0, 10.0),
    windows=st.lists(st.tuples(st.sampled_from(["synthesis", "workup"]), st.floats(0, 1e5)), max_size=3),
    forced=st.dictionaries(names, st.sampled_from(["robot_jam", "station_timeout", "bad_reading"]), max_size=3),
)
def test_fault_plan_round_trips(p, jam_s, factor, windows, forced):
    # non-overlapping windows: each station's windows laid end to end
    laid, ends = [], {}
    for station, length in windows:
        start = ends.get(station, 0.0)
        laid.append((station, start, start + length + 1.0))
        ends[station] = start + length + 1.0
    plan = FaultPlan(robot_jam_probability=p, robot_jam_s=jam_s, station_timeout_probability=p,
                     station_timeout_factor=factor, bad_reading_probability=p, station_down=laid, forced=forced)
    assert FaultPlan.model_validate_json(plan.model_dump_json()) == plan


def test_fault_plan_refuses_bad_windows_and_probabilities():
    with pytest.raises(ValidationError, match="start_s < end_s"):
        FaultPlan(station_down=[("workup", 10.0, 10.0)])
    with pytest.raises(ValidationError, match="overlap"):
        FaultPlan(station_down=[("workup", 0.0, 100.0), ("workup", 50.0, 150.0)])
    with pytest.raises(ValidationError):
        FaultPlan(bad_reading_probability=1.5)
    FaultPlan(station_down=[("workup", 0.0, 100.0), ("workup", 100.0, 150.0)])  # touching is fine
