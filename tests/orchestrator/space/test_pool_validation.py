"""The pool's validation boundary (issue 18): every bad row is refused with its line, or skipped and reported."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from orchestrator.interfaces.cli import app
from orchestrator.loop.campaign import Campaign
from orchestrator.space.pool import load_pool
from orchestrator.spec import validate_spec
from tests.conftest import ROOT
from vocabulary.domain import InvalidCandidate, Material, SetupError


def pool_spec(tmp_path, text: str, *, kind: str = "molecule", column: str = "smiles", **space):
    """A small campaign spec over ``text`` written as pool.csv (lab truth in column ``y``)."""
    (tmp_path / "pool.csv").write_text(text)
    return validate_spec({
        "campaign": {"name": "v", "kind": kind}, "objective": {"direction": "maximize"},
        "space": {"pool": "pool.csv", "column": column, **space}, "lab": {"oracle_column": "y"},
        "budget": {"lab_experiments": 2}, "planner": {"main": "random", "control": None, "control_share": 0},
        "base_dir": str(tmp_path)})


def spec_file(tmp_path, text: str, space_lines: str = "") -> str:
    (tmp_path / "pool.csv").write_text(text)
    path = tmp_path / "campaign.toml"
    path.write_text(f'[campaign]\nname = "v"\nkind = "molecule"\n[objective]\ndirection = "maximize"\n'
                    f'[space]\npool = "pool.csv"\ncolumn = "smiles"\n{space_lines}\n[lab]\noracle_column = "y"\n'
                    '[budget]\nlab_experiments = 2\n[planner]\nmain = "random"\ncontrol = "bo"\n')
    return str(path)


GOOD = "CCO,1\nCCC,2\nCCCC,3\n"


# ------------------------------------------------------------------------------------------- case 1: bad candidates
def test_an_invalid_smiles_is_refused_naming_the_file_line_and_value(tmp_path):
    spec = pool_spec(tmp_path, "smiles,y\n" + GOOD + "C1CC,4\n")
    with pytest.raises(SetupError) as err:
        load_pool(spec)
    message = str(err.value)
    assert "pool.csv" in message and "line 5: SMILES 'C1CC' is not a valid molecule" in message
    assert 'on_bad_rows = "skip"' in message and "\n" not in message


def test_a_blank_line_does_not_shift_the_line_numbers(tmp_path):
    spec = pool_spec(tmp_path, "smiles,y\nCCO,1\n\nC1CC,4\nCCC,2\n")
    with pytest.raises(SetupError, match="line 4: SMILES 'C1CC'"):
        load_pool(spec)


def test_many_bad_rows_are_named_up_to_a_limit_with_a_count(tmp_path):
    spec = pool_spec(tmp_path, "smiles,y\n" + GOOD + "".join(f"X{k},1\n" for k in range(8)))
    with pytest.raises(SetupError) as err:
        load_pool(spec)
    message = str(err.value)
    assert "has 8 bad row(s)" in message and "line 5:" in message and "line 9:" in message
    assert "line 10:" not in message and "and 3 more" in message


def test_an_overflowing_formula_is_a_bad_row_not_a_traceback(tmp_path):
    with pytest.raises(InvalidCandidate, match="Fe1e400O"):
        Material.parse("Fe1e400O")
    spec = pool_spec(tmp_path, "formula,y\nFe2O3,1\nNaCl,2\nFe1e400O,3\n", kind="material", column="formula")
    with pytest.raises(SetupError, match=r"line 4: formula 'Fe1e400O' has an infinite amount"):
        load_pool(spec)


def test_skip_leaves_bad_rows_out_and_reports_every_one(tmp_path, caplog):
    spec = pool_spec(tmp_path, "smiles,y\n" + GOOD + "C1CC,4\nCCCCC,\n", on_bad_rows="skip")
    with caplog.at_level(logging.WARNING):
        pool = load_pool(spec)
    assert len(pool) == 3
    assert pool.skipped_rows == ["line 5: SMILES 'C1CC' is not a valid molecule (rdkit could not parse it)",
                                 "line 6: y is empty"]
    assert all(row in caplog.text for row in pool.skipped_rows)
    with Campaign.start(spec, db=":memory:", campaign_id="c") as campaign:
        started = campaign.ledger.events("c", types=["CampaignStarted"])[0].payload
    assert started["pool_rows_skipped"] == pool.skipped_rows
    assert started["spec"]["space"]["on_bad_rows"] == "skip"


def test_the_cli_prints_one_error_line_and_exits_2_without_a_traceback(tmp_path):
    spec = spec_file(tmp_path, "smiles,y\n" + GOOD + "C1CC,4\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "COLUMNS": "300"}
    result = subprocess.run([sys.executable, "-c", "from orchestrator.interfaces.cli_main import main; main()", "run", spec,
                             "--db", str(tmp_path / "x.db")], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: pool pool.csv has 1 bad row(s): line 5:"), result.stderr
    assert "'C1CC'" in lines[0] and "Traceback" not in result.stderr
    assert not (tmp_path / "x.db").exists(), "a refused pool leaves no ledger behind"


# ---------------------------------------------------------------------------------------------- case 2: empty pools
@pytest.mark.parametrize("text,fragment", [("smiles,y\n", "has a header but no rows"),
                                           ("", "is empty (no header, no rows)")])
def test_an_empty_pool_file_is_refused_naming_it(tmp_path, text, fragment):
    spec = pool_spec(tmp_path, text)
    with pytest.raises(SetupError, match=re.escape(fragment)) as err:
        load_pool(spec)
    assert str(tmp_path / "pool.csv") in str(err.value) and "no rows" in str(err.value)
    result = CliRunner().invoke(app, ["run", spec_file(tmp_path, text), "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 2 and fragment in result.output and result.exception is not None
    assert isinstance(result.exception, SystemExit)


# --------------------------------------------------------------------------------- case 3: non-finite lab values
@pytest.mark.parametrize("value,fragment", [("nan", "y is 'nan' \\(not a number\\)"), ("NA", "y is 'NA' \\(not a number\\)"),
                                            ("", "y is empty"), ("inf", "y=inf is not finite"),
                                            ("-inf", "y=-inf is not finite"), ("high", "y='high' is not a number")])
def test_a_lab_value_that_is_not_finite_is_refused(tmp_path, value, fragment):
    spec = pool_spec(tmp_path, "smiles,y\n" + GOOD + f"CCCCC,{value}\n")
    with pytest.raises(SetupError, match=f"pool.csv has 1 bad row\\(s\\): line 5: {fragment}"):
        load_pool(spec)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("text_row", ["", "120,thf,high,1\n"])
def test_a_missing_value_marker_in_the_lab_column_is_named_as_written_not_empty(tmp_path, stream, text_row):
    """pandas reads NaN, NA and null as missing; the row names what is written there (issue 46), in the in-memory
    and the streamed pool alike, while a table rung's column may still leave a value out with them."""
    (tmp_path / "pool.csv").write_text("t,solvent,y,calc\n20,water,1,0.5\n40,water,NaN,\n60,dmso,,NA\n"
                                       f"80,dmso,null,2\n100,thf,4,n/a\n{text_row}")
    spec = validate_spec({
        "campaign": {"name": "v", "kind": "conditions"}, "objective": {"property": "y", "direction": "maximize"},
        "space": {"pool": "pool.csv", "columns": ["t", "solvent"], "on_bad_rows": "skip", "stream": stream},
        "ladder": [{"name": "calc", "simulator": "table", "column": "calc"}],
        "lab": {"oracle_column": "y"}, "budget": {"lab_experiments": 2},
        "planner": {"main": "random", "control": None, "control_share": 0}, "base_dir": str(tmp_path)})
    pool = load_pool(spec)
    assert pool.skipped_rows == ["line 3: y is 'NaN' (not a number)", "line 4: y is empty",
                                 "line 5: y is 'null' (not a number)"] + (["line 7: y='high' is not a number"]
                                                                          if text_row else [])
    assert len(pool) == 2 and np.isnan(pool.columns["calc"]).tolist() == [False, True]


