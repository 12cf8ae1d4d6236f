"""`closedloop run` exits non-zero when a campaign stops on lab failures (issue 18), and 0 when it finishes."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import orchestrator.loop.context as context_module
from orchestrator.interfaces.cli import app
from vocabulary.domain import InstrumentFault

MOLECULES = ["C", "CC", "CCC", "CCCC", "CCCCC", "CCCCCC", "CO", "CCO", "CCCO", "CCCCO", "CN", "CCN"]


@pytest.fixture
def spec_path(tmp_path):
    rows = "".join(f"{smiles},{k}\n" for k, smiles in enumerate(MOLECULES))
    (tmp_path / "pool.csv").write_text("smiles,y\n" + rows)
    path = tmp_path / "campaign.toml"
    path.write_text('[campaign]\nname = "sick"\nkind = "molecule"\n[objective]\ndirection = "maximize"\n'
                    '[space]\npool = "pool.csv"\ncolumn = "smiles"\n'
                    '[lab]\noracle_column = "y"\nfailure_policy = "skip"\ntolerated_failure_rate = 0.3\n'
                    'min_jobs_for_failure_rate = 4\n[budget]\nlab_experiments = 10\n'
                    '[planner]\nmain = "random"\ncontrol = "bo"\ncontrol_share = 0.2\nbatch_size = 2\n')
    return path


def _failing_lab(monkeypatch):
    """Every campaign's SimLab fails on half of the molecules."""
    from instruments import SimLabDriver

    def build(spec, pool):
        truth = pool.column(spec.lab.oracle_column)
        bad = set(sorted(truth)[::2])

        def oracle(candidate):
            if candidate.id in bad:
                raise InstrumentFault("bad reading: detector saturated")
            return truth[candidate.id]

        return SimLabDriver(oracle=oracle, noise_sd=0.0, seed=spec.campaign.seed)

    monkeypatch.setattr(context_module, "_build_driver", build)


def test_an_unhealthy_lab_makes_run_exit_1_with_the_reason(spec_path, tmp_path, monkeypatch):
    _failing_lab(monkeypatch)
    result = CliRunner().invoke(app, ["run", str(spec_path), "--db", str(tmp_path / "x.db"), "--json"])
    assert result.exit_code == 1, result.output
    summary = json.loads(result.stdout)
    assert summary["status"] == "stopped" and summary["stop_reason"].startswith("lab unhealthy")
    assert "stopped on lab failures (lab unhealthy:" in result.stderr


def test_a_healthy_campaign_exits_0(spec_path, tmp_path):
    result = CliRunner().invoke(app, ["run", str(spec_path), "--db", str(tmp_path / "x.db"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["stop_reason"].startswith("lab budget used")
