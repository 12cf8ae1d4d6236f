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

import sys
from collections.abc import Iterable
from functools import lru_cache
from importlib import metadata
from importlib.metadata import EntryPoint

__all__ = ["entry_points", "entry_points_by_name"]


def entry_points(*, group: str) -> tuple[EntryPoint, ...]:
    """``importlib.metadata.entry_points(group=group)``, read once per process and ``sys.path``.

    Scanning every installed distribution's metadata costs tens of milliseconds, and a campaign looks its rungs and
    its lab up at every start (an RL environment starts one per episode). A change of ``sys.path`` (a package
    added to it) reads the metadata again; a package installed into a path already read is seen after a restart.
    """
    return _entry_points(group, tuple(sys.path))


@lru_cache(maxsize=16)
def _entry_points(group: str, path: tuple[str, ...]) -> tuple[EntryPoint, ...]:
    return tuple(metadata.entry_points(group=group))


def entry_points_by_name(found: Iterable[EntryPoint]) -> dict[str, list[EntryPoint]]:
    """The entry points by name, in the order found. One target listed twice (an editable install, one package seen
    twice) counts once, so a name with more than one entry names a real clash between packages."""
    by_name: dict[str, list[EntryPoint]] = {}
    for ep in found:
        same_name = by_name.setdefault(ep.name, [])
        if all(other.value != ep.value for other in same_name):
            same_name.append(ep)
    return by_name