def test_skipped_non_finite_values_never_reach_the_lab(tmp_path):
    spec = pool_spec(tmp_path, "smiles,y\n" + GOOD + "CCCCC,nan\nCCCCCC,inf\n", on_bad_rows="skip")
    pool = load_pool(spec)
    assert len(pool) == 3 and np.isfinite(pool.columns["y"]).all()
    assert [row.split(":")[0] for row in pool.skipped_rows] == ["line 5", "line 6"]


def test_an_inline_oracle_must_be_finite():
    from orchestrator.spec import SpecError

    with pytest.raises(SpecError, match="lab.oracle: .*must be finite"):
        validate_spec({"campaign": {"name": "v", "kind": "molecule"}, "objective": {"direction": "maximize"},
                       "space": {"inline": ["CCO", "CCC"]}, "lab": {"oracle": {"CCO": 1.0, "CCC": float("nan")}},
                       "budget": {"lab_experiments": 1}})


# ----------------------------------------------------------------------------------- case 4: disagreeing replicates
def test_replicates_that_disagree_are_refused_naming_both_rows(tmp_path):
    spec = pool_spec(tmp_path, "smiles,y\n" + GOOD + "OCC,5\n")  # OCC is CCO spelled another way
    with pytest.raises(SetupError) as err:
        load_pool(spec)
    message = str(err.value)
    assert "line 5: 'CCO' repeats line 2 with y=5 against 1" in message
    assert 'replicates = "average"' in message


