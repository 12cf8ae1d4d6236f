"""``closedloop suggest``, ``closedloop results add`` and ``closedloop results export`` on a manual-lab campaign, with
``closedloop run`` returning ``waiting for results`` in between; a bad CSV is one line naming its row and column, and
nothing is written."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from orchestrator.interfaces.cli import app
from orchestrator.ledger import Ledger

runner = CliRunner()

SPEC = """
[campaign]
name = "bench"
kind = "molecule"
seed = 2

[objective]
property = "yield"
unit = "%"
direction = "maximize"

[space]
inline = ["C", "CC", "CCC", "CCCC", "CCCCC", "CCO", "CCN", "CCCl"]

[lab]
driver = "manual"
parameters = { max_parallel_jobs = 2 }

[budget]
lab_experiments = 4

[planner]
main = "random"
control = "bo"
control_share = 0
batch_size = 2
"""


def invoke(*args, stdin: str | None = None):
    return runner.invoke(app, [str(a) for a in args], input=stdin, catch_exceptions=False)


@pytest.fixture
def waiting(tmp_path):
    """A manual campaign that has dispatched its first batch and waits for results."""
    spec = tmp_path / "bench.toml"
    spec.write_text(SPEC, encoding="utf-8")
    db = tmp_path / "bench.db"
    result = invoke("run", spec, "--db", db, "--campaign-id", "bench", "--json")
    assert result.exit_code == 4, result.output  # waiting for results
    assert json.loads(result.stdout)["status"] == "waiting_for_results"
    return db


def suggested(db) -> pd.DataFrame:
    result = invoke("suggest", "--db", db)
    assert result.exit_code == 0, result.output
    return pd.read_csv(io.StringIO(result.stdout))


def head(db) -> int:
    ledger = Ledger.open(db)
    try:
        return ledger.head_seq("bench")
    finally:
        ledger.close()


def test_suggest_add_resume_export_round_trip(waiting, tmp_path):
    jobs = suggested(waiting)
    assert list(jobs.columns) == ["job", "smiles", "predicted", "sd", "yield"] and len(jobs) == 2
    assert jobs["yield"].isna().all()  # the column to fill in at the bench
    jobs["yield"] = [61.5, 48.0]
    path = tmp_path / "results.csv"
    jobs.to_csv(path, index=False)
    result = invoke("results", "add", "--db", waiting, path, "--by", "ada")  # CAMPAIGN_ID left out: the only one
    assert result.exit_code == 0, result.output
    assert result.stdout.count("recorded") == 3 and "2 recorded" in result.stdout
    table = invoke("suggest", "bench", "--db", waiting, "--format", "table")
    assert table.exit_code == 0 and "0 job(s) at the bench" in table.stdout
    resumed = invoke("run", "--resume", "bench", "--db", waiting, "--json")
    assert resumed.exit_code == 4 and json.loads(resumed.stdout)["n_lab"] == 2
    second = suggested(waiting)
    assert len(second) == 2 and not set(second["job"]) & set(jobs["job"])
    second["yield"] = [1.0, 2.0]
    result = invoke("results", "add", "bench", "-", "--db", waiting, stdin=second.to_csv(index=False))
    assert result.exit_code == 0, result.output
    done = invoke("run", "--resume", "bench", "--db", waiting, "--json")
    assert done.exit_code == 0 and json.loads(done.stdout)["status"] == "stopped"
    exported = invoke("results", "export", "--db", waiting)
    frame = pd.read_csv(io.StringIO(exported.stdout))
    assert sorted(frame["yield"]) == [1.0, 2.0, 48.0, 61.5] and set(frame["provenance"]) == {"entered"}
    out = tmp_path / "all.csv"
    assert invoke("results", "export", "bench", "--db", waiting, "--out", out).exit_code == 0
    assert pd.read_csv(out).equals(frame)
    again = invoke("results", "add", "--db", waiting, out)  # entering the export again: duplicates only
    assert again.exit_code == 0 and "4 duplicate" in again.stdout


def test_a_conflicting_result_is_refused_and_the_command_says_so(waiting, tmp_path):
    jobs = suggested(waiting)
    path = tmp_path / "one.csv"
    pd.DataFrame({"job": [jobs["job"][0]], "yield": [10.0]}).to_csv(path, index=False)
    assert invoke("results", "add", "--db", waiting, path).exit_code == 0
    pd.DataFrame({"job": [jobs["job"][0]], "yield": [11.0]}).to_csv(path, index=False)
    result = invoke("results", "add", "--db", waiting, path)
    assert result.exit_code == 1 and "refused" in result.stdout and "already has the result 10.0" in result.stdout


@pytest.mark.parametrize(("csv", "message"), [
    ("job,yield\nbench/NOPE,3\n", "line 2, column job: no job 'bench/NOPE'"),
    ("job,amount\n{job},3\n", "no 'yield' column"),
    ("job,yield\n{job},5\n{job2},abc\n", "line 3, column yield: 'abc' is not a number"),
])
def test_a_bad_csv_is_one_line_naming_row_and_column_and_writes_nothing(waiting, tmp_path, csv, message):
    jobs = suggested(waiting)
    path = tmp_path / "bad.csv"
    path.write_text(csv.format(job=jobs["job"][0], job2=jobs["job"][1]), encoding="utf-8")
    before = head(waiting)
    result = invoke("results", "add", "--db", waiting, path)
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and lines[0].startswith("error:")
    assert head(waiting) == before


def test_a_missing_campaign_id_needs_the_only_campaign(waiting, tmp_path):
    spec = tmp_path / "bench.toml"
    assert invoke("run", spec, "--db", waiting, "--campaign-id", "other", "--json").exit_code == 4
    result = invoke("suggest", "--db", waiting)
    assert result.exit_code == 2 and "holds 2 campaigns (bench, other); name one" in result.output
    assert invoke("suggest", "other", "--db", waiting).exit_code == 0
    missing = invoke("results", "add", "other", tmp_path / "nothing.csv", "--db", waiting)
    assert missing.exit_code == 2 and "does not exist" in missing.output
