"""The size limits of a CSV cell and row (issue 46): a pool, a streamed pool or a ``bench --pool`` whose cell or row
is over its limit is refused with one line naming the file, the row's line and the limit, having read no more than
the limit of it. Memory is compared with the file's size as a ratio (tracemalloc's peak), never timed."""

from __future__ import annotations

import re
import tracemalloc

import numpy as np
import pytest

from orchestrator.space.csv_limits import MAX_CELL_CHARS, MAX_ROW_CHARS
from orchestrator.space.pool import load_pool
from orchestrator.space.stream import condition_space_from_csv, count_rows, stream_top_k
from orchestrator.spec import validate_spec
from vocabulary.domain import SetupError

BIG = 16 * 2**20
"""Several MB: well over every limit, small enough for a test (a 2 GB cell is the same class of input)."""
CELL = "65,536 characters (64 KiB), the most a cell may hold"
ROW = "1,048,576 characters (1 MiB), the most a row may hold"
HEAD = "smiles,y,notes\nCCO,1,a\nCCC,2,b\n"


def molecule_spec(tmp_path, **space):
    return validate_spec({
        "campaign": {"name": "v", "kind": "molecule"}, "objective": {"direction": "maximize"},
        "space": {"pool": "pool.csv", "column": "smiles", **space}, "lab": {"oracle_column": "y"},
        "budget": {"lab_experiments": 2}, "planner": {"main": "random", "control": None, "control_share": 0},
        "base_dir": str(tmp_path)})


def conditions_spec(tmp_path, **space):
    return validate_spec({
        "campaign": {"name": "v", "kind": "conditions"}, "objective": {"direction": "maximize"},
        "space": {"pool": "pool.csv", "columns": ["temperature_c", "solvent"], **space},
        "lab": {"oracle_column": "y"}, "budget": {"lab_experiments": 2},
        "planner": {"main": "random", "control": None, "control_share": 0}, "base_dir": str(tmp_path)})


def peak_ratio(call) -> tuple[float, BaseException | None]:
    """tracemalloc's peak while ``call`` runs, as a share of ``BIG`` (the size of the pool file's oversized cell or
    row), and what it raised."""
    raised = None
    tracemalloc.start()
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - the caller asserts what it is
        raised = exc
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak / BIG, raised


