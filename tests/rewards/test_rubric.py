"""Rubric loading, validation errors, content hashing, scoring and aggregation (gates, None exclusion)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rewards import scorers
from rewards.context import STAGES, ScoreValue, StepContext
from rewards.errors import RewardSetupError, ScoringError
from rewards.rubric import (
    Criterion,
    CriterionScore,
    Rubric,
    builtin_rubric_names,
    load_rubric,
    parse_rubric,
)
from rewards.scorers import register_scorer
from vocabulary.domain import SetupError

DEFAULT_TOML = Path(__file__).parents[2] / "rewards" / "rubrics" / "default.toml"

TINY = """
[rubric]
id = "tiny"
version = "1"
description = "two criteria"

[[criteria]]
id = "valid"
text = "The proposal is a valid candidate."
category = "essential"
weight = 1.0
gate = "veto"
stages = ["proposal"]
scorer = "validity"

[[criteria]]
id = "novel"
text = "The candidate is new."
category = "important"
weight = 0.5
stages = ["proposal"]
scorer = "novelty"
"""

# The same rubric with keys reordered, other whitespace and comments.
TINY_REORDERED = """
# comments do not count
[[criteria]]
scorer = "validity"
stages = [ "proposal" ]
gate = "veto"
weight = 1.0
category = "essential"
text = "The proposal is a valid candidate."
id = "valid"

[[criteria]]
stages=["proposal"]
scorer="novelty"
id="novel"
weight=0.5
category="important"
text="The candidate is new."

