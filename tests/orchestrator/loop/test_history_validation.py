"""`--history` is checked in full before a campaign exists (issue 18): a refused file leaves the ledger untouched."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from typer.testing import CliRunner

from orchestrator.interfaces.cli import app
from orchestrator.loop.importing import HistoryImportError, read_history
from orchestrator.space.pool import load_pool
from tests.conftest import BUCHWALD_SPEC, small_spec

HTE = BUCHWALD_SPEC.parent / "data" / "experiment_index.csv"


def _campaigns(db) -> list[str]:
    result = CliRunner().invoke(app, ["ls", "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    return [row["campaign_id"] for row in json.loads(result.stdout)]


@pytest.fixture(scope="module")
def ledger_with_one_campaign(tmp_path_factory):
    db = tmp_path_factory.mktemp("history") / "ledger.db"
    result = CliRunner().invoke(app, ["run", str(BUCHWALD_SPEC), "--db", str(db), "--lab-budget", "2", "--planner",
                                      "random", "--control-share", "0", "--campaign-id", "first", "--json"])
    assert result.exit_code == 0, result.output
    return db


def _refused_run(db, history):
    result = CliRunner().invoke(app, ["run", str(BUCHWALD_SPEC), "--db", str(db), "--lab-budget", "2", "--planner",
                                      "random", "--control-share", "0", "--history", str(history), "--json"])
    assert result.exit_code == 2 and result.stderr.startswith("error: "), result.output
    assert "Traceback" not in result.output and len(result.stderr.strip().splitlines()) == 1
    return result


@pytest.mark.parametrize("text,fragment", [("", "is empty (no header, no rows)"),
                                           ("header", "has a header but no rows")])
def test_an_empty_history_file_is_refused_and_no_campaign_is_created(ledger_with_one_campaign, tmp_path, text,
                                                                      fragment):
    path = tmp_path / "past.csv"
    path.write_text(",".join([*pd.read_csv(HTE, nrows=0).columns]) + "\n" if text else "")
    spec = small_spec(BUCHWALD_SPEC)
    with pytest.raises(HistoryImportError, match=re.escape(fragment)):
        read_history(spec, load_pool(spec).copy(), path)
    result = _refused_run(ledger_with_one_campaign, path)
    assert "past.csv" in result.stderr and fragment in result.stderr
    assert _campaigns(ledger_with_one_campaign) == ["first"]


def test_a_repeated_row_is_refused_before_the_campaign_is_created(ledger_with_one_campaign, tmp_path):
    path = tmp_path / "past.csv"
    frame = pd.read_csv(HTE).iloc[:6]
    pd.concat([frame, frame.iloc[[2]]]).to_csv(path, index=False)  # line 8 repeats line 4
    result = _refused_run(ledger_with_one_campaign, path)
    assert "past.csv line 8: " in result.stderr and "repeats line 4" in result.stderr
    assert _campaigns(ledger_with_one_campaign) == ["first"], "no orphan campaign marked running"


def test_every_bad_row_is_named_with_its_value(tmp_path):
    path = tmp_path / "past.csv"
    frame = pd.read_csv(HTE).iloc[:8].copy()
    frame["yield"] = frame["yield"].astype(object)
    frame.loc[1, "yield"] = "lots"
    frame.loc[3, "yield"] = float("inf")
    frame.to_csv(path, index=False)
    spec = small_spec(BUCHWALD_SPEC)
    with pytest.raises(HistoryImportError) as err:
        read_history(spec, load_pool(spec).copy(), path)
    message = str(err.value)
    assert message.startswith("past.csv: 2 bad rows: line 3: yield='lots' is not a number; ")
    assert "line 5: yield=inf is not finite" in message and "Nothing was imported" in message


def test_a_missing_value_marker_is_named_as_written_not_called_empty(tmp_path):
    path = tmp_path / "past.csv"
    frame = pd.read_csv(HTE).iloc[:8].copy()
    frame["yield"] = frame["yield"].astype(object)
    frame.loc[1, "yield"], frame.loc[3, "yield"], frame.loc[5, "yield"] = "NaN", "", "NA"
    frame.to_csv(path, index=False)
    spec = small_spec(BUCHWALD_SPEC)
    with pytest.raises(HistoryImportError) as err:
        read_history(spec, load_pool(spec).copy(), path)
    assert str(err.value).startswith("past.csv: 3 bad rows: line 3: yield is 'NaN' (not a number); line 5: yield is "
                                     "empty; line 7: yield is 'NA' (not a number). ")


@pytest.mark.parametrize("prefix,newline", [(b"\xef\xbb\xbf", b"\r\n"), (b"", b"\r\n"), (b"\xef\xbb\xbf", b"\n")])
def test_a_history_saved_with_a_byte_order_mark_or_crlf_imports_as_the_plain_file(tmp_path, prefix, newline):
    plain, saved = tmp_path / "plain.csv", tmp_path / "saved.csv"
    pd.read_csv(HTE).iloc[:6].to_csv(plain, index=False)
    saved.write_bytes(prefix + plain.read_bytes().replace(b"\n", newline))
    spec = small_spec(BUCHWALD_SPEC)
    rows = read_history(spec, load_pool(spec).copy(), saved)
    assert [(line, c.id, v) for line, c, v in rows] == \
           [(line, c.id, v) for line, c, v in read_history(spec, load_pool(spec).copy(), plain)]
    assert [line for line, _, _ in rows] == [2, 3, 4, 5, 6, 7]


def test_a_history_saved_as_utf16_or_with_an_oversized_cell_is_refused_in_one_line(ledger_with_one_campaign,
                                                                                     tmp_path):
    path = tmp_path / "past.csv"
    frame = pd.read_csv(HTE).iloc[:4]
    path.write_bytes(frame.to_csv(index=False).encode("utf-16"))
    result = _refused_run(ledger_with_one_campaign, path)
    assert result.stderr.strip() == (f"error: history file {path} is UTF-16 text (it starts with a UTF-16 byte-order "
                                     "mark); save it as UTF-8")
    frame = frame.astype(object)
    frame.loc[2, "yield"] = "9" * (4 * 2**20)
    frame.to_csv(path, index=False)
    result = _refused_run(ledger_with_one_campaign, path)
    assert result.stderr.startswith(f"error: history file {path} line 4 has a cell longer than 65,536 characters "
                                    "(64 KiB)")
    assert _campaigns(ledger_with_one_campaign) == ["first"]
