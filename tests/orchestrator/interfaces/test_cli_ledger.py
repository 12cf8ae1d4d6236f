"""``closedloop replay ID`` is an alias of ``closedloop ledger verify ID``; only a what-if option changes its meaning.

Each case runs both commands on the same ledger and requires the same verdict, exit status and JSON record: an
intact campaign, a projection edited behind the ledger's back, an event payload edited in place (a broken hash
chain), and a head kept outside the ledger that the chain does or does not reach.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.interfaces.cli import app
from tests.orchestrator.ledger.sandbox import write_tiny_spec

CID = "c"
runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("alias")
    db = folder / "l.db"
    result = invoke("run", write_tiny_spec(folder), "--db", db, "--campaign-id", CID, "--json")
    assert result.exit_code == 0, result.output
    return db


@pytest.fixture
def copy_db(finished, tmp_path) -> Path:
    target = tmp_path / "copy.db"
    source, copy = sqlite3.connect(finished), sqlite3.connect(target)
    source.backup(copy)
    source.close()
    copy.close()
    for anchor in finished.parent.glob(f"{finished.name}.checkpoints.sqlite*"):
        shutil.copy(anchor, tmp_path / anchor.name.replace(finished.name, target.name))
    return target


def both(db: Path, *extra: str) -> tuple[tuple[int, dict], tuple[int, dict]]:
    """(exit code, JSON record) of ``ledger verify ID`` and of ``replay ID``, with the same options."""
    verified = invoke("ledger", "verify", CID, "--db", db, "--json", *extra)
    replayed = invoke("replay", CID, "--db", db, "--json", *extra)
    [record] = json.loads(verified.stdout)
    return (verified.exit_code, record), (replayed.exit_code, json.loads(replayed.stdout))


def test_an_intact_campaign_replays_as_it_verifies(finished):
    verified, replayed = both(finished)
    assert verified == replayed
    code, record = replayed
    assert code == 0 and record["identical"] is True and record["differences"] == []
    assert record["campaign_id"] == CID and len(record["head_hash"]) == 64 and record["chain_break"] is None
    text = invoke("replay", CID, "--db", finished)
    assert text.exit_code == 0 and f"replayed {record['n_events']} events" in text.output and "identical" in text.output


def test_an_edited_projection_fails_both_with_the_same_differences(copy_db):
    with sqlite3.connect(copy_db) as conn:
        conn.execute("UPDATE lab_job SET value = value + 1")
    verified, replayed = both(copy_db)
    assert verified == replayed
    code, record = replayed
    assert code == 1 and record["identical"] is False and record["chain_break"] is None
    assert {d["table"] for d in record["differences"]} == {"lab_job"}


def test_an_edited_event_breaks_the_chain_for_both(copy_db):
    with sqlite3.connect(copy_db) as conn:
        conn.execute("DROP TRIGGER event_no_update")
        conn.execute("UPDATE event SET actor = 'someone-else' WHERE campaign_id = ? AND seq = 3", (CID,))
    verified, replayed = both(copy_db)
    assert verified == replayed
    code, record = replayed
    assert code == 1 and record["chain_break"] and "seq 3" in record["chain_break"]
    text = invoke("replay", CID, "--db", copy_db)
    assert text.exit_code == 1 and "hash chain broken" in text.output and "seq 3" in text.output


def test_expect_head_means_the_same_to_both(finished):
    (_, record), _ = both(finished)
    head = record["head_hash"]
    verified, replayed = both(finished, "--expect-head", head.upper())
    assert verified == replayed and replayed[0] == 0
    unknown = "0" * 64
    verified, replayed = both(finished, "--expect-head", unknown)
    assert verified == replayed
    code, record = replayed
    assert code == 1 and record["head_problems"] and unknown in record["head_problems"][0]
    shown = invoke("replay", CID, "--db", finished, "--expect-head", unknown)
    assert shown.exit_code == 1 and unknown in shown.output
    assert invoke("replay", CID, "--db", finished, "--expect-head", "abc").exit_code == 2


def test_what_if_options_are_not_mixed_with_the_exact_replay(finished, tmp_path):
    """A what-if re-runs decisions in its own ledger, so it checks no kept head; the exact replay builds no what-if
    ledger, so --out-db and --recorded-lab would be silently ignored there: both mixes are refused, nothing runs."""
    result = invoke("replay", CID, "--db", finished, "--out-db", tmp_path / "w.db")
    assert result.exit_code == 2 and "--out-db shapes only a what-if replay" in result.output
    assert not (tmp_path / "w.db").exists()
    result = invoke("replay", CID, "--db", finished, "--recorded-lab")
    assert result.exit_code == 2 and "--recorded-lab" in result.output
    result = invoke("replay", CID, "--db", finished, "--planner", "bo", "--expect-head", "0" * 64)
    assert result.exit_code == 2 and "--expect-head" in result.output


def test_both_commands_say_they_are_one_check():
    assert "alias of `closedloop ledger verify ID`" in " ".join(invoke("replay", "--help").output.split())
    assert "`closedloop replay ID` is the same check" in " ".join(invoke("ledger", "verify", "--help").output.split())
