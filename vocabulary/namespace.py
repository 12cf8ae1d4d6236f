"""Guard closedloop's generic top-level names against another installed package of the same name.

closedloop installs six top-level packages: ``vocabulary``, ``orchestrator``, ``simulators``, ``instruments``,
``rewards`` and ``closedloop``. Four of those names are generic, so another distribution in the same environment may
ship a package called ``rewards`` or ``instruments``. Python then imports whichever comes first on ``sys.path`` and
closedloop would fail later with a confusing ``AttributeError``. ``check_namespace`` finds each name's package
without importing it, and raises one ``ImportError`` that names the foreign package and how to fix it.

Each of ours says so in its ``__init__.py`` (``__distribution__ = "closedloop"``), which is read as text: a package
without that line (found first on ``sys.path``, or written over ours by another install into the same
site-packages) is not ours.

Example:
    >>> check_namespace()  # closedloop's own packages: nothing to say
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

__all__ = ["MARKER", "OUR_PACKAGES", "ShadowedPackage", "check_namespace"]

OUR_PACKAGES = ("vocabulary", "orchestrator", "simulators", "instruments", "rewards", "closedloop")


class ShadowedPackage(ImportError):
    """Another installed package uses one of closedloop's top-level names and is found before ours."""


MARKER = '__distribution__ = "closedloop"'


def _package_init(name: str) -> tuple[Path | None, str | None]:
    """Where ``name`` is found (its folder) and its ``__init__.py``'s text (None for a namespace package), without
    importing it."""
    module = sys.modules.get(name)
    if module is not None:
        origin = getattr(module, "__file__", None)
        locations = list(getattr(module, "__path__", []) or [])
    else:
        spec = importlib.util.find_spec(name)
        if spec is None:
            return None, None
        origin = spec.origin if spec.has_location else None
        locations = list(spec.submodule_search_locations or [])
    folder = Path(locations[0]) if locations else Path(origin).parent if origin else None
    try:
        return folder, Path(origin).read_text(encoding="utf-8") if origin else None
    except OSError:
        return folder, None


def check_namespace(packages: tuple[str, ...] = OUR_PACKAGES) -> None:
    """Raise ``ShadowedPackage`` if one of ``packages`` is found and its ``__init__.py`` is not closedloop's."""
    for name in packages:
        folder, text = _package_init(name)
        if folder is None or (text is not None and MARKER in text):
            continue
        raise ShadowedPackage(
            f"the package {name!r} found at {folder} is not closedloop's: another installed distribution ships a "
            f"top-level {name!r}. Find it with `python -c 'import {name}; print({name}.__path__)'` or `pip show -f`, "
            f"then uninstall it or install closedloop in a virtual environment of its own", name=name,
            path=str(folder))
