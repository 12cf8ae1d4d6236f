"""The scorer registry, entry-point discovery, the step context and every built-in scorer's values."""

from __future__ import annotations

import math
from importlib.metadata import entry_points
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from rewards import scorers
from rewards.context import STAGES, ScoreValue, StepContext
from rewards.errors import RewardSetupError
from rewards.scorers import (
    get_scorer,
    improvement,
    novelty,
    register_builtin_scorers,
    register_scorer,
    scorer_names,
    screen_pass,
    validity,
    within_budget,
)
from vocabulary.domain import ClosedLoopError, SetupError


@pytest.fixture
def registry(monkeypatch):
    """A private copy of the registry, so tests can register freely; entry points not yet discovered."""
    monkeypatch.setattr(scorers, "_SCORERS", dict(scorers._SCORERS))
    monkeypatch.setattr(scorers, "_is_discovered", False)
    return scorers._SCORERS


def ctx(**overrides) -> StepContext:
    fields = {"stage": "proposal", "subject": "CCO", "arm": "llm", "is_valid": True}
    return StepContext(**(fields | overrides))


def fake_entry_point(name, hook=None, error=None):
    def load():
        if error is not None:
            raise error
        return hook

    return SimpleNamespace(name=name, value=f"thirdparty:{name}", load=load)


# --------------------------------------------------------------------------------------------------- built-ins
def test_validity_scores_plus_one_for_valid_and_minus_one_with_the_validators_reason():
    assert validity(ctx()).value == 1.0
    score = validity(ctx(is_valid=False, reason="SMILES 'C(' is not a valid molecule"))
    assert score.value == -1.0
    assert "SMILES 'C(' is not a valid molecule" in score.reason


def test_novelty_penalises_duplicates_and_ignores_invalid_proposals():
    assert novelty(ctx(is_duplicate=False)).value == 1.0
    assert novelty(ctx(is_duplicate=True)).value == -1.0
    assert novelty(ctx(is_valid=False, reason="bad")) is None


def test_screen_pass_needs_every_rung_and_is_not_applicable_without_rungs():
    assert screen_pass(ctx(stage="screen")) is None
    assert screen_pass(ctx(stage="screen", screen_statuses={"xtb": "ok", "dft": "ok"})).value == 1.0
    failed = screen_pass(ctx(stage="screen", screen_statuses={"xtb": "ok", "dft": "failed"}))
    assert failed.value == -1.0
    assert "dft" in failed.reason and "xtb" not in failed.reason


@pytest.mark.parametrize(
    ("n_lab_used", "lab_budget", "expected"), [(0, 3, 1.0), (2, 3, 1.0), (3, 3, -1.0), (4, 3, -1.0), (0, 0, -1.0)]
)
def test_within_budget_compares_experiments_used_before_dispatch_with_the_budget(n_lab_used, lab_budget, expected):
    assert within_budget(ctx(stage="dispatch", n_lab_used=n_lab_used, lab_budget=lab_budget)).value == expected


def test_within_budget_only_applies_at_dispatch():
    assert within_budget(ctx(stage="proposal", n_lab_used=5, lab_budget=3)) is None


@pytest.mark.parametrize(
    ("utility", "best_before", "expected"),
    [(2.0, 1.0, 1.0), (1.0, 1.0, 0.0), (0.5, 1.0, 0.0), (-3.0, None, 1.0)],
)
def test_improvement_rewards_beating_the_best_before(utility, best_before, expected):
    context = ctx(stage="outcome", lab_value=utility, utility=utility, best_utility_before=best_before)
    assert improvement(context).value == expected


def test_improvement_is_not_applicable_when_the_lab_failed_or_before_the_outcome():
    assert improvement(ctx(stage="outcome", lab_value=None, utility=None, best_utility_before=1.0)) is None
    assert improvement(ctx(stage="screen", lab_value=2.0, utility=2.0, best_utility_before=1.0)) is None


def test_builtin_scorers_are_registered_under_their_names():
    assert get_scorer("validity") is validity
    assert get_scorer("novelty") is novelty
    assert get_scorer("screen_pass") is screen_pass
    assert get_scorer("within_budget") is within_budget
    assert get_scorer("improvement") is improvement


# --------------------------------------------------------------------------------------------------- registry
def test_registering_a_different_function_under_a_taken_name_is_a_setup_error(registry):
    with pytest.raises(RewardSetupError, match="'validity' is already taken") as caught:
        register_scorer("validity")(lambda context: ScoreValue(value=1.0, reason="always"))
    assert isinstance(caught.value, SetupError)
    assert get_scorer("validity") is validity


def test_registering_a_new_name_then_a_duplicate(registry):
    @register_scorer("test.always_half")
    def always_half(context):
        return ScoreValue(value=0.5, reason="half")

    assert get_scorer("test.always_half") is always_half
    assert register_scorer("test.always_half")(always_half) is always_half  # same function: fine

    def other(context):
        return None

    with pytest.raises(RewardSetupError, match="test.always_half"):
        register_scorer("test.always_half")(other)


def test_builtin_registration_is_idempotent(registry):
    register_builtin_scorers()
    register_builtin_scorers()
    assert get_scorer("novelty") is novelty


