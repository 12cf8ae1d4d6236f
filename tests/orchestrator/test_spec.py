import pytest

from orchestrator.spec import SpecError, load_spec, validate_spec
from tests.conftest import BUCHWALD_SPEC, FREESOLV_SPEC


def test_examples_load():
    freesolv = load_spec(FREESOLV_SPEC)
    assert freesolv.objective.direction == "target"
    assert [r.name for r in freesolv.ladder] == ["descriptors", "xtb", "gaff"]
    assert freesolv.resolve(freesolv.space.pool).is_file()
    buchwald = load_spec(BUCHWALD_SPEC)
    assert buchwald.campaign.kind == "conditions" and buchwald.objective.direction == "maximize"


def test_objective_utility_and_hits():
    spec = load_spec(FREESOLV_SPEC)
    assert spec.objective.utility(-12.0) == 0.0
    assert spec.objective.utility(-10.0) == -2.0
    assert spec.objective.is_hit(-12.4) and not spec.objective.is_hit(-12.6)


def test_a_direction_may_be_spelt_the_british_way_or_abbreviated():
    for written, meant in [("maximise", "maximize"), ("Minimise", "minimize"), ("MAX", "maximize"), ("min", "minimize")]:
        data = _broken(objective__direction=written, objective__target=None, objective__tolerance=None)
        assert validate_spec(data, source="test.toml").objective.direction == meant


def _broken(**changes):
    data = load_spec(FREESOLV_SPEC).model_dump()
    for dotted, value in changes.items():
        section, field = dotted.split("__")
        data[section][field] = value
    return data


@pytest.mark.parametrize("changes,path,fragment", [
    ({"objective__direction": "upwards"}, "objective.direction", "'maximize', 'minimize' or 'target'"),
    ({"objective__target": None}, "objective", "needs both 'target' and 'tolerance'"),
    ({"budget__lab_experiments": 0}, "budget.lab_experiments", "greater than 0"),
    ({"campaign__kind": "protein"}, "campaign.kind", "'molecule', 'material' or 'conditions'"),
    ({"planner__control_share": 1.5}, "planner.control_share", "less than 1"),
    ({"space__inline": ["CCO"]}, "space", "exactly one of 'pool'"),
    ({"lab__colour": "red"}, "lab.colour", "remove it or check its spelling"),
    ({"lab__oracle_column": "smiles"}, "lab.oracle_column", "is also a space column"),
])
def test_invalid_spec_names_the_field_and_a_hint(changes, path, fragment):
    with pytest.raises(SpecError) as err:
        validate_spec(_broken(**changes), source="test.toml")
    assert any(p == path and fragment in m for p, m in err.value.problems), err.value.problems
    assert "test.toml" in str(err.value)


