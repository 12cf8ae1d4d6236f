"""The Olympus and LNP discovery cells load as their SOURCE.txt describes, and every ratio against BoTorch is
against the better of botorch and botorch-onehot."""

from __future__ import annotations

import re

import pytest

from benchmarks.discovery import DATA, DATASETS, default_arms, main
from benchmarks.discovery_report import dataset_table, goal_table
from orchestrator.bench import BenchConfig, load_problem, parse_rung

NEW_CELLS = {  # cell: (file, id columns, objective), as SOURCE.txt lists them
    "reductive_amination": ("olympus_reactions/Reductive_Amination.csv",
                            ["substrate", "AcOH_equiv", "TTIP_equiv", "solvent", "reaction_concentration_mM"],
                            "maximize:percent_conversion"),
    "suzuki_cernak": ("olympus_reactions/Suzuki_Cernak.csv", ["halide", "boronate", "conditions"], "maximize:conversion"),
    "amide_coupling": ("olympus_reactions/amide_coupling_hte.csv", ["amine", "acid", "condition"], "maximize:yield"),
    "dye_lasers": ("olympus_reactions/dye_lasers.csv", ["frag_a", "frag_b", "frag_c"], "maximize:peak_score"),
    "lnp": ("lnp_formulations/lnp_formulations.csv",
            ["drug_input", "solid_lipid", "solid_lipid_input", "liquid_lipid_input", "surfactant_input"],
            "maximize:drug_loading"),
}


def _rows_in_source(relative: str) -> int:
    """The row count the folder's SOURCE.txt gives for a file (its table for Olympus, its prose for the LNP set)."""
    source = (DATA / relative).parent / "SOURCE.txt"
    text = source.read_text()
    name = relative.rsplit("/", 1)[1]
    row = re.search(rf"^\| {re.escape(name)} \| ([\d,]+) \|", text, flags=re.M)
    if row is None:
        row = re.search(r"(\d+) rows, one per formulation", text)
    return int(row.group(1).replace(",", ""))


@pytest.mark.parametrize("name", list(NEW_CELLS))
def test_a_new_cell_loads_with_its_rows_id_columns_and_objective(name, tmp_path):
    relative, id_cols, objective = NEW_CELLS[name]
    cell = DATASETS[name]
    assert cell["pool"] == DATA / relative and cell["id_cols"] == id_cols and cell["objective"] == objective
    assert (DATA / relative).parent.joinpath("SOURCE.txt").is_file()
    config = BenchConfig(pool=str(cell["pool"]), id_cols=tuple(id_cols), objective=objective,
                         rungs=tuple(parse_rung(r) for r in cell["rungs"]), lab_budget=10, seeds=1, arms=("random",))
    problem = load_problem(config, tmp_path)
    n_rows = _rows_in_source(relative)
    assert problem.n_rows == len(problem) == n_rows  # a fully enumerated grid: no replicates, no row left out
    assert problem.n_dropped == 0 and problem.n_averaged == 0
    assert list(problem.spec.space.columns) == id_cols
    direction, column = objective.split(":")
    assert problem.direction == direction and problem.spec.lab.oracle_column == column


def test_the_multi_objective_cells_record_the_objectives_they_leave_out():
    assert DATASETS["lnp"]["other_objectives"] == ["maximize:encap_efficiency", "minimize:particle_diameter"]
    assert DATASETS["dye_lasers"]["other_objectives"] == ["minimize:spectral_overlap", "maximize:fluo_rate"]


def test_botorch_onehot_runs_by_default_where_reagents_are_smiles_in_a_grid():
    for name in ("buchwald_hartwig", "amide_coupling", "dye_lasers"):
        assert "botorch-onehot" in default_arms(name)
    for name in ("freesolv", "esol", "bandgap", "lnp", "suzuki_cernak", "crossed_barrel"):
        assert "botorch-onehot" not in default_arms(name)  # there it proposes what botorch proposes


def test_another_lab_budget_must_keep_its_runs_out_of_the_tables(capsys):
    with pytest.raises(SystemExit):
        main(["--only", "lnp", "--lab-budget", "10"])
    assert "give --results DIR" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--only", "no_such_cell", "--results", "/tmp/unused"])
    assert "unknown data set(s) ['no_such_cell']" in capsys.readouterr().err


def _summary(median: float) -> dict:
    q = {"median": median, "iqr": [median, median]}
    return {"experiments_to_top1": q, "experiments_to_top5": q, "best_at_budget": q, "hit_rate_top1": 1.0,
            "total_cost_s": 86400.0, "wall_s": 1.0, "per_seed": {"seeds": [0]}}


def _report(medians: dict[str, float]) -> dict:
    return {"lab_budget": 50, "batch": 5, "pool_size": 100, "n_csv_rows": 100, "n_top1": 1, "n_top5": 5,
            "best_in_pool": 1.0, "best_at_budget_unit": "objective value", "n_features": 3, "kernel": "matern52",
            "seeds": 1, "config": {"arms": list(medians)}, "af_vs_random": {}, "code_commit": "98e02e9",
            "arms": {arm: _summary(m) for arm, m in medians.items()}}


def test_tables_take_ratios_against_the_better_botorch_arm_and_say_so():
    report = _report({"bo": 12.0, "botorch": 30.0, "botorch-onehot": 20.0, "random": 40.0})
    table = dataset_table(report)
    assert "| vs best of botorch, botorch-onehot, top-1 % |" in table[0]
    rows = {line.split(" | ")[0].lstrip("| "): line for line in table[2:6]}
    assert "| 0.60× |" in rows["bo"] and "| 1.50× |" in rows["botorch"] and "| reference |" in rows["botorch-onehot"]
    assert "| 30 (30–30) |" in rows["botorch"]  # each arm keeps its own numbers
    goal = goal_table({"amide_coupling": report}, DATASETS)
    assert "bo / best BoTorch arm" in goal[0]
    assert "| 12 |  |  | 30 | 20 |  | 40 |" in goal[2] and "| 0.60 (botorch-onehot) | ≤ 0.75 | yes |" in goal[2]
    alone = _report({"bo": 12.0, "botorch": 30.0})
    assert "| vs botorch, top-1 % |" in dataset_table(alone)[0]
    assert "| 0.40 (botorch) | ≤ 0.75 | yes |" in goal_table({"amide_coupling": alone}, DATASETS)[2]
