"""Planner arms: ``llm`` (a tool-using agent on any chat model), ``bo`` (pyro-ppl GP + batch log-EI, with the
ladder's surveyed rungs as cold start and prior mean), ``bo-sf`` (the same without the ladder), ``random`` (the
control), and the yardsticks ``cheap-first`` (the cheapest rung's order), ``botorch`` (BoTorch's qLogNEI) and
``botorch-onehot`` (the same on one-hot categories and scaled numbers, as a user sets BoTorch up for a reaction
grid). Other arms (a lab's own heuristic, the red-team's adversarial policies) plug in with
``register_planner``.

Example:
    >>> "bo" in planner_names() and "llm" in planner_names()
    True
"""

from __future__ import annotations

from orchestrator.planner_registry import (
    PlannerFactory,
    make_planner,
    planner_names,
    register_planner,
)
from orchestrator.policy.planners.base import Planner, PlanningContext
from orchestrator.policy.planners.bo import (
    BOPlanner,
    campaign_kernel,
    campaign_surrogate_state,
    choose_kernel,
    continuous_columns,
    fit_surrogate_state,
    surrogate_targets,
)
from orchestrator.policy.planners.random_arm import RandomPlanner

__all__ = [
    "BUILT_IN_ARMS",
    "BOPlanner",
    "Planner",
    "PlannerFactory",
    "PlanningContext",
    "RandomPlanner",
    "campaign_kernel",
    "campaign_surrogate_state",
    "choose_kernel",
    "continuous_columns",
    "fit_surrogate_state",
    "make_planner",
    "planner_names",
    "register_planner",
    "surrogate_targets",
]

def _llm(spec, *, shuffled: bool = False) -> Planner:
    from orchestrator.policy.planners.llm import LLMPlanner, ShuffledFeedbackLLMPlanner

    options = spec.planner if spec is not None else None
    cls = ShuffledFeedbackLLMPlanner if shuffled else LLMPlanner
    return cls(
        model=options.model if options else None,
        max_repair_rounds=options.max_repair_rounds if options else 2,
        shortlist_size=options.shortlist_size if options else None,
        max_tool_steps=options.llm_tool_steps if options else 0,
        anchors=options.llm_anchors if options else True,
        seed=spec.campaign.seed if spec is not None else 0,
    )


def _llm_shuffled(spec) -> Planner:
    """The llm arm shown the lab results shuffled among the measured candidates (does it use the feedback?)."""
    return _llm(spec, shuffled=True)


def _cheap_first(spec) -> Planner:
    from orchestrator.policy.planners.cheap_first import CheapFirstPlanner

    return CheapFirstPlanner()


def _botorch(spec) -> Planner:
    from orchestrator.policy.planners.botorch_planner import BoTorchPlanner

    return BoTorchPlanner()


def _botorch_onehot(spec) -> Planner:
    from orchestrator.policy.planners.botorch_onehot import BoTorchOneHotPlanner

    return BoTorchOneHotPlanner()


BUILT_IN_ARMS: dict[str, PlannerFactory] = {
    "llm": _llm,
    "llm-shuffled": _llm_shuffled,  # the llm arm shown the lab results shuffled among the measured candidates
    "bo": lambda spec: BOPlanner(),
    "bo-sf": lambda spec: BOPlanner(uses_ladder=False),  # single fidelity: the same planner without the ladder
    "random": lambda spec: RandomPlanner(),
    "cheap-first": _cheap_first,
    "botorch": _botorch,
    "botorch-onehot": _botorch_onehot,  # botorch on one-hot categories (SMILES columns too) and scaled numbers
}
"""The built-in arms' factories; ``orchestrator.planner_registry`` knows their names and calls these."""
