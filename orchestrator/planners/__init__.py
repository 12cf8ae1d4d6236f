"""Planner arms: ``llm`` (a tool-using agent on any chat model), ``bo`` (pyro-ppl GP + batch log-EI) and
``random`` (the control)."""

from .base import Planner, PlanningContext
from .bo import BOPlanner, choose_kernel, fit_surrogate_state
from .random_arm import RandomPlanner

__all__ = ["BOPlanner", "Planner", "PlanningContext", "RandomPlanner", "choose_kernel", "fit_surrogate_state", "make_planner"]


def make_planner(name: str, spec=None) -> Planner:
    """The planner arm called ``name`` (the llm arm takes its model and limits from ``spec.planner``)."""
    from ..domain import SetupError

    if name == "llm":
        from .llm import LLMPlanner

        options = spec.planner if spec is not None else None
        return LLMPlanner(
            model=options.model if options else None,
            max_repair_rounds=options.max_repair_rounds if options else 2,
            shortlist_size=options.shortlist_size if options else 24,
            seed=spec.campaign.seed if spec is not None else 0,
        )
    planners = {"bo": BOPlanner, "random": RandomPlanner}
    if name not in planners:
        raise SetupError(f"planner arm {name!r} is unknown; available arms: ['bo', 'llm', 'random']")
    return planners[name]()
