"""What ``bench --pool`` refuses before it reads the pool into pandas or builds a campaign (issue 46): a cell over its
size limit, and a rung that reads the objective's own column (a perfect rung by a typo)."""

from __future__ import annotations

import pytest

from orchestrator.bench.config import BenchConfig, BenchError, parse_rung
from orchestrator.bench.problem import pool_spec
from tests.orchestrator.space.test_csv_limits import BIG, CELL, peak_ratio


def test_bench_pool_refuses_an_oversized_cell_naming_the_flag_the_file_and_the_line(tmp_path):
    path = tmp_path / "pool.csv"
    path.write_text("a,y\n1,1\n2," + "9" * BIG + "\n3,3\n")
    config = BenchConfig(pool=str(path), id_cols=("a",), objective="maximize:y", lab_budget=2, seeds=1,
                         arms=("random",), batch=1)
    ratio, raised = peak_ratio(lambda: pool_spec(config, tmp_path / "work"))
    assert isinstance(raised, BenchError), raised
    assert str(raised) == f"--pool: {path} line 3 has a cell longer than {CELL} (a SMILES, formula or value is far " \
                          "shorter); fix or remove the row"
    assert ratio < 0.25, "the row was read whole"


def test_a_rung_on_the_objectives_column_is_refused_naming_the_rung(tmp_path):
    path = tmp_path / "pool.csv"
    path.write_text("a,y,calc\n" + "".join(f"{k},{k * k},{k}\n" for k in range(6)))
    config = BenchConfig(pool=str(path), id_cols=("a",), objective="maximize:y", lab_budget=2, seeds=1,
                         arms=("random",), batch=1, rungs=(parse_rung("cheap=y"),))
    with pytest.raises(BenchError, match=r"^--rung: rung\(s\) \['cheap'\] read 'y', the objective's column"):
        pool_spec(config, tmp_path / "work")
    config = config.model_copy(update={"rungs": (parse_rung("cheap=calc"),)})
    assert [r.column for r in pool_spec(config, tmp_path / "work")[0].ladder] == ["calc"]
