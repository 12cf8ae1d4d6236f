"""What a planner arm declares: its traits (read once, never sniffed) and its readiness check."""

from __future__ import annotations

import pytest

from orchestrator.policy.planners import (
    PlannerTraits,
    check_planner_ready,
    make_planner,
    planner_traits,
)
from vocabulary.domain import SetupError


class Plain:
    name = "plain"

    def propose(self, context, n):
        return []


def test_an_arm_that_declares_nothing_gets_nothing_prepared():
    assert planner_traits(Plain()) == PlannerTraits()
    assert not any(vars(PlannerTraits()).values())


def test_traits_of_the_wrong_type_are_refused_with_the_fix():
    class Loose(Plain):
        traits = {"uses_ladder": True}

    with pytest.raises(SetupError, match=r"'plain' declares traits=.*not a PlannerTraits; declare `traits = "
                                         r"PlannerTraits\(uses_surrogate="):
        planner_traits(Loose())
    with pytest.raises(SetupError, match="not a PlannerTraits"):
        check_planner_ready(Loose())


def test_traits_are_frozen():
    with pytest.raises(AttributeError):
        PlannerTraits().uses_ladder = True  # type: ignore[misc]


@pytest.mark.parametrize(("arm", "expected"), [
    ("bo", PlannerTraits(uses_surrogate=True, uses_ladder=True)),
    ("bo-sf", PlannerTraits(uses_surrogate=True)),
    ("random", PlannerTraits()),
    ("cheap-first", PlannerTraits(uses_ladder=True)),
    ("botorch", PlannerTraits()),
    ("botorch-onehot", PlannerTraits()),
    ("llm", PlannerTraits(uses_surrogate=True, uses_ladder=True, reads_provenance=True, records_llm_calls=True)),
    ("llm-shuffled", PlannerTraits(uses_surrogate=True, uses_ladder=True, reads_provenance=True,
                                   records_llm_calls=True)),
])
def test_every_built_in_arm_declares_its_traits(arm, expected):
    planner = make_planner(arm)
    assert planner_traits(planner) == expected
    loose = [name for name in ("uses_surrogate", "uses_ladder", "reads_provenance") if hasattr(planner, name)]
    assert loose == [], "traits live in planner.traits only"


def test_the_readiness_check_runs_where_an_arm_defines_one():
    calls = []

    class Careful(Plain):
        def check_ready(self):
            calls.append(self.name)
            raise SetupError("the careful arm's model is not installed; install it")

    check_planner_ready(Plain())  # no check_ready: nothing to check
    with pytest.raises(SetupError, match="not installed"):
        check_planner_ready(Careful())
    assert calls == ["plain"]
