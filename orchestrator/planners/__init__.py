"""Planner arms: ``bo`` (pyro-ppl GP + batch log-EI) and ``random`` (the control)."""

from .base import Planner, PlanningContext
from .bo import BOPlanner, choose_kernel, fit_surrogate_state
from .random_arm import RandomPlanner

__all__ = ["BOPlanner", "Planner", "PlanningContext", "RandomPlanner", "choose_kernel", "fit_surrogate_state", "make_planner"]


def make_planner(name: str) -> Planner:
    """The planner arm called ``name``."""
    from ..domain import SetupError

    planners = {"bo": BOPlanner, "random": RandomPlanner}
    if name not in planners:
        raise SetupError(f"planner arm {name!r} is unknown; available arms: {sorted(planners)}")
    return planners[name]()
