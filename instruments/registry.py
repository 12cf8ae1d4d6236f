"""Find instrument drivers through the ``closedloop.instruments`` entry-point group.

Built-in drivers register the same way as third-party ones, in ``pyproject.toml``::

    [project.entry-points."closedloop.instruments"]
    simlab = "instruments.simlab:SimLabDriver"
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from typing import Any

from instruments.base import InstrumentDriver
from orchestrator.domain import SetupError

__all__ = ["ENTRY_POINT_GROUP", "available_drivers", "load_driver"]

ENTRY_POINT_GROUP = "closedloop.instruments"


def _entry_points() -> dict[str, list[EntryPoint]]:
    found: dict[str, list[EntryPoint]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        same_name = found.setdefault(ep.name, [])
        if all(other.value != ep.value for other in same_name):  # an editable install may list a target twice
            same_name.append(ep)
    return found


def available_drivers() -> dict[str, str]:
    """Registered driver names -> ``"module:Class"`` targets, sorted by name.

    Example:
        >>> available_drivers()["simlab"]
        'instruments.simlab:SimLabDriver'
    """
    return {name: eps[0].value for name, eps in sorted(_entry_points().items())}


def load_driver(name: str, **params: Any) -> InstrumentDriver:
    """Import the driver registered as ``name`` and construct it with ``params``.

    Raises:
        SetupError: the name is unknown or registered twice, the target cannot be imported, the parameters do not
            fit its constructor, or the object built is not an ``InstrumentDriver``.

    Example:
        >>> lab = load_driver("simlab", oracle=lambda candidate: 1.0, seed=3)
        >>> lab.name, lab.seed
        ('simlab', 3)
    """
    registered = _entry_points()
    if name not in registered:
        names = ", ".join(sorted(registered)) or "none"
        raise SetupError(
            f"instrument driver {name!r} is not registered; available: {names}. "
            f"Install the package that provides it, or declare it under [project.entry-points.\"{ENTRY_POINT_GROUP}\"]"
        )
    candidates = registered[name]
    if len(candidates) > 1:
        targets = ", ".join(ep.value for ep in candidates)
        raise SetupError(f"instrument driver {name!r} is registered more than once ({targets}); uninstall one")
    target = candidates[0].value
    try:
        factory = candidates[0].load()
    except (ImportError, AttributeError) as exc:
        raise SetupError(f"instrument driver {name!r} ({target}) cannot be imported: {exc}") from exc
    try:
        driver = factory(**params)
    except TypeError as exc:
        raise SetupError(
            f"instrument driver {name!r} ({target}) rejected its parameters {sorted(params)}: {exc}"
        ) from exc
    if not isinstance(driver, InstrumentDriver):
        raise SetupError(f"{target} built {type(driver).__name__}, which does not implement InstrumentDriver")
    return driver
