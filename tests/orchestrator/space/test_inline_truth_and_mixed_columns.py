"""Two spec spellings from issue 50: inline conditions with their ground truth, and a base column that mixes
inorganic formulas with one organic base (SMILES)."""

from __future__ import annotations

import tomllib

import pytest

from orchestrator.interfaces.spec_reference import _EXAMPLES
from orchestrator.loop.campaign import Campaign
from orchestrator.space.pool import load_pool
from orchestrator.spec import load_spec, validate_spec
from vocabulary.domain import SetupError

INORGANIC = ["K2CO3", "Cs2CO3", "K3PO4", "Na2CO3", "NaOH", "KOH", "CsF", "KF", "Li2CO3", "NaHCO3", "KHCO3"]
DBU = "C1CCC2=NCCCN2CC1"


# ------------------------------------------------------------------------ a base column of formulas plus one SMILES
def _bases_spec(tmp_path, **space):
    rows = [f"{base},{t},{k}" for k, (base, t) in enumerate((b, t) for b in [*INORGANIC, DBU] for t in (60, 80))]
    (tmp_path / "pool.csv").write_text("base,temperature_c,y\n" + "\n".join(rows) + "\n")
    return validate_spec({
        "campaign": {"name": "bases", "kind": "conditions"}, "objective": {"direction": "maximize"},
        "space": {"pool": "pool.csv", "columns": ["base", "temperature_c"], **space}, "lab": {"oracle_column": "y"},
        "budget": {"lab_experiments": 2}, "base_dir": str(tmp_path)})


@pytest.mark.parametrize("stream", [False, True])
def test_a_column_of_formulas_with_one_smiles_suggests_features_parameters(tmp_path, stream):
    """Read as formulas, the organic base does not parse: the message says the column mixes the two and names the
    fix that works (features = "parameters"), not only "fix it"."""
    with pytest.raises(SetupError) as err:
        load_pool(_bases_spec(tmp_path, stream=stream))
    message = str(err.value)
    assert DBU in message and 'set [space] features = "parameters"' in message and "\n" not in message
    if not stream:
        assert f"base={DBU!r} is not a valid formula" in message and "mixes formulas and SMILES" in message


@pytest.mark.parametrize("stream", [False, True])
def test_the_suggested_fix_loads_every_base_as_a_name(tmp_path, stream):
    pool = load_pool(_bases_spec(tmp_path, features="parameters", stream=stream))
    assert len(pool) == 2 * (len(INORGANIC) + 1)
    assert {c.values["base"] for c in pool.candidates} == {*INORGANIC, DBU}


def test_a_typo_in_a_formula_column_still_offers_the_fix(tmp_path):
    """A value that is neither a formula nor a SMILES: fix it, or read the column as names."""
    from orchestrator.space.pool import mixed_kinds_hint

    assert mixed_kinds_hint("K2C)O3", "formula") == '; fix it, or set [space] features = "parameters" to read each ' \
                                                    'value as a name (one-hot)'
    assert "it is a formula" in mixed_kinds_hint("NaCl", "smiles")


# -------------------------------------------------------------------------- inline conditions with an inline truth
def _inline_spec(tmp_path, text: str):
    path = tmp_path / "campaign.toml"
    path.write_text(text + '\n[planner]\nmain = "random"\ncontrol = "bo"\n')
    return load_spec(path)


def test_inline_conditions_carry_their_truth_under_lab_oracle_column(tmp_path):
    """The documented spelling (docs/spec.md#space): each [[space.inline]] table is a row, the key that
    lab.oracle_column names is its ground truth and not a parameter; the campaign runs on it."""
    spec = _inline_spec(tmp_path, _EXAMPLES["inline_conditions"])
    pool = load_pool(spec)
    assert pool.space.names == ("base", "temperature_c")
    assert [c.values for c in pool.candidates] == [{"base": "K2CO3", "temperature_c": 60.0},
                                                   {"base": "Cs2CO3", "temperature_c": 80.0}]
    assert list(pool.columns["yield_pct"]) == [41.0, 67.5]
    with Campaign.start(spec, db=":memory:", campaign_id="inline") as campaign:
        summary = campaign.run()
        measured = sorted(e.payload["value"] for e in campaign.ledger.events("inline", types=["Observed"]))
    assert summary["n_lab"] == 2 and summary["n_lab_failed"] == 0
    assert measured == [41.0, 67.5], "the simulated lab answers with each row's own ground truth"


def test_an_inline_row_without_its_truth_is_a_bad_row(tmp_path):
    text = _EXAMPLES["inline_conditions"].replace("yield_pct = 67.5\n", "")
    with pytest.raises(SetupError, match=r"space.inline has 1 bad row\(s\): inline item 2: yield_pct is empty"):
        load_pool(_inline_spec(tmp_path, text))


def test_an_oracle_column_no_inline_table_holds_is_refused_with_the_spelling(tmp_path):
    text = _EXAMPLES["inline_conditions"].replace('oracle_column = "yield_pct"', 'oracle_column = "yield"')
    with pytest.raises(SetupError, match=r"lab.oracle_column 'yield' names no value of the inline space: no "
                                         r"space.inline table has that key.*docs/spec.md#space-inline"):
        load_pool(_inline_spec(tmp_path, text))


def test_inline_conditions_with_a_lab_oracle_mapping_point_to_oracle_column(tmp_path):
    data = tomllib.loads(_EXAMPLES["inline_conditions"])
    data["lab"] = {"oracle": {"base=K2CO3, temperature_c=60": 41.0}}
    for row in data["space"]["inline"]:
        row.pop("yield_pct")
    with pytest.raises(SetupError, match="inline conditions carry their ground truth in each table.*set "
                                         "lab.oracle_column"):
        load_pool(validate_spec(data))
