"""``header_text``: an error names the columns of a CSV's header, and quotes nothing of a file that is not a CSV; the
readers that name columns (a pool, a ``--history`` file, a lab's oracle file) follow it."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from instruments.oracle import TableOracle
from orchestrator.interfaces.cli import app
from tests.conftest import FREESOLV_SPEC
from vocabulary.domain import SetupError
from vocabulary.header_text import columns_text, is_shown_header, shown_names

SECRET = "API_KEY=sk-live-SECRET123"


@pytest.mark.parametrize(("path", "names"), [
    ("pool.csv", ["smiles", "expt"]), ("pool.CSV", ["SMILES"]), ("pool.tsv.gz", ["a"]), ("data.dat", ["smiles", "y"]),
    ("history", ["Yield (%)", "temperature °C", "Unnamed: 2"]),
])
def test_a_csv_header_is_shown(path, names):
    assert is_shown_header(path, names) and columns_text(path, names) == f"its columns are {names}"
    assert shown_names(path, names) == names


@pytest.mark.parametrize(("path", "names"), [
    ("credentials", [SECRET]), ("shadow", ["root:$6$salt$hash:19000:0:99999:7:::"]), ("id_rsa", ["-----BEGIN KEY-----"]),
    ("secrets.env", ["API_KEY=1", "TOKEN=2"]), ("config.json", ['{"token": "x"', ' "a": "b"}']),
    ("pool.csv", ["x\x1b[2J"]), ("pool.csv", ["x" * 201]), ("pool.csv", [f"c{i}" for i in range(1000)]), ("pool.csv", []),
])
def test_anything_else_is_not_quoted(path, names):
    assert not is_shown_header(path, names) and shown_names(path, names) == []
    text = columns_text(path, names)
    assert text.startswith("its first line is not shown") and not any(name and name in text for name in names)


def test_a_history_file_that_is_not_a_csv_is_refused_without_quoting_it(tmp_path):
    secret = tmp_path / "credentials"
    secret.write_text(f"{SECRET}\nsecond line\n")
    result = CliRunner().invoke(app, ["run", str(FREESOLV_SPEC), "--db", str(tmp_path / "x.db"), "--history",
                                      str(secret)], catch_exceptions=False)
    assert result.exit_code == 2 and "history file credentials" in result.output
    assert "SECRET123" not in result.output and "second line" not in result.output, result.output
    assert not (tmp_path / "x.db").exists()


def test_an_oracle_file_that_is_not_a_csv_is_refused_without_quoting_it(tmp_path):
    secret = tmp_path / "token"
    secret.write_text(f"{SECRET}\nsecond line\n")
    with pytest.raises(SetupError) as raised:
        TableOracle.from_csv(secret, id_column="smiles", value_column="expt")
    assert "SECRET123" not in str(raised.value) and "token" in str(raised.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode: the unreadable case needs a user")
def test_an_unreadable_pool_is_one_line_without_its_content(tmp_path):
    pool = tmp_path / "pool.csv"
    pool.write_text("smiles,expt\nCCO,1\n")
    pool.chmod(0)
    text = FREESOLV_SPEC.read_text().replace('pool = "data/FreeSolv_gauche.csv"', f'pool = "{pool}"')
    spec = tmp_path / "unreadable.toml"
    spec.write_text(text.replace('"data/', f'"{FREESOLV_SPEC.parent}/data/'))
    result = CliRunner().invoke(app, ["run", str(spec), "--db", str(tmp_path / "x.db")], catch_exceptions=False)
    assert result.exit_code == 2 and "cannot be read (Permission denied)" in result.output
    assert "CCO" not in result.output
