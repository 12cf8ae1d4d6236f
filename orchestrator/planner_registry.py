"""Planner arms by name: the table that ``[planner] main`` and ``control`` are looked up in.

The built-in arms are known here by name and built by ``orchestrator.policy.planners.BUILT_IN_ARMS``, which is
imported only when one is made (like an entry point): the spec sits below the policy and checks an arm's name
without importing any planner. Other arms (a lab's own heuristic, the red team's policies) register with
``register_planner``.

Example:
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

BUILT_IN_ARMS = ("bo", "bo-sf", "botorch", "botorch-onehot", "cheap-first", "llm", "llm-shuffled", "random")
"""Built by ``orchestrator.policy.planners.BUILT_IN_ARMS`` (a test checks the two lists agree)."""
_BUILT_IN_FACTORIES = "orchestrator.policy.planners"

_REGISTRY: dict[str, PlannerFactory] = {}


def register_planner(name: str, factory: PlannerFactory) -> None:
    """Make ``name`` usable as ``[planner] main`` or ``control``. Re-registering the same factory is a no-op."""
    if name in BUILT_IN_ARMS or (name in _REGISTRY and _REGISTRY[name] is not factory):
        raise SetupError(f"planner arm {name!r} is already registered; pick another name")
    _REGISTRY[name] = factory


def planner_names() -> tuple[str, ...]:
    """Every registered arm, sorted."""
    return tuple(sorted({*BUILT_IN_ARMS, *_REGISTRY}))


def make_planner(name: str, spec: Any = None) -> Any:
    """The planner arm called ``name`` (the llm arm takes its model and limits from ``spec.planner``)."""
    if name in BUILT_IN_ARMS:
        import importlib

        return importlib.import_module(_BUILT_IN_FACTORIES).BUILT_IN_ARMS[name](spec)
    if name not in _REGISTRY:
        raise SetupError(f"planner arm {name!r} is unknown; available arms: {list(planner_names())}")
    return _REGISTRY[name](spec)
