"""Start-up stays fast: the light entry points must not import the heavy stacks."""

import subprocess
import sys


def _modules_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_orchestrator_import_is_light():
    loaded = _modules_after("import orchestrator, orchestrator.interfaces.cli, orchestrator.loop.campaign")
    assert not {"torch", "pyro", "pymatgen.core"} & loaded


def test_help_works_without_heavy_imports():
    result = subprocess.run([sys.executable, "-m", "orchestrator.interfaces.cli", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "run" in result.stdout and "ledger" in result.stdout