def test_replicates_that_agree_are_merged(tmp_path):
    pool = load_pool(pool_spec(tmp_path, "smiles,y\n" + GOOD + "OCC,1\nCCC,2\n"))
    assert len(pool) == 3 and pool.column("y") == {c.id: v for c, v in zip(pool.candidates, (1.0, 2.0, 3.0))}


def test_averaging_on_purpose_is_stated(tmp_path, caplog):
    spec = pool_spec(tmp_path, "smiles,y\n" + GOOD + "OCC,5\nCCC,4\n", replicates="average")
    with caplog.at_level(logging.WARNING):
        pool = load_pool(spec)
    assert sorted(pool.columns["y"].tolist()) == [3.0, 3.0, 3.0]
    assert "averaged 2 candidate(s) whose 4 replicate rows differ in ['y']" in caplog.text


def test_skip_keeps_the_first_of_disagreeing_replicates(tmp_path):
    spec = pool_spec(tmp_path, "smiles,y\n" + GOOD + "OCC,5\n", on_bad_rows="skip")
    pool = load_pool(spec)
    assert len(pool) == 3 and pool.columns["y"].tolist() == [1.0, 2.0, 3.0]
    assert pool.skipped_rows == ["line 5: 'CCO' repeats line 2 with y=5 against 1"]


# ------------------------------------------- a SMILES column of a conditions pool featurised by what its columns hold
REACTIONS = "".join(f"{smiles},{t},{y}\n" for smiles, t, y in [
    ("CCO", 20, 1), ("CCN", 40, 2), ("c1ccccc1", 60, 3), ("CC(=O)O", 20, 4), ("CCCl", 40, 5), ("OCCO", 60, 6),
    ("CC(C)O", 20, 7), ("CCOC", 40, 8), ("C1CCCCC1", 60, 9), ("CC#N", 20, 10), ("ClCCl", 40, 11)])


def _reaction_spec(tmp_path, text: str, **space):
    return pool_spec(tmp_path, "additive,T,y\n" + text, kind="conditions", column=None, columns=["additive", "T"],
                     features="columns", **space)


def test_a_smiles_typo_in_a_conditions_column_is_a_bad_row_not_a_column_of_categories(tmp_path, caplog):
    """One typo among ten molecules leaves the column SMILES (Morgan bits, not one-hot names): refused with its
    line and value, or skipped and reported."""
    text = REACTIONS + "C1CC(N,60,12\n"
    with pytest.raises(SetupError, match=r"line 13: additive='C1CC\(N' is not a valid SMILES"):
        load_pool(_reaction_spec(tmp_path, text))
    with caplog.at_level(logging.WARNING):
        pool = load_pool(_reaction_spec(tmp_path, text, on_bad_rows="skip"))
    assert len(pool) == 11 and "line 13" in caplog.text
    assert pool.features.shape[1] > 11 and set(np.unique(pool.features)) <= {0.0, 0.5, 1.0}, \
        "Morgan bits plus the scaled temperature, not eleven one-hot names"


