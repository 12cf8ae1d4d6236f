"""The built-in arms' factories, each ``factory(spec) -> Planner``: what the ``closedloop.planners`` entry points in
pyproject.toml name, the same way a third-party package names its own arms (``orchestrator.planner_registry``).

Each imports its planner's module when called, so the registry lists the arms without importing any planner.

Example:
    >>> make_bo_sf(None).traits.uses_ladder, make_random(None).name
    (False, 'random')
"""

from __future__ import annotations

from typing import Any

from orchestrator.policy.planners.base import Planner

__all__ = [
    "make_bo",
    "make_bo_sf",
    "make_botorch",
    "make_botorch_onehot",
    "make_cheap_first",
    "make_llm",
    "make_llm_oracle",
    "make_llm_random",
    "make_llm_shuffled",
    "make_random",
]


def make_llm(spec: Any, *, shuffled: bool = False, cls: type | None = None) -> Planner:
    """The ``llm`` arm, with its model and limits from ``spec.planner`` (defaults without a spec); ``cls``: an llm
    arm's class to build instead (the bracket arms)."""
    from orchestrator.policy.planners.llm import LLMPlanner, ShuffledFeedbackLLMPlanner

    options = spec.planner if spec is not None else None
    cls = cls or (ShuffledFeedbackLLMPlanner if shuffled else LLMPlanner)
    return cls(
        model=options.model if options else None,
        max_repair_rounds=options.max_repair_rounds if options else 2,
        shortlist_size=options.shortlist_size if options else None,
        max_tool_steps=options.llm_tool_steps if options else 0,
        anchors=options.llm_anchors if options else True,
        seed=spec.campaign.seed if spec is not None else 0,
    )


def make_llm_shuffled(spec: Any) -> Planner:
    """The ``llm-shuffled`` arm: the llm arm shown the lab results shuffled among the measured candidates (does it
    use the feedback?)."""
    return make_llm(spec, shuffled=True)


def make_llm_random(spec: Any) -> Planner:
    """The ``llm-random`` arm: the llm arm's slots and shortlist with a seeded coin in the model's place (the floor
    of the model's bracket, ``llm_bracket``)."""
    from orchestrator.policy.planners.llm_bracket import RandomChoiceLLMPlanner

    return make_llm(spec, cls=RandomChoiceLLMPlanner)


def make_llm_oracle(spec: Any) -> Planner:
    """The ``llm-oracle`` arm: the same with the lab's truth in the model's place (the ceiling; registered by
    ``closedloop bench`` only, ``orchestrator.bench.bracket``)."""
    from orchestrator.policy.planners.llm_bracket import OracleChoiceLLMPlanner

    return make_llm(spec, cls=OracleChoiceLLMPlanner)


def make_bo(spec: Any) -> Planner:
    """The ``bo`` arm: the GP with the ladder's surveyed rungs as cold start and prior mean."""
    from orchestrator.policy.planners.bo import BOPlanner

    return BOPlanner()


def make_bo_sf(spec: Any) -> Planner:
    """The ``bo-sf`` arm (single fidelity): the same planner without the ladder."""
    from orchestrator.policy.planners.bo import BOPlanner

    return BOPlanner(uses_ladder=False)


def make_random(spec: Any) -> Planner:
    """The ``random`` arm, the control."""
    from orchestrator.policy.planners.random_arm import RandomPlanner

    return RandomPlanner()


def make_cheap_first(spec: Any) -> Planner:
    """The ``cheap-first`` yardstick: the cheapest surveyed rung's order."""
    from orchestrator.policy.planners.cheap_first import CheapFirstPlanner

    return CheapFirstPlanner()


def make_botorch(spec: Any) -> Planner:
    """The ``botorch`` yardstick: BoTorch's SingleTaskGP and qLogNEI on the pool's features."""
    from orchestrator.policy.planners.botorch_planner import BoTorchPlanner

    return BoTorchPlanner()


def make_botorch_onehot(spec: Any) -> Planner:
    """The ``botorch-onehot`` yardstick: botorch on one-hot categories (SMILES columns too) and scaled numbers."""
    from orchestrator.policy.planners.botorch_onehot import BoTorchOneHotPlanner

    return BoTorchOneHotPlanner()
