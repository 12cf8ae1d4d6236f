"""The tamper-evident ledger: every event chained to the one before it, checked by verify and by import, given to
pre-chain ledgers by a migration, and pre-chain exports accepted only as unverified."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from orchestrator.interfaces.cli import app
from orchestrator.ledger import GENESIS, Ledger, event_hash, verify
from orchestrator.ledger.chain import ChainWalk, canonical_time, stored_time_text
from orchestrator.ledger.jsonl import LedgerImportError, import_jsonl
from tests.orchestrator.ledger.writers import finished_campaign

CID = "bh-chain"
runner = CliRunner()


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A small finished campaign: (ledger path, export path)."""
    root = tmp_path_factory.mktemp("chain")
    return finished_campaign(root, CID)[:2]


@pytest.fixture
def copy_db(finished, tmp_path):
    path = tmp_path / "copy.db"
    shutil.copy(finished[0], path)
    return path


def _lines(path) -> list[str]:
    return path.read_text().splitlines()


def _write(path, lines):
    path.write_text("\n".join(lines) + "\n")
    return path


def _observed_line(lines: list[str]) -> int:
    """Index of the first lab result with a measured value."""
    return next(i for i, line in enumerate(lines) if (d := json.loads(line)).get("type") == "Observed"
                and d["payload"]["value"] is not None)


def _tamper_db(path, sql: str, *args) -> None:
    """What a person with write access to the file could do: lift the append-only trigger and edit."""
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TRIGGER event_no_update")
        conn.execute("DROP TRIGGER event_no_delete")
        conn.execute(sql, args)


# ----------------------------------------------------------------------------------------------------- writing
def test_every_event_is_chained_to_the_one_before_it(finished):
    ledger = Ledger.open(finished[0])
    try:
        rows = list(ledger.chain_rows(CID))
        previous = GENESIS
        for row in rows:
            assert row.hash == event_hash(previous, CID, row.seq, row.type, row.schema_version, row.payload,
                                          row.idempotency_key, row.actor, row.at)
            previous = row.hash
        report = verify(ledger, CID)
        assert report.is_identical and report.chain_break is None
        assert report.head_hash == rows[-1].hash == ledger.head_hash(CID) and report.notes == []
    finally:
        ledger.close()


# -------------------------------------------------------------------------------------- tampering in the database
_FIELD_EDITS = {
    "payload": "UPDATE event SET payload = replace(payload, '\"value\":', '\"value\":1') WHERE seq = ?",
    "type": "UPDATE event SET type = 'Proposed' WHERE seq = ?",
    "schema_version": "UPDATE event SET schema_version = schema_version + 1 WHERE seq = ?",
    "idempotency_key": "UPDATE event SET idempotency_key = idempotency_key || 'x' WHERE seq = ?",
    "actor": "UPDATE event SET actor = 'someone-else' WHERE seq = ?",
    "at": "UPDATE event SET at = '2020-01-01 00:00:00.000000' WHERE seq = ?",
    "hash": "UPDATE event SET hash = '" + "f" * 64 + "' WHERE seq = ?",
    "deleted": "DELETE FROM event WHERE seq = ?",
}


@pytest.mark.parametrize("field", sorted(_FIELD_EDITS))
def test_verify_names_the_first_event_altered_in_the_database(copy_db, field):
    ledger = Ledger.open(copy_db)
    observed = next(e.seq for e in ledger.events(CID, types=["Observed"]) if e.payload["value"] is not None)
    ledger.close()
    _tamper_db(copy_db, _FIELD_EDITS[field], observed)
    ledger = Ledger.open(copy_db)
    try:
        report = verify(ledger, CID)
        assert not report.is_identical
        broken_at = observed + 1 if field == "deleted" else observed  # a removal shows at the event after the gap
        assert report.chain_break is not None and report.chain_break.startswith(f"event seq {broken_at} ")
    finally:
        ledger.close()
    result = runner.invoke(app, ["ledger", "verify", CID, "--db", str(copy_db)])
    assert result.exit_code == 1 and "hash chain broken" in result.output


# --------------------------------------------------------------------------------------- tampering in an export
_LINE_EDITS = {
    "measured value": lambda d: d["payload"].update(value=d["payload"]["value"] + 1.0),
    "candidate": lambda d: d["payload"].update(candidate_id=d["payload"]["candidate_id"] + "-x"),
    "actor": lambda d: d.update(actor="someone-else"),
    "at": lambda d: d.update(at="2020-01-01T00:00:00+00:00"),
    "idempotency_key": lambda d: d.update(idempotency_key=d["idempotency_key"] + "x"),
    "hash": lambda d: d.update(hash="f" * 64),
}


