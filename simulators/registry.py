"""Find simulators through the ``closedloop.simulators`` entry-point group.

Built-ins register there too (see pyproject.toml), so a third-party package adds a rung by declaring::

    [project.entry-points."closedloop.simulators"]
    my_rung = "my_package.module:MySimulator"
"""

from __future__ import annotations

from importlib.metadata import EntryPoint
from typing import Any

from simulators.base import Simulator
from vocabulary.domain import SetupError
from vocabulary.plugins import entry_points, entry_points_by_name

__all__ = ["ENTRY_POINT_GROUP", "available_simulators", "load_simulator"]

ENTRY_POINT_GROUP = "closedloop.simulators"


def _entry_points() -> list[EntryPoint]:
    return list(entry_points(group=ENTRY_POINT_GROUP))


def _by_name() -> dict[str, list[EntryPoint]]:
    return entry_points_by_name(_entry_points())


def available_simulators() -> dict[str, EntryPoint]:
    """Registered simulators by name, sorted, without importing them.

    Example:
        >>> {"rdkit_descriptors", "table", "xtb", "chgnet"} <= set(available_simulators())
        True
    """
    return {name: eps[0] for name, eps in sorted(_by_name().items())}


def load_simulator(name: str, /, **params: Any) -> Simulator:
    """Import the simulator registered as ``name`` and construct it with ``params``.

    ``name`` is positional-only, so ``params`` may carry a ``name`` of its own (``TableSimulator`` takes one).

    Raises:
        SetupError: for an unknown or ambiguous name, an import failure, parameters the simulator does not take,
            or an object that does not satisfy the ``Simulator`` protocol.

    Example:
        >>> load_simulator("rdkit_descriptors").fidelity
        0
        >>> load_simulator("table", name="freesolv_calc", values={}, property="dg_hydration").name
        'freesolv_calc'
    """
    registered = _by_name()
    if name not in registered:
        raise SetupError(
            f"no simulator is registered as {name!r}; available: {sorted(registered)}. A plug-in registers under "
            f"the entry-point group {ENTRY_POINT_GROUP!r}; reinstall it (pip install -e .) if it was just added"
        )
    if len(registered[name]) > 1:
        targets = [ep.value for ep in registered[name]]
        raise SetupError(f"simulator name {name!r} is registered more than once ({targets}); uninstall one")
    entry = registered[name][0]
    try:
        factory = entry.load()
    except Exception as exc:  # an import error inside the plug-in, or a bad target
        raise SetupError(f"simulator {name!r} ({entry.value}) could not be imported: {exc}") from exc
    try:
        simulator = factory(**params)
    except SetupError:
        raise
    except TypeError as exc:
        raise SetupError(f"simulator {name!r} does not accept parameters {sorted(params)}: {exc}") from exc
    if not isinstance(simulator, Simulator):
        raise SetupError(
            f"simulator {name!r} ({entry.value}) built a {type(simulator).__name__}, which lacks the Simulator "
            "attributes (name, version, fidelity, implemented_properties, applies_to, parameters, cost_model, "
            "evaluate)"
        )
    return simulator
