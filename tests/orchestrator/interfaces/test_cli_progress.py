"""What `closedloop run` shows while it works: a labelled survey task before the lab bar moves, and `-v` logs."""

from __future__ import annotations

import pandas as pd
import pytest
from typer.testing import CliRunner

from orchestrator.interfaces.cli import app
from tests.conftest import FREESOLV_SPEC


@pytest.fixture
def spec_path(tmp_path):
    """The README's FreeSolv campaign on its first 20 molecules (xtb surveyed), bo against random, 4 experiments."""
    frame = pd.read_csv(FREESOLV_SPEC.parent / "data" / "FreeSolv_gauche.csv").head(20)
    frame.to_csv(tmp_path / "pool.csv", index=False)
    text = FREESOLV_SPEC.read_text().replace('pool = "data/FreeSolv_gauche.csv"', f'pool = "{tmp_path / "pool.csv"}"')
    path = tmp_path / "campaign.toml"
    path.write_text(text.replace('main = "llm"', 'main = "bo"').replace('control = "bo"', 'control = "random"'))
    return path


def _run(*args):
    result = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def test_run_shows_a_labelled_survey_task(spec_path, tmp_path):
    result = _run("run", spec_path, "--db", tmp_path / "a.db", "--lab-budget", 4, "--campaign-id", "a")
    assert "surveying 20 molecules with xtb" in result.stderr
    line = next(line for line in result.stderr.splitlines() if "surveying 20 molecules with xtb" in line)
    assert "20/20" in line  # the task counted every molecule
    assert "lab experiments" in result.stderr


def test_verbose_logs_the_loop_steps_and_quiet_does_not(spec_path, tmp_path):
    quiet = _run("run", spec_path, "--db", tmp_path / "q.db", "--lab-budget", 4, "--campaign-id", "q").stderr
    loud = _run("-v", "run", spec_path, "--db", tmp_path / "v.db", "--lab-budget", 4, "--campaign-id", "v").stderr
    for node in ("survey", "plan", "screen", "reward", "learn", "decide"):
        assert f"INFO orchestrator.loop.nodes.{node}: {node}: " in loud, node
        assert f"orchestrator.loop.nodes.{node}" not in quiet
    assert "INFO orchestrator.loop.nodes.survey: survey: rung 'xtb' read 20 molecules" in loud
    assert "campaign stopped after 4 lab result(s)" in loud
    assert len(loud.splitlines()) > len(quiet.splitlines())
