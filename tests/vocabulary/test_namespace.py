"""A foreign package that takes one of closedloop's top-level names is named at import, with the fix."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from vocabulary.namespace import OUR_PACKAGES, ShadowedPackage, check_namespace

ROOT = Path(__file__).resolve().parents[2]


def test_our_own_packages_pass():
    check_namespace()


def test_a_shadowing_module_already_imported_is_named(monkeypatch, tmp_path):
    foreign = tmp_path / "rewards"
    foreign.mkdir()
    (foreign / "__init__.py").write_text("")
    monkeypatch.setitem(sys.modules, "rewards", types.SimpleNamespace(__path__=[str(foreign)], __file__=None))
    with pytest.raises(ShadowedPackage, match=r"'rewards' found at .* is not closedloop's") as info:
        check_namespace()
    assert info.value.name == "rewards" and "uninstall it" in str(info.value)


@pytest.mark.parametrize("name", [n for n in OUR_PACKAGES if n not in ("vocabulary", "orchestrator")])
def test_importing_the_engine_names_a_foreign_package_found_first_on_the_path(tmp_path, name):
    """The foreign package sits first on PYTHONPATH, as another distribution in site-packages may: importing the
    engine fails with one ImportError that names it, not an AttributeError later."""
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text("FOREIGN = True\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    result = subprocess.run([sys.executable, "-c", "import orchestrator"], capture_output=True, text=True, env=env,
                            cwd=tmp_path, check=False)
    assert result.returncode == 1
    assert f"ShadowedPackage: the package '{name}' found at {tmp_path / name} is not closedloop's" in result.stderr
