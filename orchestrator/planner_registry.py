"""Planner arms by name: the one table that ``[planner] main`` and ``control``, ``closedloop run --planner`` and
``closedloop bench --arms`` are looked up in.

An arm is found through the ``closedloop.planners`` entry points, and the built-in arms register the same way as a
third-party package's, in pyproject.toml::

    [project.entry-points."closedloop.planners"]
    bo = "orchestrator.policy.planners.factories:make_bo"

The target is a factory ``factory(spec) -> Planner`` (spec: the ``CampaignSpec``, or None). Names are read from the
installed packages' metadata without importing anything: the spec sits below the policy and checks an arm's name
without importing a planner; a factory is imported when its arm is made. Arms of one process only (a test's
scripted arm, the red team's policies, the environment's ``env`` arm) register with ``register_planner``.

Example:
    >>> {"bo", "llm", "random"} <= set(planner_names())
    True
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import EntryPoint
from typing import Any

from vocabulary.domain import SetupError
from vocabulary.plugins import entry_points, entry_points_by_name

__all__ = ["BENCH_ONLY_ARMS", "ENTRY_POINT_GROUP", "PlannerFactory", "installed_planner_names", "make_planner",
           "planner_names", "register_planner", "unknown_arm_message"]

ENTRY_POINT_GROUP = "closedloop.planners"

PlannerFactory = Callable[[Any], Any]
"""Builds an arm from the campaign spec (or None): ``factory(spec) -> Planner``."""

_REGISTRY: dict[str, PlannerFactory] = {}
"""Arms registered in this process with ``register_planner``."""

BENCH_ONLY_ARMS = {"llm-oracle": "it reads the simulated lab's ground truth (the ceiling of the llm arm's bracket); "
                                 "run it with `closedloop bench --arms llm,llm-random,llm-oracle`"}
"""Arms that only ``closedloop bench`` registers, with why: a campaign never gets them."""


def unknown_arm_message(name: str) -> str:
    """Why ``name`` is no arm, and what to do (a bench-only arm says so)."""
    if name in BENCH_ONLY_ARMS:
        return f"planner arm {name!r} exists only in benchmarks: {BENCH_ONLY_ARMS[name]}"
    return (f"planner arm {name!r} is unknown; available arms: {list(planner_names())} "
            "(register others with orchestrator.policy.planners.register_planner)")


def _entry_points() -> dict[str, list[EntryPoint]]:
    return entry_points_by_name(entry_points(group=ENTRY_POINT_GROUP))


def register_planner(name: str, factory: PlannerFactory) -> None:
    """Make ``name`` usable as ``[planner] main`` or ``control`` in this process. Re-registering the same factory is
    a no-op.

    Raises:
        SetupError: ``name`` is an installed arm's (an entry point's) or another factory's.
    """
    if name in _entry_points() or (name in _REGISTRY and _REGISTRY[name] is not factory):
        raise SetupError(f"planner arm {name!r} is already registered; pick another name")
    _REGISTRY[name] = factory


def planner_names() -> tuple[str, ...]:
    """Every arm there is (the entry points' and those registered in this process), sorted."""
    return tuple(sorted({*_entry_points(), *_REGISTRY}))


def installed_planner_names() -> tuple[str, ...]:
    """The arms installed packages declare (``closedloop.planners`` entry points), sorted: what every process sees,
    without those ``register_planner`` added in this one."""
    return tuple(sorted(_entry_points()))


def make_planner(name: str, spec: Any = None) -> Any:
    """The planner arm called ``name``, built from ``spec`` (the llm arm takes its model and limits from
    ``spec.planner``).

    Raises:
        SetupError: the name is unknown or registered twice, its factory cannot be imported, or what it built has
            no ``propose``.
    """
    if name in _REGISTRY:
        factory, target = _REGISTRY[name], "register_planner"
    else:
        factory, target = _load(name)
    planner = factory(spec)
    if not callable(getattr(planner, "propose", None)):
        raise SetupError(f"planner arm {name!r} ({target}) built {type(planner).__name__}, which has no "
                         "propose(context, n); return a Planner (orchestrator.policy.planners.Planner)")
    return planner


def _load(name: str) -> tuple[PlannerFactory, str]:
    registered = _entry_points()
    if name in BENCH_ONLY_ARMS and name not in registered:
        raise SetupError(unknown_arm_message(name))
    if name not in registered:
        hint = "" if registered else (" (no arm is installed at all: reinstall closedloop, e.g. `pip install -e .`, "
                                      "so that its entry points are registered)")
        raise SetupError(
            f"planner arm {name!r} is unknown; available arms: {list(planner_names())}{hint}. Install the package "
            f"that provides it, declare it under [project.entry-points.\"{ENTRY_POINT_GROUP}\"], or register it "
            "with orchestrator.policy.planners.register_planner")
    found = registered[name]
    if len(found) > 1:
        raise SetupError(f"planner arm {name!r} is registered more than once "
                         f"({', '.join(ep.value for ep in found)}); uninstall one")
    try:
        return found[0].load(), found[0].value
    except (ImportError, AttributeError) as exc:
        raise SetupError(f"planner arm {name!r} ({found[0].value}) cannot be imported: {exc}") from exc