@pytest.mark.parametrize("field", sorted(_LINE_EDITS))
def test_import_refuses_an_export_altered_in_any_field_naming_the_line(finished, tmp_path, field):
    lines = _lines(finished[1])
    index = _observed_line(lines)
    data = json.loads(lines[index])
    _LINE_EDITS[field](data)
    lines[index] = json.dumps(data)
    bad = _write(tmp_path / "altered.jsonl", lines)
    target = Ledger.open(tmp_path / "target.db")
    try:
        with pytest.raises(LedgerImportError, match=f"line {index + 1}: event seq {index} does not match its hash"):
            import_jsonl(bad, target)
        assert target.campaign_ids_with_events() == []
    finally:
        target.close()


def test_rehashing_one_altered_line_breaks_the_next_link(finished, tmp_path):
    lines = _lines(finished[1])
    index = _observed_line(lines)
    data = json.loads(lines[index])
    data["payload"]["value"] += 1.0
    previous = json.loads(lines[index - 1])["hash"] if index > 1 else GENESIS
    data["hash"] = event_hash(previous, CID, data["seq"], data["type"], data["event_schema_version"],
                              json.dumps(data["payload"], sort_keys=True, separators=(",", ":")),
                              data["idempotency_key"], data["actor"],
                              datetime.fromisoformat(data["at"]))
    lines[index] = json.dumps(data)
    with pytest.raises(LedgerImportError, match=f"line {index + 2}: event seq {index + 1} does not match"):
        import_jsonl(_write(tmp_path / "rehashed.jsonl", lines), Ledger.open(":memory:"))


def test_a_changed_head_hash_or_a_dropped_last_line_is_refused(finished, tmp_path):
    lines = _lines(finished[1])
    header = json.loads(lines[0])
    forged = _write(tmp_path / "head.jsonl", [json.dumps(header | {"head_hash": "0" * 64}), *lines[1:]])
    with pytest.raises(LedgerImportError, match="line 1: the header's head_hash"):
        import_jsonl(forged, Ledger.open(":memory:"))
    cut = _write(tmp_path / "cut.jsonl", [json.dumps(header | {"n_events": header["n_events"] - 1}), *lines[1:-1]])
    with pytest.raises(LedgerImportError, match="head_hash"):
        import_jsonl(cut, Ledger.open(":memory:"))


def test_a_verified_import_keeps_the_chain_and_notes_where_it_came_from(finished, tmp_path):
    target = Ledger.open(tmp_path / "target.db")
    try:
        report = import_jsonl(finished[1], target)
        assert report.is_verified
        header = json.loads(_lines(finished[1])[0])
        assert target.head_hash(CID) == header["head_hash"]  # same events, same chain
        result = verify(target, CID)
        assert result.is_identical and [n.split(" ")[0] for n in result.notes] == ["imported_verified"]
    finally:
        target.close()


# ------------------------------------------------------------------------------------------- pre-chain exports
def _unchained(lines: list[str]) -> list[str]:
    """The same export as closedloop wrote it before the chain: layout version 1, no hashes."""
    out = []
    for line in lines:
        data = json.loads(line) | {"schema_version": 1}
        for name in ("hash", "chain", "head_hash"):
            data.pop(name, None)
        out.append(json.dumps(data))
    return out


def test_a_pre_chain_export_imports_only_as_unverified_and_is_noted(finished, tmp_path):
    old = _write(tmp_path / "old.jsonl", _unchained(_lines(finished[1])))
    db = tmp_path / "target.db"
    target = Ledger.open(db)
    try:
        with pytest.raises(LedgerImportError, match="line 1: .*before closedloop chained its events.*--unverified"):
            import_jsonl(old, target)
        assert target.campaign_ids_with_events() == []
        report = import_jsonl(old, target, unverified=True)
        assert not report.is_verified and report.n_added > 0
        result = verify(target, CID)
        assert result.is_identical and result.notes[0].startswith("imported_unverified")
    finally:
        target.close()
    refused = runner.invoke(app, ["ledger", "import", str(old), "--db", str(tmp_path / "cli.db")])
    assert refused.exit_code == 2 and "--unverified" in refused.output
    accepted = runner.invoke(app, ["ledger", "import", str(old), "--db", str(tmp_path / "cli.db"), "--unverified"])
    assert accepted.exit_code == 0 and "unverified" in accepted.output
    shown = runner.invoke(app, ["ledger", "verify", CID, "--db", str(tmp_path / "cli.db")])
    assert shown.exit_code == 0 and "note: imported_unverified" in shown.output


