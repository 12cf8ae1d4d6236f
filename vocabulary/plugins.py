"""Plug-ins found through entry points: the one rule every registry of closedloop (simulators, instruments) applies
to what ``importlib.metadata`` lists.

Example:
    >>> from importlib.metadata import EntryPoint
    >>> lab = EntryPoint("lab", "instruments.simlab:SimLabDriver", "closedloop.instruments")
    >>> other = EntryPoint("lab", "other.module:Lab", "closedloop.instruments")
    >>> {name: [ep.value for ep in eps] for name, eps in entry_points_by_name([lab, lab, other]).items()}
    {'lab': ['instruments.simlab:SimLabDriver', 'other.module:Lab']}
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib.metadata import EntryPoint

__all__ = ["entry_points_by_name"]


def entry_points_by_name(found: Iterable[EntryPoint]) -> dict[str, list[EntryPoint]]:
    """The entry points by name, in the order found. One target listed twice (an editable install, one package seen
    twice) counts once, so a name with more than one entry names a real clash between packages."""
    by_name: dict[str, list[EntryPoint]] = {}
    for ep in found:
        same_name = by_name.setdefault(ep.name, [])
        if all(other.value != ep.value for other in same_name):
            same_name.append(ep)
    return by_name
