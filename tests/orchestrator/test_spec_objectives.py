"""Several objectives, outcome constraints and learned failures in the spec (issue 48)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.interfaces.cli import app
from orchestrator.spec import CampaignSpec, SpecError, load_spec

ROOT = Path(__file__).resolve().parents[2]
PARETO = ROOT / "campaigns" / "lnp-pareto" / "campaign.toml"

BASE = """
[campaign]
name = "t"
kind = "conditions"

[space]
pool = "{pool}"
columns = ["drug_input", "solid_lipid", "solid_lipid_input", "liquid_lipid_input", "surfactant_input"]

[lab]
driver = "simlab"

[budget]
lab_experiments = 6
"""

TWO = """
[[objective]]
property = "drug_loading"
direction = "maximize"
column = "drug_loading"

[[objective]]
property = "particle_diameter"
direction = "minimize"
column = "particle_diameter"
"""


def write(tmp_path, extra: str) -> Path:
    pool = ROOT / "campaigns" / "lnp-pareto" / "data" / "lnp_formulations.csv"
    path = tmp_path / "campaign.toml"
    path.write_text(BASE.format(pool=pool) + extra)
    return path


def test_every_campaign_loads():
    specs = sorted((ROOT / "campaigns").glob("*/campaign.toml"))
    assert len(specs) >= 6
    for path in specs:
        assert load_spec(path).campaign.name


def test_objective_tables_read_as_a_list():
    spec = load_spec(PARETO)
    assert spec.is_multi_objective and spec.tradeoff_method == "pareto"
    assert spec.objective == spec.objectives[0]
    assert [o.property for o in spec.objective_list] == ["drug_loading", "encap_efficiency", "particle_diameter"]
    assert spec.lab.oracle_column == "drug_loading"  # the first objective's column is the lab's truth
    assert spec.measured_properties == ["drug_loading", "encap_efficiency", "particle_diameter"]


def test_a_dumped_spec_reads_back_unchanged():
    for path in (PARETO, ROOT / "campaigns" / "freesolv" / "campaign.toml"):
        spec = load_spec(path)
        again = CampaignSpec.model_validate(spec.model_dump())
        assert again == spec


def test_one_objective_is_unchanged(tmp_path):
    spec = load_spec(write(tmp_path, '[objective]\nproperty = "drug_loading"\ndirection = "maximize"\ncolumn = "drug_loading"\n'))
    assert spec.objectives == [] and not spec.is_multi_objective and spec.tradeoff_method == "single"
    listed = load_spec(write(tmp_path, '[[objective]]\nproperty = "drug_loading"\ndirection = "maximize"\ncolumn = "drug_loading"\n'))
    assert listed == spec


def test_constraints_and_measured_properties():
    spec = load_spec(ROOT / "campaigns" / "lnp-tradeoff" / "campaign.toml")
    (constraint,) = spec.constraints
    assert constraint.is_met(0.31) and not constraint.is_met(0.2) and not constraint.is_met(None)
    assert not constraint.is_met(float("nan"))
    assert spec.measured_properties == ["drug_loading", "particle_diameter", "encap_efficiency"]


def test_learn_policy_reads():
    spec = load_spec(ROOT / "campaigns" / "buchwald-failures" / "campaign.toml")
    assert spec.lab.failure_policy == "learn" and spec.lab.fails_at_or_below == 0.0


BAD = {
    "twice": (TWO + '[[objective]]\nproperty = "drug_loading"\ndirection = "maximize"\ncolumn = "drug_loading"\n',
              "objective[2].property: 'drug_loading' is listed twice"),
    "reference": (TWO + "[tradeoff]\nreference_point = [0.0, 1.0, 2.0]\n",
                  "tradeoff.reference_point: has 3 value(s) for 2 objective(s)"),
    "desirability": (TWO + '[tradeoff]\nmethod = "desirability"\n', "needs bounds = [worst, best]"),
    "no bound": (TWO + '[[constraint]]\nproperty = "encap_efficiency"\ncolumn = "encap_efficiency"\n',
                 "neither 'lower' nor 'upper'"),
    "no column": (TWO + '[[constraint]]\nproperty = "side_product"\nupper = 5.0\n',
                  "constraint[0].property: 'side_product' is neither an objective nor"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_specs_are_refused_in_one_line(tmp_path, name):
    extra, message = BAD[name]
    path = write(tmp_path, extra)
    with pytest.raises(SpecError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        load_spec(path)
    result = CliRunner().invoke(app, ["run", str(path), "--db", str(tmp_path / "x.db")])
    assert result.exit_code != 0
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output and message in " ".join(result.output.split())