HUGE_CELLS = {
    "a plain cell": "CCCO,3," + "x" * BIG + "\n",
    "a quoted cell across many short lines": 'CCCO,3,"' + ("x" * 999 + "\n") * (BIG // 1000) + '"\n',
    "the SMILES cell": "C" * BIG + ",3,c\n",
}


@pytest.mark.parametrize("name", list(HUGE_CELLS))
def test_an_oversized_cell_is_refused_naming_the_file_the_row_and_the_limit_in_small_memory(tmp_path, name):
    (tmp_path / "pool.csv").write_text("smiles,y,notes\nCCO,1,a\n")
    load_pool(molecule_spec(tmp_path))  # the readers' imports are paid before memory is traced
    (tmp_path / "pool.csv").write_text(HEAD + HUGE_CELLS[name] + "CCCCO,4,d\n")
    ratio, raised = peak_ratio(lambda: load_pool(molecule_spec(tmp_path)))
    assert isinstance(raised, SetupError), raised
    message = str(raised)
    assert message.startswith(f"design-space pool {tmp_path / 'pool.csv'} line 4 has a cell longer than {CELL}")
    assert message.endswith("fix or remove the row") and "\n" not in message
    assert ratio < 0.25, f"peak memory {ratio:.2f} × the file: the row was read whole"


def test_an_oversized_row_of_small_cells_is_refused_naming_its_line(tmp_path):
    (tmp_path / "pool.csv").write_text(HEAD + "CCCO,3," + ",".join(["x" * 20] * (BIG // 21)) + "\n")
    ratio, raised = peak_ratio(lambda: load_pool(molecule_spec(tmp_path)))
    assert isinstance(raised, SetupError) and f"pool.csv line 4 is longer than {ROW}" in str(raised), raised
    assert ratio < 0.25


def test_cells_and_rows_up_to_the_limits_are_read(tmp_path):
    notes = "n" * MAX_CELL_CHARS
    n_wide = (MAX_ROW_CHARS - MAX_CELL_CHARS - 100) // 1001  # the row just under 1 MiB, in cells of 1000
    header = ",".join(["smiles", "y", "notes", *(f"w{k}" for k in range(n_wide))])
    wide = ",".join(["w" * 1000] * n_wide)
    (tmp_path / "pool.csv").write_text(f"{header}\nCCO,1,{notes},{wide}\n\"CCC\",2,\"{notes}\",{wide}\n")
    pool = load_pool(molecule_spec(tmp_path))
    assert len(pool) == 2 and pool.columns["y"].tolist() == [1.0, 2.0]
    (tmp_path / "pool.csv").write_text(f"smiles,y,notes\r\nCCO,1,{notes}n\r\nCCC,2,x\r\n")  # one character over
    with pytest.raises(SetupError, match=re.escape(f"pool.csv line 2 has a cell longer than {CELL}")):
        load_pool(molecule_spec(tmp_path))


def test_a_streamed_molecule_pool_refuses_an_oversized_cell(tmp_path):
    path = tmp_path / "pool.csv"
    path.write_text(HEAD + HUGE_CELLS["a plain cell"])
    for call in (lambda: count_rows(path),
                 lambda: stream_top_k(path, "molecule", lambda X: X.sum(axis=1), 2, column="smiles")):
        ratio, raised = peak_ratio(call)
        assert isinstance(raised, SetupError) and str(raised).startswith(f"pool pool.csv line 4 has a cell longer "
                                                                         f"than {CELL}"), raised
        assert ratio < 0.25


def test_a_compact_conditions_pool_refuses_an_oversized_cell_in_small_memory(tmp_path):
    path = tmp_path / "pool.csv"
    path.write_text("temperature_c,solvent,y\n20,water,1\n40,dmso,2\n")
    assert len(load_pool(conditions_spec(tmp_path, stream=True))) == 2
    path.write_text("temperature_c,solvent,y\n20,water,1\n40," + "d" * BIG + ",2\n60,thf,3\n")
    ratio, raised = peak_ratio(lambda: load_pool(conditions_spec(tmp_path, stream=True)))
    assert isinstance(raised, SetupError) and str(raised).startswith(
        f"design-space pool {path} line 3 has a cell longer than {CELL}"), raised
    assert ratio < 0.25
    with pytest.raises(SetupError, match=re.escape(f"pool pool.csv line 3 has a cell longer than {CELL}")):
        condition_space_from_csv(path, ["temperature_c", "solvent"])


@pytest.mark.parametrize("encoding,name", [("utf-16", "UTF-16"), ("utf-32", "UTF-32")])
def test_a_pool_saved_as_utf16_is_refused_with_save_it_as_utf8(tmp_path, encoding, name):
    (tmp_path / "pool.csv").write_bytes("smiles,y\nCCO,1\nCCC,2\n".encode(encoding))
    for spec, source in ((molecule_spec(tmp_path), f"design-space pool {tmp_path / 'pool.csv'}"),):
        with pytest.raises(SetupError) as err:
            load_pool(spec)
        assert str(err.value) == f"{source} is {name} text (it starts with a {name} byte-order mark); save it as UTF-8"
    with pytest.raises(SetupError, match=f"pool pool.csv is {name} text"):
        count_rows(tmp_path / "pool.csv")


def test_a_pool_saved_with_a_byte_order_mark_and_crlf_reads_as_the_plain_file(tmp_path):
    text = "smiles,y,notes\n" + "".join(f"{'C' * n}O,{n},\"a, b\nc\"\n" for n in range(1, 6))
    (tmp_path / "pool.csv").write_bytes(text.encode("utf-8"))
    plain = load_pool(molecule_spec(tmp_path))
    (tmp_path / "pool.csv").write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode("utf-8"))
    saved = load_pool(molecule_spec(tmp_path))
    assert saved.ids == plain.ids and np.array_equal(saved.columns["y"], plain.columns["y"])