def test_bad_files(tmp_path):
    with pytest.raises(SpecError, match="no such file"):
        load_spec(tmp_path / "missing.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("[campaign\nname = 1")
    with pytest.raises(SpecError, match="TOML"):
        load_spec(broken)


def test_overrides():
    spec = load_spec(FREESOLV_SPEC).with_overrides(seed=7, lab_budget=5)
    assert (spec.campaign.seed, spec.budget.lab_experiments) == (7, 5)


# ------------------------------------------------------------------------ issue 46: a rung that reads the lab's truth
def test_a_table_rung_on_the_lab_column_is_refused_naming_the_rung_the_column_and_the_fix():
    data = load_spec(FREESOLV_SPEC).model_dump()
    data["ladder"][2]["column"] = "expt"  # a typo for "calc": the rung would predict the lab perfectly
    with pytest.raises(SpecError) as err:
        validate_spec(data, source="test.toml")
    (path, message), = err.value.problems
    assert path == "(top level)" and "\n" not in message
    assert "rung 'gaff' reads column 'expt', which is lab.oracle_column" in message
    assert "give the rung the column of its own (cheaper) measurement" in message


def test_a_table_rung_on_the_inline_truth_is_refused():
    data = {"campaign": {"name": "c", "kind": "molecule"}, "objective": {"direction": "maximize"},
            "space": {"inline": ["CCO", "CCCO"]}, "lab": {"oracle": {"CCO": 1.0, "CCCO": 2.0}},
            "ladder": [{"name": "peek", "simulator": "table", "column": "_oracle"}],
            "budget": {"lab_experiments": 2}}
    with pytest.raises(SpecError, match="rung 'peek' reads column '_oracle', which is the inline lab.oracle"):
        validate_spec(data)
    data["ladder"][0]["column"] = "calc"
    assert validate_spec(data).ladder[0].column == "calc"


# ----------------------------------------------------------------- issue 46: a spec saved with a BOM or CRLF line ends
@pytest.mark.parametrize("prefix,newline", [(b"\xef\xbb\xbf", b"\n"), (b"", b"\r\n"), (b"\xef\xbb\xbf", b"\r\n"),
                                            (b"", b"\r")])
def test_a_spec_saved_with_a_byte_order_mark_or_crlf_loads_as_the_plain_file_does(tmp_path, prefix, newline):
    text = FREESOLV_SPEC.read_bytes()
    saved = tmp_path / "campaign.toml"
    saved.write_bytes(prefix + text.replace(b"\n", newline))
    plain = tmp_path / "plain.toml"
    plain.write_bytes(text)
    assert load_spec(saved) == load_spec(plain)


@pytest.mark.parametrize("encoding,name", [("utf-16", "UTF-16"), ("utf-16-be", "UTF-16"), ("utf-32", "UTF-32")])
def test_a_spec_saved_as_utf16_is_refused_with_save_it_as_utf8(tmp_path, encoding, name):
    saved = tmp_path / "campaign.toml"
    text = FREESOLV_SPEC.read_text(encoding="utf-8")
    saved.write_bytes(("\ufeff" if encoding == "utf-16-be" else "").encode(encoding) + text.encode(encoding))
    with pytest.raises(SpecError) as err:
        load_spec(saved)
    assert err.value.problems == [("(file)", f"is {name} text (it starts with a {name} byte-order mark); save it as "
                                             "UTF-8")]
    assert "TOML syntax" not in str(err.value)


# --------------------------------------------------------- issue 50: every field documented, every error linked to it
def test_every_campaign_under_campaigns_still_loads():
    from tests.conftest import ROOT

    specs = sorted((ROOT / "campaigns").rglob("campaign.toml"))
    assert len(specs) >= 3 and all(load_spec(path).campaign.name for path in specs)


def test_a_bad_field_in_a_toml_file_is_named_and_linked_to_the_reference(tmp_path):
    text = FREESOLV_SPEC.read_text(encoding="utf-8").replace("[lab]", "[lab]\nnoise = 0.1", 1)
    saved = tmp_path / "campaign.toml"
    saved.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as err:
        load_spec(saved)
    assert err.value.problems == [("lab.noise", "Extra inputs are not permitted; remove it or check its spelling "
                                                "against the documented fields")]
    assert "  - lab.noise: Extra inputs are not permitted" in str(err.value)
    assert str(err.value).endswith("(see docs/spec.md#lab)")


def test_a_bad_value_links_the_fields_own_entry():
    with pytest.raises(SpecError) as err:
        validate_spec(_broken(screening__min_pairs=1), source="test.toml")
    assert "screening.min_pairs: Input should be greater than or equal to 3 (see docs/spec.md#screening-min_pairs)" \
        in str(err.value)


def test_every_field_carries_a_description_and_units_where_it_has_one():
    from orchestrator.spec import CampaignSpec

    defs = CampaignSpec.model_json_schema()["$defs"]
    assert defs["LabSpec"]["properties"]["retry_backoff_s"]["unit"] == "s"
    assert defs["BudgetSpec"]["properties"]["lab_hours"]["unit"] == "h"
    assert defs["ObjectiveSpec"]["properties"]["target"]["unit"] == "objective unit"
    assert all(field.get("description") for model in defs.values() for field in model["properties"].values())
