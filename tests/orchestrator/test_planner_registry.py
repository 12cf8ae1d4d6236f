"""The card knows the built-in arms by name; the policy builds them."""

import pytest

from orchestrator import planner_registry
from orchestrator.policy import planners
from vocabulary.domain import SetupError


def test_the_card_and_the_policy_list_the_same_built_in_arms():
    assert set(planner_registry.BUILT_IN_ARMS) == set(planners.BUILT_IN_ARMS)


@pytest.mark.parametrize("name", ["bo", "bo-sf", "random", "cheap-first"])
def test_a_built_in_arm_is_made_without_anyone_importing_the_planners_first(name):
    arm = planner_registry.make_planner(name)
    assert hasattr(arm, "propose")


def test_a_built_in_name_cannot_be_taken_by_another_arm():
    with pytest.raises(SetupError, match="already registered"):
        planner_registry.register_planner("bo", lambda spec: None)


def test_an_unknown_arm_names_the_ones_there_are():
    with pytest.raises(SetupError, match=r"unknown; available arms: \[.*'bo'"):
        planner_registry.make_planner("no-such-arm")
