"""`bench --pool` keeps rows with an empty id value, says what it averages, and lists what it leaves out (issue 18)."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from orchestrator.bench import BenchConfig, load_problem, parse_rung
from orchestrator.policy.planners.bo import campaign_kernel

LIGANDS = ["CC(C)P(C(C)C)C(C)C", "c1ccc(P(c2ccccc2)c2ccccc2)cc1", "CP(C)C"]


def _config(path, **overrides) -> BenchConfig:
    values = dict(pool=str(path), id_cols=("base", "ligand"), objective="maximize:y", lab_budget=4, seeds=1,
                  arms=("random",), batch=2)
    return BenchConfig(**(values | overrides))


def test_an_empty_id_value_is_a_category_of_its_own(tmp_path, caplog):
    frame = pd.DataFrame({"base": ["dbu", "tmg", None, "dbu", "tmg", None, "dbu", "tmg"],
                          "ligand": [LIGANDS[0], None, LIGANDS[1], LIGANDS[2], LIGANDS[0], None, None, LIGANDS[2]],
                          "y": np.arange(8, dtype=float)})
    path = tmp_path / "pool.csv"
    frame.to_csv(path, index=False)
    with caplog.at_level(logging.WARNING):
        problem = load_problem(_config(path), tmp_path / "work")
    assert len(problem) == 8, "no row is dropped for an empty id value"
    values = [c.values for c in problem.pool.candidates]
    assert {"base": "none", "ligand": "none"} in values and sum(v["ligand"] == "none" for v in values) == 3
    features = problem.pool.features
    assert features.shape[0] == 8 and np.isfinite(features).all()
    assert campaign_kernel(problem.spec, problem.pool) == "tanimoto", "the ligand column stays fingerprints, 'none' all zeros"
    assert "left out" not in caplog.text


def test_rows_without_a_lab_value_are_listed_and_replicates_are_stated(tmp_path, caplog):
    frame = pd.DataFrame({"base": ["a", "b", "c", "d", "e", "a", "b", "f"],
                          "ligand": ["x"] * 8,
                          "y": [1.0, 2.0, np.nan, 4.0, np.inf, 3.0, 2.0, np.nan]})
    path = tmp_path / "pool.csv"
    frame.to_csv(path, index=False)
    with caplog.at_level(logging.WARNING):
        problem = load_problem(_config(path, lab_budget=2), tmp_path / "work")
    assert len(problem) == 3 and (problem.n_dropped, problem.n_averaged) == (3, 2)
    assert "left out 3 row(s) without a finite lab value in 'y': lines 4, 6, 9" in caplog.text
    assert "averaged 2 replicate group(s) (4 rows) into one candidate each, the PV-Lab protocol" in caplog.text
    by_base = {c.values["base"]: v for c, v in zip(problem.pool.candidates, problem.values)}
    assert by_base == {"a": 2.0, "b": 2.0, "d": 4.0}, "replicates are averaged (the PV-Lab protocol)"


def test_a_smiles_typo_leaves_its_row_out_and_the_column_fingerprints(tmp_path, caplog):
    """One typo among the ligands is a bad row (named by its line), not a reason to read every ligand as a name."""
    smiles = ["CCO", "CCN", "c1ccccc1", "CC(=O)O", "CCCl", "OCCO", "CC(C)O", "CCOC", "C1CCCCC1", "CC#N", "C1CC(N"]
    frame = pd.DataFrame({"base": ["dbu", "tmg"] * 5 + ["dbu"], "ligand": smiles, "y": np.arange(11, dtype=float)})
    path = tmp_path / "pool.csv"
    frame.to_csv(path, index=False)
    with caplog.at_level(logging.WARNING):
        problem = load_problem(_config(path), tmp_path / "work")
    assert len(problem) == 10 and problem.n_dropped == 1
    assert "left out 1 row(s) without a valid smiles in 'ligand': lines 12" in caplog.text
    assert campaign_kernel(problem.spec, problem.pool) == "tanimoto" and problem.pool.features.shape[1] > 12, \
        "Morgan bits for the ligands (and one-hot bases), not eleven one-hot names"


def test_a_few_text_cells_in_the_lab_or_rung_column_read_as_empty_and_are_named(tmp_path, caplog):
    """'n/a' or '-' in a number column is a missing value (its row named), not a reason to refuse the column."""
    frame = pd.DataFrame({"base": [f"b{k}" for k in range(12)], "ligand": ["x"] * 12,
                          "y": [str(float(k)) for k in range(12)], "cheap": [str(0.5 * k) for k in range(12)]})
    frame.loc[3, "y"] = "-"  # CSV line 5
    frame.loc[6, "cheap"] = "failed"  # CSV line 8
    path = tmp_path / "pool.csv"
    frame.to_csv(path, index=False)
    with caplog.at_level(logging.WARNING):
        problem = load_problem(_config(path, rungs=(parse_rung("cheap=cheap:1"),)), tmp_path / "work")
    assert len(problem) == 11 and "without a finite lab value in 'y': lines 5" in caplog.text
    assert "rung column 'cheap' holds text, read as empty, on line(s) 8" in caplog.text
    by_base = {c.values["base"]: k for k, c in enumerate(problem.pool.candidates)}
    cheap = problem.pool.columns["cheap"]
    assert np.isnan(cheap[by_base["b6"]]) and cheap[by_base["b7"]] == 3.5, "the text cell is empty, the rest numbers"


def test_a_lab_column_of_text_is_refused_with_examples(tmp_path):
    """Numbers written with their unit are no lab values: the bench names the column, shows some cells and says
    how to write them, rather than leaving out every row or failing later."""
    from orchestrator.bench import BenchError

    frame = pd.DataFrame({"base": [f"b{k}" for k in range(12)], "ligand": ["x"] * 12,
                          "y": [f"{k} mg/L" for k in range(12)]})
    path = tmp_path / "pool.csv"
    frame.to_csv(path, index=False)
    try:
        load_problem(_config(path), tmp_path / "work")
    except BenchError as error:
        message = str(error)
    else:
        raise AssertionError("a lab column of text was accepted")
    assert "--objective" in message and "12 of its 12 filled cells" in message and "'0 mg/L'" in message
    assert "units belong in the header" in message


def test_two_spellings_of_one_molecule_are_replicates(tmp_path, caplog):
    """'OCC' and 'CCO' are one molecule: averaged into one candidate, as a campaign's pool merges them, so the top
    set does not count ethanol twice."""
    ligands = ["OCC", "CCO", "C(C)O", "c1ccccc1", "C1=CC=CC=C1", "CCN", "CCCl", "CC#N", "OCCO", "CC(C)O"]
    frame = pd.DataFrame({"base": ["dbu"] * 10, "ligand": ligands, "y": [1.0, 2.0, 3.0, 4.0, 6.0, 7, 8, 9, 10, 11]})
    path = tmp_path / "pool.csv"
    frame.to_csv(path, index=False)
    with caplog.at_level(logging.WARNING):
        problem = load_problem(_config(path), tmp_path / "work")
    assert len(problem) == 7 and problem.n_averaged == 2
    by_ligand = {c.values["ligand"]: v for c, v in zip(problem.pool.candidates, problem.values)}
    assert by_ligand["CCO"] == 2.0 and by_ligand["c1ccccc1"] == 5.0, "averaged under RDKit's canonical SMILES"


def test_two_spellings_of_one_composition_are_replicates(tmp_path):
    """'O3Fe2' is 'Fe2O3' (one candidate, shown as first written); 'Fe4O6' is a formula unit of its own."""
    frame = pd.DataFrame({"base": ["dbu"] * 6, "ligand": ["Fe2O3", "NaCl", "O3Fe2", "Fe4O6", "ClNa", "KBr"],
                          "y": [1.0, 2.0, 3.0, 4.0, 6.0, 7.0]})
    path = tmp_path / "pool.csv"
    frame.to_csv(path, index=False)
    problem = load_problem(_config(path), tmp_path / "work")
    by_formula = {c.values["ligand"]: v for c, v in zip(problem.pool.candidates, problem.values)}
    assert by_formula == {"Fe2O3": 2.0, "NaCl": 4.0, "Fe4O6": 4.0, "KBr": 7.0} and problem.n_averaged == 2