@pytest.mark.parametrize("name", ["", "Validity", "has space", "1st", None])
def test_scorer_names_must_be_lower_case_identifiers(registry, name):
    with pytest.raises(RewardSetupError, match="not allowed"):
        register_scorer(name)


def test_registering_a_non_callable_is_a_setup_error(registry):
    with pytest.raises(RewardSetupError, match="must be a function"):
        register_scorer("test.not_callable")(42)


def test_unknown_scorer_names_the_known_ones_and_how_to_add_one(registry, monkeypatch):
    monkeypatch.setattr(scorers, "entry_points", lambda group: [])
    with pytest.raises(RewardSetupError) as caught:
        get_scorer("no_such_scorer")
    message = str(caught.value)
    assert "'no_such_scorer'" in message and "validity" in message and "closedloop.scorers" in message


# --------------------------------------------------------------------------------------------------- entry points
def test_the_builtin_entry_point_is_installed_and_points_at_the_registration_function():
    found = {ep.name: ep for ep in entry_points(group="closedloop.scorers")}
    assert found["builtin"].load() is register_builtin_scorers


def test_real_discovery_reloads_builtins_without_a_duplicate_error(registry):
    assert {"validity", "novelty", "screen_pass", "within_budget", "improvement"} <= set(scorer_names())


def test_third_party_scorers_are_found_through_entry_points_on_first_miss(registry, monkeypatch):
    def plugin_scorer(context):
        return ScoreValue(value=0.25, reason="plug-in")

    def register_plugin():
        register_scorer("thirdparty.quarter")(plugin_scorer)

    calls = []

    def fake_entry_points(group):
        calls.append(group)
        return [fake_entry_point("builtin", register_builtin_scorers), fake_entry_point("quarter", register_plugin)]

    monkeypatch.setattr(scorers, "entry_points", fake_entry_points)
    assert get_scorer("thirdparty.quarter") is plugin_scorer
    assert get_scorer("thirdparty.quarter")(ctx()).value == 0.25
    assert "thirdparty.quarter" in scorer_names()
    assert calls == ["closedloop.scorers"]  # discovered once per process


def test_a_plugin_that_fails_to_import_is_a_setup_error_naming_it(registry, monkeypatch):
    broken = fake_entry_point("broken", error=ImportError("No module named 'thirdparty'"))
    monkeypatch.setattr(scorers, "entry_points", lambda group: [broken])
    with pytest.raises(RewardSetupError, match="'broken'.*failed to import") as caught:
        scorer_names()
    assert isinstance(caught.value.__cause__, ImportError)


def test_a_plugin_claiming_a_builtin_name_is_a_duplicate_error(registry, monkeypatch):
    def hijack():
        register_scorer("validity")(lambda context: ScoreValue(value=1.0, reason="always valid"))

    monkeypatch.setattr(scorers, "entry_points", lambda group: [fake_entry_point("hijack", hijack)])
    with pytest.raises(RewardSetupError, match="already taken"):
        scorer_names()


def test_a_plugin_hook_that_is_not_callable_is_a_setup_error(registry, monkeypatch):
    monkeypatch.setattr(scorers, "entry_points", lambda group: [fake_entry_point("odd", hook="not a function")])
    with pytest.raises(RewardSetupError, match="not callable"):
        scorer_names()


# --------------------------------------------------------------------------------------------------- values
def test_an_invalid_context_must_carry_the_validators_reason():
    with pytest.raises(ValidationError, match="must say why"):
        StepContext(stage="proposal", subject="x", arm="llm", is_valid=False)


@pytest.mark.parametrize("bad", [{"stage": "lab"}, {"n_lab_used": -1}, {"screen_statuses": {"xtb": "maybe"}}])
def test_step_context_rejects_out_of_vocabulary_values(bad):
    with pytest.raises(ValidationError):
        ctx(**bad)


@pytest.mark.parametrize("value", [1.5, -1.01, math.nan, math.inf])
def test_score_values_stay_in_minus_one_to_one(value):
    with pytest.raises(ValidationError):
        ScoreValue(value=value, reason="r")


def test_a_score_value_needs_a_reason():
    with pytest.raises(ValidationError):
        ScoreValue(value=1.0, reason="")


def test_reward_errors_share_the_project_root():
    assert issubclass(RewardSetupError, ClosedLoopError)


finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
contexts = st.builds(
    StepContext,
    stage=st.sampled_from(STAGES),
    subject=st.text(max_size=20),
    arm=st.sampled_from(["llm", "bo", "random", "human", "imported"]),
    is_valid=st.just(True),
    is_duplicate=st.booleans(),
    screen_statuses=st.dictionaries(st.text(max_size=8), st.sampled_from(["ok", "failed"]), max_size=4),
    lab_value=st.none() | finite,
    utility=st.none() | finite,
    best_utility_before=st.none() | finite,
    n_lab_used=st.integers(0, 1000),
    lab_budget=st.integers(0, 1000),
)


@given(contexts)
def test_step_context_round_trips_through_json(context):
    assert StepContext.model_validate_json(context.model_dump_json()) == context


@given(contexts)
def test_builtin_scorers_return_none_or_a_bounded_value_with_a_reason(context):
    for fn in (validity, novelty, screen_pass, within_budget, improvement):
        result = fn(context)
        assert result is None or (-1.0 <= result.value <= 1.0 and result.reason)
