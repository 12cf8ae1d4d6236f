"""docs/spec.md is generated from the spec's own models (issue 50): current, complete, and what errors link to."""

from __future__ import annotations

import json
import tomllib
from typing import Annotated

import pytest
from pydantic import BaseModel, TypeAdapter
from typer.testing import CliRunner

from orchestrator.interfaces.cli import app
from orchestrator.interfaces.spec_reference import (
    _EXAMPLES,
    reference_path,
    render_reference,
    spec_schema,
    undocumented_fields,
)
from orchestrator.spec import CampaignSpec, SpecError, reference_anchor, validate_spec
from tests.conftest import ROOT

REFERENCE = ROOT / "docs" / "spec.md"


def test_docs_spec_md_is_current():
    assert reference_path() == REFERENCE
    assert REFERENCE.is_file(), "docs/spec.md is missing; run `closedloop spec reference`"
    assert REFERENCE.read_text(encoding="utf-8") == render_reference(), (
        "docs/spec.md is not what the spec's models render; regenerate it with `closedloop spec reference` "
        "(or python -m orchestrator.interfaces.spec_reference) and commit it")


def test_an_arm_registered_in_this_process_does_not_change_the_reference():
    from orchestrator.planner_registry import register_planner

    before = render_reference()
    register_planner("only-in-this-test-process", lambda spec: None)
    assert render_reference() == before  # the reference documents installed plug-ins, whatever a session registered


def test_every_field_has_a_description_and_an_example():
    assert undocumented_fields() == [], "give these fields a description (and an example) in orchestrator/spec.py"


def test_a_field_without_a_description_is_caught():
    schema = spec_schema()
    schema["$defs"]["LabSpec"]["properties"]["driver"].pop("description")
    schema["$defs"]["StopSpec"]["properties"]["threshold"].pop("examples")
    assert undocumented_fields(schema) == ["lab.driver (description)", "stop.threshold (example)"]


def _section_models() -> dict[str, type[BaseModel]]:
    models = {}
    for name, info in CampaignSpec.model_fields.items():
        model = getattr(info.annotation, "__args__", [info.annotation])[0] if name == "ladder" else info.annotation
        if isinstance(model, type) and issubclass(model, BaseModel):
            models[name] = model
    return models


def test_every_section_and_field_has_its_entry_with_its_unit_and_default():
    text = REFERENCE.read_text(encoding="utf-8")
    for section, model in _section_models().items():
        assert f'<a id="{section}"></a>' in text
        for field in model.model_fields:
            assert f'<a id="{section}-{field}"></a>\n### `{section}.{field}`' in text, f"{section}.{field}"
    retry = text.split("### `lab.retry_backoff_s`", 1)[1].split("###", 1)[0]
    assert "default: `600.0`" in retry and "unit: s" in retry and "range: ≥ 0" in retry and "Example:" in retry
    assert 'type: one of "maximize", "minimize", "target" · **required**' in text


def test_every_example_is_a_valid_value_of_its_field():
    for section, model in _section_models().items():
        for field, info in model.model_fields.items():
            for example in info.examples or []:
                field_type = Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
                TypeAdapter(field_type).validate_python(example)


def test_the_reference_lists_simulators_drivers_arms_and_the_lab_envelope():
    from instruments.registry import available_drivers
    from simulators.registry import available_simulators

    text = REFERENCE.read_text(encoding="utf-8")
    simulators = text.split('<a id="simulators"></a>', 1)[1].split('<a id="lab-drivers"></a>', 1)[0]
    assert all(f"| `{name}` |" in simulators for name in available_simulators())
    drivers = text.split('<a id="lab-drivers"></a>', 1)[1].split('<a id="planner-arms"></a>', 1)[0]
    assert all(f"| `{name}` |" in drivers for name in available_drivers())
    assert "| `manual` | a person enters results: see `closedloop suggest` / `closedloop results add`" in drivers
    envelope = text.split('<a id="lab-parameters-envelope"></a>', 1)[1]
    assert all(f"- `{field}`" in envelope for field in ("name", "parameters", "allowed_reagents", "forbidden_hazards",
                                                         "allowed_steps", "max_job_duration_s", "low", "choices"))


def test_the_envelope_example_is_one_the_simulated_lab_accepts():
    from instruments.envelope import SafetyEnvelope
    from instruments.simlab import SimLabDriver

    data = tomllib.loads(_EXAMPLES["envelope"])["lab"]["parameters"]["envelope"]
    envelope = SafetyEnvelope.model_validate(data)
    assert envelope.parameters["temperature_c"].high == 250 and envelope.parameters["stir_rpm"].is_required
    assert SimLabDriver(oracle=lambda c: 1.0, envelope=data).envelope == envelope


def test_the_minimal_example_is_a_valid_spec():
    spec = validate_spec(tomllib.loads(_EXAMPLES["minimal"]), source="docs/spec.md")
    assert (spec.space.column, spec.lab.oracle_column, spec.budget.lab_experiments) == ("smiles", "expt", 24)


# ------------------------------------------------------------------------------- errors name the field and link it
@pytest.mark.parametrize("path,anchor", [
    ("lab.driver", "docs/spec.md#lab-driver"), ("ladder.0.simulator", "docs/spec.md#ladder-simulator"),
    ("objective", "docs/spec.md#objective"), ("lab.parameters.envelope", "docs/spec.md#lab-parameters"),
    ("lab.colour", "docs/spec.md#lab"), ("(top level)", "docs/spec.md"), ("(file)", "docs/spec.md"),
    ("base_dir", "docs/spec.md#base_dir"),
])
def test_a_field_path_maps_to_its_entry_in_the_reference(path, anchor):
    assert reference_anchor(path) == anchor
    if "#" in anchor:
        assert f'<a id="{anchor.split("#")[1]}"></a>' in REFERENCE.read_text(encoding="utf-8")


def test_a_spec_error_names_the_field_and_links_the_reference():
    data = tomllib.loads(_EXAMPLES["minimal"])
    data["planner"] = {"batch_size": 0}
    data["ladder"] = [{"name": "x", "simulator": "table"}]
    with pytest.raises(SpecError) as err:
        validate_spec(data, source="campaign.toml")
    message = str(err.value)
    assert "  - planner.batch_size: Input should be greater than 0 (see docs/spec.md#planner-batch_size)" in message
    assert "ladder.0: rung 'x' uses simulator 'table' and needs 'column'" in message
    assert "(see docs/spec.md#ladder)" in message
    assert ("planner.batch_size", "Input should be greater than 0") in err.value.problems  # problems stay plain


# ------------------------------------------------------------------------------------------------------- the CLI
def test_spec_schema_prints_the_json_schema_on_stdout():
    result = CliRunner().invoke(app, ["spec", "schema"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == json.loads(json.dumps(CampaignSpec.model_json_schema()))


def test_spec_reference_writes_prints_and_checks_the_markdown(tmp_path):
    runner = CliRunner()
    target = tmp_path / "spec.md"
    assert runner.invoke(app, ["spec", "reference", "--out", str(target)]).exit_code == 0
    assert target.read_text(encoding="utf-8") == render_reference()
    assert runner.invoke(app, ["spec", "reference", "--out", str(target), "--check"]).exit_code == 0
    printed = runner.invoke(app, ["spec", "reference", "--out", "-"])
    assert printed.exit_code == 0 and printed.stdout == render_reference()
    target.write_text("# stale\n", encoding="utf-8")
    stale = runner.invoke(app, ["spec", "reference", "--out", str(target), "--check"])
    assert stale.exit_code == 1 and "is not current" in stale.output
    assert target.read_text(encoding="utf-8") == "# stale\n"