# --------------------------------------------------------------------------------------------------- migration
def test_the_migration_chains_a_ledger_written_before_the_chain(finished, copy_db):
    with sqlite3.connect(copy_db) as conn:
        original = conn.execute("SELECT seq, hash FROM event ORDER BY seq").fetchall()
        conn.execute("DROP TRIGGER event_no_update")
        conn.execute("DROP TABLE ledger_note")
        conn.execute("ALTER TABLE event DROP COLUMN hash")
        conn.execute("UPDATE alembic_version SET version_num = '0002'")
        conn.execute("CREATE TRIGGER event_no_update BEFORE UPDATE ON event "
                     "BEGIN SELECT RAISE(ABORT, 'the event table is append-only'); END")
    ledger = Ledger.open(copy_db)
    try:
        with sqlite3.connect(copy_db) as conn:
            assert conn.execute("SELECT seq, hash FROM event ORDER BY seq").fetchall() == original
        report = verify(ledger, CID)
        assert report.is_identical and report.notes[0].startswith(f"chained_by_migration (seq 1..{len(original)}")
    finally:
        ledger.close()
    with pytest.raises(sqlite3.IntegrityError, match="append-only"), sqlite3.connect(copy_db) as conn:
        conn.execute("UPDATE event SET actor = 'x'")


_text = st.text()


@settings(max_examples=300, deadline=None, derandomize=True)
@given(campaign_id=_text, payload=_text, key=_text, actor=_text,
                                seq=st.integers(0, 2**62))
def test_event_hash_is_sha256_of_the_json_list_it_documents(campaign_id, payload, key, actor, seq):
    """The hand-written encoding hashes exactly the bytes of ``json.dumps`` over the fields (sha256-v1's layout), so
    chains written before the speed-up still verify."""
    at = datetime(2026, 11, 27, 1, 2, 3, 45)
    fields = [GENESIS, campaign_id, seq, "Scored", 1, payload, key, actor, "2026-11-27T01:02:03.000045"]
    try:
        expected = hashlib.sha256(json.dumps(fields, ensure_ascii=False, separators=(",", ":")).encode()).hexdigest()
    except UnicodeEncodeError:  # a lone surrogate: neither encoding can hash it
        with pytest.raises(UnicodeEncodeError):
            event_hash(GENESIS, campaign_id, seq, "Scored", 1, payload, key, actor, at)
        return
    assert event_hash(GENESIS, campaign_id, seq, "Scored", 1, payload, key, actor, at) == expected


_moments = st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(9999, 12, 30),
                        timezones=st.none() | st.timezones())


@settings(max_examples=300, deadline=None, derandomize=True)
@given(campaign_id=_text, payload=_text, key=_text, actor=_text, seq=st.integers(0, 2**62), at=_moments,
       previous=st.text("0123456789abcdef", min_size=64, max_size=64))
def test_the_chain_walk_hashes_the_bytes_event_hash_does(campaign_id, payload, key, actor, seq, at, previous):
    """``verify``'s ChainWalk takes the time as the driver returns it (SQLite's text, or a datetime) and must hash
    exactly what ``event_hash`` hashes for the same event."""
    walk = ChainWalk(campaign_id)
    walk.head = previous
    sqlite_text = canonical_time(at).replace("T", " ")  # how SQLAlchemy stores a DateTime in SQLite
    try:
        expected = event_hash(previous, campaign_id, seq, "Scored", 1, payload, key, actor, at)
    except UnicodeEncodeError:
        return
    for stored in (at, sqlite_text, canonical_time(at), at.isoformat()):
        assert walk.expected(seq, "Scored", 1, payload, key, actor, stored) == expected, stored


@pytest.mark.parametrize("text", ["2026-11-27 01:02:03.000045", "2026-11-27 01:02:03", "2026-11-27T01:02:03+02:00",
                                  "2026-11-27 01:02:03.5", "2026-01-01"])
def test_stored_time_text_is_canonical_time_of_the_parsed_text(text):
    assert stored_time_text(text) == canonical_time(datetime.fromisoformat(text))