[rubric]
description = "two criteria"
version = "1"
id = "tiny"
"""


def ctx(**overrides) -> StepContext:
    fields = {"stage": "proposal", "subject": "CCO", "arm": "llm", "is_valid": True,
              "candidate": {"type": "molecule", "smiles": "CCO"},
              "rationale": "the gaff rung puts it inside the target window"}
    return StepContext(**(fields | overrides))


@pytest.fixture
def registry(monkeypatch):
    """A private registry with constant and misbehaving test scorers."""
    monkeypatch.setattr(scorers, "_SCORERS", dict(scorers._SCORERS))
    for value in (-1.0, -0.5, 0.0, 0.25, 0.5, 1.0):
        register_scorer(const(value))(_constant(value))
    register_scorer("test.not_applicable")(lambda context: None)
    register_scorer("test.raises")(_raises)
    register_scorer("test.returns_float")(lambda context: 0.5)
    return scorers._SCORERS


def _constant(value):
    def scorer(context):
        return ScoreValue(value=value, reason=f"always {value:+g}")

    return scorer


def _raises(context):
    raise KeyError("screen_statuses")


def const(value: float) -> str:
    return f"test.const_{value:g}".replace("-", "minus")


def criterion(cid: str, scorer: str, weight: float = 1.0, gate: str = "none") -> Criterion:
    category = "pitfall" if weight < 0 else "important"
    return Criterion(
        id=cid, text=f"{cid} holds.", category=category, weight=weight, gate=gate, stages=("proposal",), scorer=scorer
    )


def rubric_of(*criteria: Criterion) -> Rubric:
    return Rubric(id="test", version="1", criteria=criteria)


def reward(rubric: Rubric, context: StepContext | None = None) -> float | None:
    return rubric.aggregate(rubric.score(context or ctx()))


# --------------------------------------------------------------------------------------------------- loading
def test_default_rubric_has_the_required_criteria():
    rubric = load_rubric("default")
    by_id = {c.id: c for c in rubric.criteria}
    assert (rubric.id, rubric.version) == ("default", "2")
    expected = {
        "fills_lab_slots": ("fills_slots", ("plan",)),
        "valid_candidate": ("validity", ("proposal",)),
        "in_design_space": ("in_design_space", ("proposal",)),
        "novel_candidate": ("novelty", ("proposal",)),
        "rationale_is_text": ("rationale_quality", ("proposal",)),
        "charge_balanced": ("stoichiometry", ("proposal",)),
        "synthesizable": ("synthesizability", ("proposal",)),
        "passes_screen": ("screen_pass", ("screen",)),
        "claim_matches_rung": ("rung_agreement", ("screen",)),
        "dispatch_within_budget": ("within_budget", ("dispatch",)),
        "lab_success": ("lab_success", ("outcome",)),
        "improves_best": ("improvement", ("outcome",)),
    }
    for cid, (scorer, stages) in expected.items():
        assert (by_id[cid].scorer, by_id[cid].stages) == (scorer, stages)
    assert by_id["valid_candidate"].gate == "veto"
    assert by_id["novel_candidate"].category == "important"
    assert by_id["dispatch_within_budget"].category == "essential"
    assert (by_id["improves_best"].category, by_id["improves_best"].scope) == ("important", "outcome")
    assert by_id["fills_lab_slots"].gate == by_id["in_design_space"].gate == "veto"
    assert rubric.reward.outcome_weight > 0


def test_default_rubric_by_name_equals_the_file_by_path():
    assert "default" in builtin_rubric_names()
    by_name = load_rubric("default")
    by_path = load_rubric(DEFAULT_TOML)
    assert by_name == by_path
    assert load_rubric(str(DEFAULT_TOML)).content_hash == by_name.content_hash


@pytest.mark.parametrize(
    ("context", "expected"),
    [
        (ctx(), 1.0),
        (ctx(is_valid=False, reason="unclosed ring"), -1.0),  # vetoed
        (ctx(is_duplicate=True), -1.0),  # floored by novelty
        (ctx(stage="screen", screen_statuses={"xtb": "ok"}), 1.0),
        (ctx(stage="screen"), None),  # no rungs ran: nothing applies
        (ctx(stage="dispatch", n_lab_used=3, lab_budget=3), -1.0),
        (ctx(stage="outcome", lab_value=1.0, utility=1.0, best_utility_before=2.0), 0.0),
        (ctx(stage="outcome", lab_value=None), None),
    ],
)
def test_default_rubric_rewards(context, expected):
    assert reward(load_rubric("default"), context) == expected


def test_score_only_scores_criteria_for_the_contexts_stage():
    rubric = load_rubric("default")
    assert [s.criterion_id for s in rubric.score(ctx())] == [
        "valid_candidate", "novel_candidate", "rationale_is_text", "charge_balanced", "synthesizable"]
    outcome = ctx(stage="outcome", lab_value=2.0, utility=2.0, best_utility_before=1.0)
    assert [(s.criterion_id, s.value) for s in rubric.score(outcome)] == [("improves_best", 1.0)]
    assert [c.id for c in rubric.criteria_for("dispatch")] == ["dispatch_within_budget"]


def test_criterion_scores_carry_weight_gate_and_reason():
    rubric = load_rubric("default")
    scores = rubric.score(ctx(is_valid=False, reason="SMILES 'C(' is not a valid molecule"))
    assert "novel_candidate" not in {s.criterion_id for s in scores}  # no identity to be novel or not
    [valid] = [s for s in scores if s.criterion_id == "valid_candidate"]
    assert (valid.criterion_id, valid.value, valid.weight, valid.gate) == ("valid_candidate", -1.0, 1.0, "veto")
    assert "SMILES 'C(' is not a valid molecule" in valid.reason


# --------------------------------------------------------------------------------------------------- hashing
def test_content_hash_ignores_toml_key_order_whitespace_and_comments():
    plain, reordered = parse_rubric(TINY), parse_rubric(TINY_REORDERED)
    assert plain == reordered
    assert plain.content_hash == reordered.content_hash


def test_content_hash_changes_with_a_weight():
    changed = parse_rubric(TINY.replace("weight = 0.5", "weight = 0.75"))
    assert changed.content_hash != parse_rubric(TINY).content_hash


def test_content_hash_is_sha256_of_sorted_compact_json():
    rubric = parse_rubric(TINY)
    canonical = json.dumps(json.loads(rubric.model_dump_json()), sort_keys=True, separators=(",", ":"))
    assert rubric.content_hash == hashlib.sha256(canonical.encode()).hexdigest()


# --------------------------------------------------------------------------------------------------- invalid files
@pytest.mark.parametrize(
    ("old", "new", "path", "hint"),
    [
        ('category = "important"', 'category = "importnat"', "criteria[1].category (criterion 'novel')", "'essential'"),
        ('scorer = "novelty"', 'scorer = "novelity"', "criteria[1].scorer (criterion 'novel')", "no scorer is"),
        ('stages = ["proposal"]\nscorer = "novelty"', 'stages = []\nscorer = "novelty"', "criteria[1].stages", "empty"),
        ('id = "novel"', 'id = "valid"', "criteria[1].id", "unique"),
        ('weight = 0.5', 'weight = -0.5', "criteria[1].weight", 'category = "pitfall"'),
        ('category = "important"', 'category = "pitfall"', "criteria[1].weight", "negative weight"),
        ('category = "important"', 'category = "safety"', "criteria[1].gate", '"veto" or "floor"'),
        ('gate = "veto"', 'gate = "sometimes"', "criteria[0].gate (criterion 'valid')", "'veto'"),
        ('weight = 0.5', 'weight = 0.5\nwieght = 1', "criteria[1].wieght", "allowed keys"),
        ('version = "1"', "version = 1", "rubric.version", 'quote it'),
        ('id = "tiny"', 'id = "Tiny Rubric"', "rubric.id", "lower-case"),
    ],
)
def test_invalid_rubric_errors_name_the_file_the_field_and_a_fix(registry, tmp_path, old, new, path, hint):
    assert old in TINY
    file = tmp_path / "broken.toml"
    file.write_text(TINY.replace(old, new, 1))
    with pytest.raises(SetupError) as caught:
        load_rubric(file)
    message = str(caught.value)
    assert str(file) in message
    assert path in message
    assert hint in message


def test_a_file_without_criteria_is_invalid():
    with pytest.raises(RewardSetupError, match="at least one criterion"):
        parse_rubric('[rubric]\nid = "x"\nversion = "1"\n')


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("[rubric\nid =", "not valid TOML"),
        ('[[criteria]]\nid = "a"\n', r"\[rubric\] table is missing"),
        ('[rubric]\nid = "x"\nversion = "1"\n[extras]\na = 1\n', "unknown top-level"),
        ('criteria = 3\n[rubric]\nid = "x"\nversion = "1"\n', "array of tables"),
    ],
)
def test_malformed_files_are_setup_errors(text, match):
    with pytest.raises(RewardSetupError, match=match):
        parse_rubric(text)


def test_missing_files_and_unknown_builtin_names_are_setup_errors(tmp_path):
    with pytest.raises(RewardSetupError, match="does not exist"):
        load_rubric(tmp_path / "absent.toml")
    with pytest.raises(RewardSetupError, match="no built-in rubric 'nonesuch'.*'default'"):
        load_rubric("nonesuch")


def test_a_programmatic_rubric_with_an_unknown_scorer_fails_check_and_score(registry):
    rubric = rubric_of(criterion("a", "test.unregistered"))
    with pytest.raises(RewardSetupError, match=r"criteria\[0\]\.scorer"):
        rubric.check_scorers()
    with pytest.raises(RewardSetupError, match="test.unregistered"):
        rubric.score(ctx())


# --------------------------------------------------------------------------------------------------- aggregation
def test_aggregate_is_the_weighted_mean(registry):
    rubric = rubric_of(criterion("a", const(1.0), weight=3.0), criterion("b", const(-1.0), weight=1.0))
    assert reward(rubric) == pytest.approx(0.5)


def test_a_pitfall_that_holds_lowers_the_reward(registry):
    rubric = rubric_of(criterion("good", const(1.0), weight=1.0), criterion("trap", const(1.0), weight=-1.0))
    assert reward(rubric) == pytest.approx(0.0)
    quiet_trap = rubric_of(criterion("good", const(1.0), weight=1.0), criterion("trap", const(0.0), weight=-1.0))
    assert reward(quiet_trap) == pytest.approx(0.5)


def test_a_veto_criterion_scoring_negative_makes_the_step_minus_one(registry):
    vetoed = rubric_of(criterion("gate", const(-0.5), 0.1, "veto"), criterion("rest", const(1.0), 100.0))
    assert reward(vetoed) == -1.0
    passed = rubric_of(criterion("gate", const(0.0), 1.0, "veto"), criterion("rest", const(1.0), 1.0))
    assert reward(passed) == pytest.approx(0.5)


def test_a_vetoing_pitfall_fires_when_the_pitfall_is_present(registry):
    present = rubric_of(criterion("trap", const(1.0), weight=-0.1, gate="veto"), criterion("rest", const(1.0)))
    assert reward(present) == -1.0
    absent = rubric_of(criterion("trap", const(0.0), weight=-0.1, gate="veto"), criterion("rest", const(1.0)))
    assert reward(absent) == pytest.approx(1.0 / 1.1)


def test_a_floor_criterion_caps_the_reward_at_its_own_score(registry):
    capped = rubric_of(criterion("floor", const(0.25), 0.1, "floor"), criterion("rest", const(1.0), 10.0))
    assert reward(capped) == pytest.approx(0.25)
    uncapped = rubric_of(criterion("floor", const(1.0), 1.0, "floor"), criterion("rest", const(-1.0), 1.0))
    assert reward(uncapped) == pytest.approx(0.0)


def test_none_is_excluded_not_counted_as_zero(registry):
    rubric = rubric_of(criterion("a", const(1.0)), criterion("n_a", "test.not_applicable", weight=5.0))
    scores = rubric.score(ctx())
    assert [s.criterion_id for s in scores] == ["a"]
    assert rubric.aggregate(scores) == 1.0


def test_nothing_applicable_gives_none_not_zero(registry):
    rubric = rubric_of(criterion("n_a", "test.not_applicable"), criterion("monitor", const(-1.0), weight=0.0))
    assert reward(rubric) is None
    assert rubric.aggregate([]) is None


def test_a_raising_scorer_is_a_scoring_error_naming_criterion_and_scorer(registry):
    rubric = rubric_of(criterion("ok", const(1.0)), criterion("fragile", "test.raises"))
    with pytest.raises(ScoringError) as caught:
        rubric.score(ctx())
    message = str(caught.value)
    assert "'fragile'" in message and "'test.raises'" in message and "KeyError" in message
    assert isinstance(caught.value.__cause__, KeyError)


def test_a_scorer_returning_a_bare_float_is_a_scoring_error(registry):
    rubric = rubric_of(criterion("sloppy", "test.returns_float"))
    with pytest.raises(ScoringError, match="'sloppy'.*ScoreValue"):
        rubric.score(ctx())


def test_aggregate_refuses_scores_from_another_rubric(registry):
    rubric = rubric_of(criterion("a", const(1.0)))
    foreign = CriterionScore(criterion_id="zzz", value=1.0, weight=1.0, gate="none", reason="r")
    with pytest.raises(ScoringError, match="'zzz'"):
        rubric.aggregate([foreign])
    [score] = rubric.score(ctx())
    with pytest.raises(ScoringError, match="twice"):
        rubric.aggregate([score, score])
    with pytest.raises(ScoringError, match="rescore"):
        rubric.aggregate([score.model_copy(update={"weight": 2.0})])


def test_zero_weight_criteria_cannot_be_gated():
    with pytest.raises(ValueError, match="zero-weight"):
        criterion("monitor", "validity", weight=0.0, gate="veto")


# --------------------------------------------------------------------------------------------------- properties
ids = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True)
texts = st.text(min_size=1, max_size=40).filter(str.strip)


@st.composite
def criteria_with(draw, cid: str) -> Criterion:
    category = draw(st.sampled_from(["essential", "important", "optional", "pitfall", "safety"]))
    magnitude = draw(st.floats(min_value=0.01, max_value=100, allow_nan=False))
    gates = ["veto", "floor"] if category == "safety" else ["none", "veto", "floor"]
    return Criterion(
        id=cid,
        text=draw(texts),
        category=category,
        weight=-magnitude if category == "pitfall" else magnitude,
        gate=draw(st.sampled_from(gates)),
        scope=draw(st.sampled_from(["step", "trajectory", "outcome"])),
        stages=tuple(draw(st.lists(st.sampled_from(STAGES), min_size=1, max_size=4, unique=True))),
        scorer=draw(st.sampled_from(["validity", "novelty", "screen_pass", "within_budget", "improvement"])),
    )


@st.composite
def rubrics(draw) -> Rubric:
    criterion_ids = draw(st.lists(ids, min_size=1, max_size=6, unique=True))
    return Rubric(
        id=draw(ids),
        version=draw(texts),
        description=draw(st.text(max_size=60)),
        criteria=tuple(draw(criteria_with(cid)) for cid in criterion_ids),
    )


@given(rubrics())
def test_rubric_round_trips_through_json(rubric):
    again = Rubric.model_validate_json(rubric.model_dump_json())
    assert again == rubric
    assert again.content_hash == rubric.content_hash


@given(rubrics(), st.data())
def test_aggregate_stays_in_range_and_vetoes_win(rubric, data):
    scores = [
        CriterionScore(
            criterion_id=c.id,
            value=data.draw(st.floats(min_value=-1, max_value=1)),
            weight=c.weight,
            gate=c.gate,
            reason="drawn",
        )
        for c in rubric.criteria
    ]
    result = rubric.aggregate(scores)
    assert result is not None and -1.0 <= result <= 1.0
    if any(s.gate == "veto" and s.oriented_value < 0 for s in scores):
        assert result == -1.0
    for s in scores:
        if s.gate == "floor":
            assert result <= s.oriented_value


@given(st.builds(CriterionScore, criterion_id=ids, value=st.floats(-1, 1), weight=st.floats(-10, 10),
                 gate=st.sampled_from(["none", "veto", "floor"]), reason=st.text(max_size=30)))
def test_criterion_score_round_trips_through_json(score):
    assert CriterionScore.model_validate_json(score.model_dump_json()) == score


def test_importing_rewards_does_not_import_torch():
    code = "import sys, rewards; rewards.load_rubric('default'); assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


# ----------------------------------------------------------- issue 46: a rubric saved with a BOM or CRLF line ends
@pytest.mark.parametrize("prefix,newline", [(b"\xef\xbb\xbf", b"\n"), (b"", b"\r\n"), (b"\xef\xbb\xbf", b"\r\n")])
def test_a_rubric_saved_with_a_byte_order_mark_or_crlf_is_the_same_rubric(tmp_path, prefix, newline):
    saved = tmp_path / "mine.toml"
    saved.write_bytes(prefix + DEFAULT_TOML.read_bytes().replace(b"\n", newline))
    loaded = load_rubric(saved)
    assert loaded == load_rubric("default") and loaded.content_hash == load_rubric("default").content_hash
    assert parse_rubric((prefix + DEFAULT_TOML.read_bytes()).decode("utf-8")) == loaded


def test_a_rubric_saved_as_utf16_is_refused_with_save_it_as_utf8(tmp_path):
    saved = tmp_path / "mine.toml"
    saved.write_bytes(DEFAULT_TOML.read_text(encoding="utf-8").encode("utf-16"))
    with pytest.raises(RewardSetupError) as err:
        load_rubric(saved)
    assert str(err.value) == (f"rubric file {str(saved)!r} is UTF-16 text (it starts with a UTF-16 byte-order mark); "
                              "save it as UTF-8")
