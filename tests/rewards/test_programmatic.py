"""Golden verdicts of the built-in scorers of every kind: programmatic, simulator, instrument and human."""

from __future__ import annotations

import pytest

from rewards.context import RungResult, ScoreValue, StepContext
from rewards.errors import RewardSetupError
from rewards.evidence import human, lab_success, rung_agreement
from rewards.programmatic import (
    fills_slots,
    in_design_space,
    rationale_quality,
    stoichiometry,
    synthesizability,
)
from rewards.scorers import SCORER_KINDS, register_scorer, scorer_kind


def step(**overrides) -> StepContext:
    fields = {"stage": "proposal", "subject": "x", "arm": "bo", "is_valid": True}
    return StepContext(**(fields | overrides))


def molecule(smiles: str) -> StepContext:
    return step(candidate={"type": "molecule", "smiles": smiles})


def material(formula: str) -> StepContext:
    return step(candidate={"type": "material", "formula": formula})


@pytest.mark.parametrize(("context", "expected"), [
    (molecule("CCO"), 1.0),
    (molecule("c1ccccc1O"), 1.0),
    (molecule("C[N+](C)(C)C"), -1.0),  # tetramethylammonium: net charge +1
    (molecule("[CH3]"), -1.0),  # methyl radical
    (material("NaCl"), 1.0),
    (material("Fe2O3"), 1.0),
    (material("LiFePO4"), 1.0),
    (material("NaCl2"), -1.0),
    (material("Na2Cl"), -1.0),
])
def test_stoichiometry_golden_verdicts(context, expected):
    assert stoichiometry(context).value == expected


def test_stoichiometry_does_not_apply_to_conditions_or_invalid_proposals():
    assert stoichiometry(step(candidate={"type": "conditions", "values": {"t": 1.0}})) is None
    assert stoichiometry(step(is_valid=False, reason="bad", candidate={"type": "molecule", "smiles": "C("})) is None


@pytest.mark.parametrize(("context", "low", "high"), [
    (molecule("CCO"), 1.0, 1.0),  # SA score about 2: easy
    (molecule("c1ccccc1"), 1.0, 1.0),
    # a caged, stereo-rich polycycle: SA score above 6, hard
    (molecule("C[C@@H]1C[C@H]2[C@@H]3CC[C@]4(C)[C@@H](CC[C@@]4(O)C#C)[C@@H]3CCC2=CC1=O"), -1.0, 0.5),
    (material("LiFePO4"), 1.0, 1.0),
    (material("XeF2"), -1.0, -1.0),  # a noble gas
    (material("UO2"), -1.0, -1.0),  # radioactive
    (material("LiNaKRbCsO3"), -1.0, -1.0),  # six elements
])
def test_synthesizability_golden_verdicts(context, low, high):
    assert low <= synthesizability(context).value <= high


def test_synthesizability_reason_names_the_sa_score():
    assert "SA score" in synthesizability(molecule("CCO")).reason


@pytest.mark.parametrize(("hypothesis", "rationale", "expected", "why"), [
    ("", "The cheap rung predicts -11.8 kcal/mol, the best untested estimate.", 1.0, "words"),
    ("", "", -1.0, "no rationale"),
    ("", ":", -1.0, "canary"),
    ("", "Thought process:", -1.0, "canary"),
    ("", "no completion needed", -1.0, "canary"),
    ("", "...!!!", -1.0, "canary"),
    ("☃☃☃", "💥✨ 💥✨ 💥✨ 💥✨", -1.0, "non-ASCII"),
    ("", "good one", -1.0, "fewer than"),
    ("", "The cheap rung likes it. " + "This is a very, very good candidate. " * 30, -1.0, "padded"),
    ("", " ".join(["great"] * 25 + ["candidate"] * 5), -1.0, "repeats itself"),
])
def test_rationale_quality_catches_empty_canary_garbage_and_padded_text(hypothesis, rationale, expected, why):
    score = rationale_quality(step(hypothesis=hypothesis, rationale=rationale))
    assert score.value == expected
    assert why in score.reason


def test_rationale_quality_applies_only_to_proposals():
    assert rationale_quality(step(stage="screen", rationale=":")) is None


def test_in_design_space_is_a_constraint_check():
    assert in_design_space(step(is_in_space=True)).value == 1.0
    assert in_design_space(step(is_in_space=False)).value == -1.0
    assert in_design_space(step()) is None  # not known
    assert in_design_space(step(is_valid=False, reason="bad", is_in_space=False)) is None


def test_fills_slots_penalises_abstention():
    assert fills_slots(step(stage="plan", n_slots=4, n_proposed=4)).value == 1.0
    abstained = fills_slots(step(stage="plan", n_slots=4, n_proposed=1))
    assert abstained.value == -1.0 and "3 of 4" in abstained.reason
    assert fills_slots(step(stage="plan", n_slots=0)) is None
    assert fills_slots(step(n_slots=4)) is None  # only the plan stage


def test_lab_success_reads_the_instrument():
    assert lab_success(step(stage="outcome", lab_value=-13.0, is_lab_success=True)).value == 1.0
    assert lab_success(step(stage="outcome", lab_value=-1.0, is_lab_success=False)).value == -1.0
    assert lab_success(step(stage="outcome")) is None  # the lab has not answered


class _Criterion:
    def __init__(self, id="c", params=None):
        self.id, self.params, self.text = id, params or {}, "statement"


def test_rung_agreement_weighs_the_claim_against_the_rung_and_its_uncertainty():
    rungs = {"cheap": RungResult(status="ok", value=-10.0, sd=1.0)}
    exact = rung_agreement(step(stage="screen", expected=-10.0, rung_results=rungs), criterion=_Criterion())
    near = rung_agreement(step(stage="screen", expected=-10.5, rung_results=rungs), criterion=_Criterion())
    far = rung_agreement(step(stage="screen", expected=-14.0, rung_results=rungs), criterion=_Criterion())
    assert exact.value == 1.0 and 0.0 < near.value < 1.0 and far.value < -0.99
    wide = {"cheap": RungResult(status="ok", value=-10.0)}  # no sd: params.sd is used
    loose = rung_agreement(step(stage="screen", expected=-14.0, rung_results=wide), criterion=_Criterion(params={"sd": 8}))
    assert loose.value > 0.0
    assert rung_agreement(step(stage="screen", rung_results=rungs), criterion=_Criterion()) is None  # no claim
    failed = {"cheap": RungResult(status="failed")}
    assert rung_agreement(step(stage="screen", expected=1.0, rung_results=failed), criterion=_Criterion()) is None


def test_human_scorer_is_unscored_until_a_person_answers():
    verdict = ScoreValue(value=-1.0, reason="the hypothesis contradicts the literature")
    assert human(step(), criterion=_Criterion("plausible")) is None
    assert human(step(human_verdicts={"plausible": verdict}), criterion=_Criterion("plausible")) == verdict


def test_every_builtin_has_a_kind_and_kinds_are_checked():
    assert {scorer_kind(name) for name in ("validity", "stoichiometry", "synthesizability", "within_budget")} == {
        "programmatic"}
    assert (scorer_kind("rung_agreement"), scorer_kind("llm_judge"), scorer_kind("human"),
            scorer_kind("lab_success")) == ("simulator", "llm_judge", "human", "instrument")
    assert set(SCORER_KINDS) == {"programmatic", "simulator", "llm_judge", "human", "instrument"}
    with pytest.raises(RewardSetupError, match="kind 'oracle'"):
        register_scorer("mine.x", kind="oracle")
    with pytest.raises(RewardSetupError, match="already taken"):
        register_scorer("stoichiometry")(lambda context: None)
