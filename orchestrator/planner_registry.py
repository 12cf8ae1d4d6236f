"""Planner arms by name: the table that ``[planner] main`` and ``control`` are looked up in.

Importing ``orchestrator.policy.planners`` registers the built-in arms (Python runs the package before any of its modules, so
every caller sees them); other arms (a lab's own heuristic, the red team's policies) register with
``register_planner``. This module imports none of the planners, so the spec can check an arm's name without the
planners importing the spec back.

Example:
    >>> from orchestrator.policy.planners import planner_names
    >>> {"bo", "llm", "random"} <= set(planner_names())
    True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vocabulary.domain import SetupError

__all__ = ["PlannerFactory", "make_planner", "planner_names", "register_planner"]

PlannerFactory = Callable[[Any], Any]
"""Builds an arm from the campaign spec (or None): ``factory(spec) -> Planner``."""

_REGISTRY: dict[str, PlannerFactory] = {}


def register_planner(name: str, factory: PlannerFactory) -> None:
    """Make ``name`` usable as ``[planner] main`` or ``control``. Re-registering the same factory is a no-op."""
    if name in _REGISTRY and _REGISTRY[name] is not factory:
        raise SetupError(f"planner arm {name!r} is already registered; pick another name")
    _REGISTRY[name] = factory


def planner_names() -> tuple[str, ...]:
    """Every registered arm, sorted."""
    return tuple(sorted(_REGISTRY))


def make_planner(name: str, spec: Any = None) -> Any:
    """The planner arm called ``name`` (the llm arm takes its model and limits from ``spec.planner``)."""
    if name not in _REGISTRY:
        raise SetupError(f"planner arm {name!r} is unknown; available arms: {list(planner_names())}")
    return _REGISTRY[name](spec)
