"""Every notebook in notebooks/ runs top to bottom on the simulated lab (SMOKE_TEST=1), in this interpreter."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

nbclient = pytest.importorskip("nbclient", reason='pip install "closedloop[dev]"')
nbformat = pytest.importorskip("nbformat", reason='pip install "closedloop[dev]"')
pytest.importorskip("ipykernel", reason='pip install "closedloop[dev]"')

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
_PREFIX_MARK = "KERNEL_PREFIX="
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")  # rich colours the CLI's output inside a kernel

# What each notebook must show beyond running cleanly: text that appears in some output.
EXPECTED_TEXT = {
    "01_discovery_campaign.ipynb": [
        "approve these lab jobs",  # the pending approval question
        "campaign finished: lab budget used: 8 of 8",  # the approval loop ran to the SMOKE_TEST budget
        "best found",  # the summary table
        "main arm",  # the main arm against the control
        "projections ok",  # `closedloop ledger verify`
    ],
    "02_plug_in_a_driver.ipynb": [
        "is outside the plate reader envelope 200..1000 nm",  # the driver's envelope refused a job at submit
        "instrument driver 'plate_reader' is not registered",  # before registration: a clear SetupError
        "registered drivers: http, madsci, manual, plate_reader, pylabrobot, recorded, sila2, simlab",  # the throwaway distribution's entry point was found
        "load_driver('plate_reader') built PlateReaderDriver",
        "test_fault_surfaces_as_a_failed_result",  # the contract table lists the fault test (faulty_driver_factory)
        "campaign finished: lab budget used: 10 of 10 experiments",  # the campaign ran to the SMOKE_TEST budget
        "plate_reader 0.1.0",  # the summary names the plugged-in driver
        "instruments.adapters.sila2_driver:Sila2Driver",  # the lab-software adapters, listed from their entry points
        "registered drivers after clean-up: http, madsci, manual, pylabrobot, recorded, sila2, simlab",
    ],
    "03_replay_experiment_logs.ipynb": [
        '"identical": true',  # exact replay of the recorded campaign
        "replayed",  # the imported copy replays identically elsewhere
        "what-if planner: random",  # the what-if under another planner ran
        "decisions identical: True",  # another rubric keeps the decisions
        "trajectories.jsonl",  # the native export
        "best_so_far",  # the report's plots
    ],
    "04_several_objectives.ipynb": [
        "tradeoff: pareto",  # the spec reads several [[objective]] tables
        "campaign finished: lab budget used: 10 of 10",  # the two-objective campaign ran to the SMOKE_TEST budget
        "results on the front",  # its front, from campaign_front and from `run --json`'s summary
        "objectives: drug_loading (maximize), encap_efficiency (maximize), particle_diameter (minimize)",
    ],
}
# Regular expressions some output must match (for numbers that may legitimately change).
EXPECTED_PATTERNS = {
    # every contract test passed, none failed or was skipped (the count grows with DriverContract)
    "02_plug_in_a_driver.ipynb": [r"contract: [1-9]\d* passed, 0 failed, 0 skipped \(pytest exit code 0\)"],
    "03_replay_experiment_logs.ipynb": [r"exit code [12]: .*line \d+"],  # a broken log is refused with its line
}


def _output_text(output) -> str:
    if output.get("output_type") == "stream":
        text = output.get("text", "")
    else:
        data = output.get("data", {})
        text = data.get("text/plain", "") + data.get("text/html", "")
    return _ANSI_ESCAPE.sub("", text)


def _execute(path: Path):
    notebook = nbformat.read(path, as_version=4)
    # Proves the kernel is this interpreter (the venv), not whatever `python` is first on PATH.
    notebook.cells.append(nbformat.v4.new_code_cell(f"import sys; print({_PREFIX_MARK!r} + sys.prefix)"))
    env = {**os.environ, "SMOKE_TEST": "1", "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    client = nbclient.NotebookClient(notebook, kernel_name="python3", timeout=900, startup_timeout=120,
                                     resources={"metadata": {"path": str(NOTEBOOK_DIR)}})
    client.execute(env=env)
    return notebook


def test_there_are_notebooks():
    assert NOTEBOOKS, f"no notebooks in {NOTEBOOK_DIR}"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path: Path):
    stored = nbformat.read(path, as_version=4)
    code_cells = [cell for cell in stored.cells if cell.cell_type == "code"]
    assert all(not cell.outputs and cell.execution_count is None for cell in code_cells), \
        f"{path.name}: strip the outputs before committing (e.g. jupyter nbconvert --clear-output --inplace)"

    notebook = _execute(path)  # raises CellExecutionError, with the failing cell and traceback, on any error

    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "\n".join(_output_text(o) for o in outputs)
    assert f"{_PREFIX_MARK}{sys.prefix}" in text, "the notebook kernel did not run in this interpreter"
    for expected in EXPECTED_TEXT.get(path.name, []):
        assert expected in text, f"{path.name}: no output contains {expected!r}"
    for pattern in EXPECTED_PATTERNS.get(path.name, []):
        assert re.search(pattern, text), f"{path.name}: no output matches {pattern!r}"
    if path.name in EXPECTED_TEXT:
        assert any("image/png" in o.get("data", {}) for o in outputs), f"{path.name}: no figure was produced"


def test_the_notebooks_readme_describes_every_notebook():
    described = (NOTEBOOK_DIR / "README.md").read_text(encoding="utf-8")
    missing = [path.name for path in NOTEBOOKS if f"`{path.name}`" not in described]
    assert NOTEBOOKS and not missing, f"notebooks/README.md leaves out {missing}"