@pytest.mark.parametrize("stream", [False, True])
def test_by_default_a_smiles_column_of_a_conditions_pool_is_read_as_molecules(tmp_path, stream):
    """``features = "auto"`` (the default) reads a SMILES column as Morgan bits, as "columns" does, whether the pool
    is held or streamed; a pool of numbers and plain categories is encoded as "parameters" does."""
    def spec(text, columns, **space):
        return pool_spec(tmp_path, text, kind="conditions", column=None, columns=columns, stream=stream, **space)

    reactions = "additive,T,y\n" + REACTIONS
    assert spec(reactions, ["additive", "T"]).space.features == "auto"
    by_default = np.asarray(load_pool(spec(reactions, ["additive", "T"])).features)
    as_columns = np.asarray(load_pool(spec(reactions, ["additive", "T"], features="columns")).features)
    as_names = np.asarray(load_pool(spec(reactions, ["additive", "T"], features="parameters")).features)
    assert np.array_equal(by_default, as_columns) and by_default.shape[1] > 11, "Morgan bits plus the temperature"
    assert as_names.shape[1] == 12, "eleven one-hot names plus the temperature: what the default no longer does"
    named = "".join(f"{s},{t},{y}\n" for s, t, y in [("dmso", 20, 1), ("water", 40, 2), ("thf", 60, 3)])
    plain = np.asarray(load_pool(spec("solvent,T,y\n" + named, ["solvent", "T"])).features)
    assert np.array_equal(plain, np.asarray(load_pool(spec("solvent,T,y\n" + named, ["solvent", "T"],
                                                           features="parameters")).features))


def test_a_streamed_pool_names_a_value_that_does_not_parse(tmp_path):
    """A streamed pool encodes each distinct value once, after the row checks: a typo is a one-line error there."""
    import pandas as pd

    from orchestrator.space.features import featurise_columns

    frame = pd.DataFrame({"additive": ["CCO", "CCN", "c1ccccc1", "CC(=O)O", "CCCl", "OCCO", "CC(C)O", "CCOC",
                                       "C1CCCCC1", "CC#N", "C1CC(N"]})
    with pytest.raises(SetupError, match=r"column 'additive' holds smiles, but 'C1CC\(N' is not one"):
        featurise_columns(frame, ["additive"])


def test_a_semicolon_separated_pool_is_named_as_such(tmp_path):
    """A European-locale export reads as one column; the error says why and how to fix it."""
    spec = pool_spec(tmp_path, "smiles;y\nCCO;1\nCCC;2\n")
    with pytest.raises(SetupError, match="holding ';': save the file comma-separated"):
        load_pool(spec)


@pytest.mark.parametrize("stream", [False, True])
def test_a_column_spelt_another_way_is_named_in_the_error(tmp_path, stream):
    """'SMILES' in the file and 'smiles' in the spec: the error names the column the user most likely meant."""
    text = "SMILES,T,Yield (%)\nCCO,20,1\nCCC,40,2\n"
    spec = pool_spec(tmp_path, text, kind="conditions", column=None, columns=["smiles", "T"], stream=stream)
    with pytest.raises(SetupError, match=r"no column\(s\) \['smiles', 'y'\].*; did you mean 'SMILES' for 'smiles'\?$"):
        load_pool(spec)


def test_a_bench_objective_spelt_another_way_is_named_in_the_error(tmp_path):
    from orchestrator.bench import BenchConfig, BenchError, load_problem

    (tmp_path / "pool.csv").write_text("smiles,Measured logS\nCCO,1\nCCC,2\nCCCC,3\n")
    config = BenchConfig(pool=str(tmp_path / "pool.csv"), id_cols=("smiles",), objective="maximize:measured_logs",
                         lab_budget=2, seeds=1, arms=("random",), batch=1)
    with pytest.raises(BenchError, match=r"did you mean 'Measured logS' for 'measured_logs'\?"):
        load_problem(config, tmp_path / "work")
