"""Ground-truth oracles: table lookups and wrapped functions."""

from __future__ import annotations

import math

import pytest

from instruments import FunctionOracle, Oracle, TableOracle
from vocabulary.domain import Conditions, InstrumentFault, Molecule, SetupError

ETHANOL = Molecule(smiles="CCO", id="LFQSCWFLJHTTHZ-UHFFFAOYSA-N")


def cond(cid: str, **values) -> Conditions:
    return Conditions(values=values, id=cid)


def test_table_oracle_looks_up_candidate_id():
    oracle = TableOracle({ETHANOL.id: -5.2, "c1": 0.5}, property="solubility")
    assert oracle(ETHANOL) == -5.2
    assert oracle(cond("c1")) == 0.5
    assert oracle.property == "solubility"
    assert isinstance(oracle, Oracle)
    assert len(oracle) == 2 and "c1" in oracle and "c2" not in oracle


def test_table_oracle_missing_id_names_it():
    oracle = TableOracle({"c1": 0.5})
    with pytest.raises(InstrumentFault, match=r"lab table for 'value' has no row for candidate id 'c2'"):
        oracle(cond("c2"))


def test_table_oracle_nan_row_is_a_fault():
    oracle = TableOracle({"c1": math.nan})
    with pytest.raises(InstrumentFault, match="no 'value' value"):
        oracle(cond("c1"))


def test_table_oracle_is_a_copy_and_read_only():
    source = {"c1": 1.0}
    oracle = TableOracle(source)
    source["c1"] = 2.0
    assert oracle(cond("c1")) == 1.0
    with pytest.raises(TypeError):
        oracle.values["c1"] = 3.0


def test_table_oracle_rejects_non_numbers():
    with pytest.raises(SetupError, match="numbers"):
        TableOracle({"c1": "high"})


def test_table_oracle_from_csv(tmp_path):
    path = tmp_path / "lab.csv"
    path.write_text("id,yield,notes\nc1,0.75,ok\nc2,,not run\n")
    oracle = TableOracle.from_csv(path, value_column="yield")
    assert oracle.property == "yield"
    assert oracle(cond("c1")) == 0.75
    with pytest.raises(InstrumentFault, match="NaN"):
        oracle(cond("c2"))
    with pytest.raises(SetupError, match=r"no column\(s\) \['ee'\]"):
        TableOracle.from_csv(path, value_column="ee")


def test_function_oracle_wraps_and_converts():
    oracle = FunctionOracle(lambda c: int(c.values["T"]) * 2, property="score")
    value = oracle(cond("c", T=21))
    assert value == 42.0 and isinstance(value, float)
    assert oracle.property == "score"


def test_function_oracle_non_number_is_a_fault():
    oracle = FunctionOracle(lambda c: "lots")
    with pytest.raises(InstrumentFault, match="returned 'lots' for candidate 'c'"):
        oracle(cond("c"))


def test_function_oracle_needs_a_callable():
    with pytest.raises(SetupError, match="callable"):
        FunctionOracle(3.0)
