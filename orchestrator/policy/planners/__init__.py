"""Planner arms: ``llm`` (a tool-using agent on any chat model), ``bo`` (pyro-ppl GP + batch log-EI, with the
ladder's surveyed rungs as cold start and prior mean), ``bo-sf`` (the same without the ladder), ``random`` (the
control), and the yardsticks ``cheap-first`` (the cheapest rung's order), ``botorch`` (BoTorch's qLogNEI) and
``botorch-onehot`` (the same on one-hot categories and scaled numbers, as a user sets BoTorch up for a reaction
grid). Every arm is found by name through the ``closedloop.planners`` entry points (the built-ins' factories are
``planners.factories``), or registered in-process with ``register_planner`` (a lab's own heuristic, the red team's
adversarial policies). An arm declares what the campaign prepares for it as ``PlannerTraits``.

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
from orchestrator.policy.planners.base import (
    Planner,
    PlannerTraits,
    PlanningContext,
    check_planner_ready,
    planner_traits,
)
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
    "BOPlanner",
    "Planner",
    "PlannerFactory",
    "PlannerTraits",
    "PlanningContext",
    "RandomPlanner",
    "campaign_kernel",
    "campaign_surrogate_state",
    "check_planner_ready",
    "choose_kernel",
    "continuous_columns",
    "fit_surrogate_state",
    "make_planner",
    "planner_names",
    "planner_traits",
    "register_planner",
    "surrogate_targets",
]
