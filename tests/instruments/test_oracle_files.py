"""A lab table saved as editors save it (issue 46): a UTF-8 byte-order mark and CRLF line ends are no error."""

from __future__ import annotations

from types import SimpleNamespace

from instruments.oracle import TableOracle


def test_a_lab_table_saved_with_a_byte_order_mark_and_crlf_reads_as_the_plain_file(tmp_path):
    path = tmp_path / "truth.csv"
    path.write_bytes(b"\xef\xbb\xbfid,yield\r\nA,1.5\r\nB,\r\n")
    oracle = TableOracle.from_csv(path, value_column="yield")
    assert "A" in oracle and "B" in oracle and len(oracle) == 2
    assert oracle(SimpleNamespace(id="A")) == 1.5
