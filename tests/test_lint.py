"""The repository passes ruff's checks (``[tool.ruff.lint]`` in pyproject.toml): syntax errors, pyflakes (unused or
undefined names, redefinitions) and import order, so a dead import or a shadowed fixture fails the suite."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed; pip install -e '.[dev]'")
    done = subprocess.run([ruff, "check", "--no-cache", "--output-format", "concise", str(ROOT)],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
