"""Find instrument drivers through the ``closedloop.instruments`` entry-point group.

Built-in drivers register the same way as third-party ones, in ``pyproject.toml``::

    [project.entry-points."closedloop.instruments"]
    simlab = "instruments.simlab:SimLabDriver"
"""

from __future__ import annotations

import inspect
from importlib.metadata import EntryPoint
from typing import Any

from instruments.base import InstrumentDriver
from vocabulary.domain import SetupError
from vocabulary.plugins import entry_points, entry_points_by_name

__all__ = ["ENTRY_POINT_GROUP", "available_drivers", "load_driver"]

ENTRY_POINT_GROUP = "closedloop.instruments"


def _entry_points() -> dict[str, list[EntryPoint]]:
    return entry_points_by_name(entry_points(group=ENTRY_POINT_GROUP))


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
    missing = missing_members(driver)
    if missing:
        raise SetupError(
            f"{target} built {type(driver).__name__}, which does not implement InstrumentDriver (missing: {missing})"
        )
    return driver


def missing_members(driver: Any) -> list[str]:
    """Names of ``InstrumentDriver`` members that ``driver`` lacks, found without calling any property.

    ``isinstance(driver, InstrumentDriver)`` reads every member, so on Python 3.11 it would run a property such as
    ``HttpDriver.envelope``, which fetches over the network; this check only looks.

    Example:
        >>> missing_members(object())
        ['cancel', 'capabilities', 'envelope', 'health', 'name', 'result', 'status', 'submit', 'version']
    """
    members = {"name", "version", "envelope", "capabilities", "submit", "status", "result", "cancel", "health"}
    absent = []
    for member in sorted(members):
        try:
            inspect.getattr_static(driver, member)
        except AttributeError:
            absent.append(member)
    return absent
