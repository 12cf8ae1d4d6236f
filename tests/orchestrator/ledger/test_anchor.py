"""The head anchored outside the event table: a campaign whose newest events were removed (and its projections
refolded to match) fails `ledger verify` and `replay` naming both heads, in the checkpoint store and in exports,
keyed with CLOSEDLOOP_LEDGER_KEY when set; `--expect-head` checks a head kept anywhere else."""

from __future__ import annotations

import json
import shutil
import sqlite3
from datetime import datetime

import pytest
from typer.testing import CliRunner

from orchestrator.interfaces.cli import app
from orchestrator.ledger import GENESIS, Ledger, event_hash, verify
from orchestrator.ledger.anchor import (
    ANCHOR_TABLE,
    KEY_ENV,
    SignedHead,
    checkpoint_store_path,
)
from orchestrator.ledger.jsonl import LedgerImportError, export_jsonl, import_jsonl
from orchestrator.ledger.tables import PROJECTION_TABLES, CampaignRow
from orchestrator.ledger.verify import _fold
from orchestrator.loop.campaign import checkpoint_path
from tests.orchestrator.ledger.writers import (
    dispatched,
    finished_campaign,
    observed,
    started,
    write_concurrently,
)

CID = "bh-anchor"
runner = CliRunner()


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A small finished campaign (its ledger and checkpoint store) and its export."""
    root = tmp_path_factory.mktemp("anchor")
    return finished_campaign(root, CID)[:2]


@pytest.fixture
def copy_db(finished, tmp_path):
    """A copy of the ledger together with its checkpoint store (where its head is anchored)."""
    path = tmp_path / "copy.db"
    shutil.copy(finished[0], path)
    shutil.copy(checkpoint_store_path(finished[0]), checkpoint_store_path(path))
    return path


def _invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def _head(db) -> tuple[int, str]:
    ledger = Ledger.open(db)
    try:
        return ledger.n_events(CID), ledger.head_hash(CID)
    finally:
        ledger.close()


def _last_lab_result(db) -> int:
    ledger = Ledger.open(db)
    try:
        return max(e.seq for e in ledger.events(CID, types=["Observed"]) if e.payload["value"] is not None)
    finally:
        ledger.close()


def _cut_tail(db, from_seq: int, campaign_id: str = CID) -> None:
    """What someone with write access to the file could do: remove the events from ``from_seq`` on, then refold the
    projections from what is left, so that the chain and the projections agree with the shorter history."""
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TRIGGER IF EXISTS event_no_update")
        conn.execute("DROP TRIGGER IF EXISTS event_no_delete")
        conn.execute("DELETE FROM event WHERE campaign_id = ? AND seq >= ?", (campaign_id, from_seq))
    ledger = Ledger.open(db)
    try:
        batch = _fold(campaign_id, ledger.chain_rows(campaign_id))
        with ledger.engine.begin() as conn:
            for table in PROJECTION_TABLES:
                column = "id" if table is CampaignRow else "campaign_id"
                conn.exec_driver_sql(f"DELETE FROM {table.__tablename__} WHERE {column} = ?", (campaign_id,))
            batch.write(conn)
    finally:
        ledger.close()


def _rewrite_from(db, seq: int) -> None:
    """Change the event at ``seq`` and recompute every hash after it: a chain that verifies, with another history."""
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TRIGGER IF EXISTS event_no_update")
        rows = conn.execute("SELECT seq, type, schema_version, payload, idempotency_key, actor, at FROM event "
                            "WHERE campaign_id = ? ORDER BY seq", (CID,)).fetchall()
        previous = GENESIS
        for row_seq, event_type, version, payload, key, actor, at in rows:
            if row_seq == seq:
                payload = payload.replace('"arm":"bo"', '"arm":"random"', 1)
                conn.execute("UPDATE event SET payload = ? WHERE campaign_id = ? AND seq = ?", (payload, CID, seq))
            digest = event_hash(previous, CID, row_seq, event_type, version, payload, key, actor,
                                datetime.fromisoformat(at))
            conn.execute("UPDATE event SET hash = ? WHERE campaign_id = ? AND seq = ?", (digest, CID, row_seq))
            previous = digest


def _anchor_row(db) -> tuple:
    with sqlite3.connect(checkpoint_store_path(db)) as conn:
        return conn.execute(f"SELECT * FROM {ANCHOR_TABLE} WHERE campaign_id = ?", (CID,)).fetchone()


# ------------------------------------------------------------------------------------------------ the anchor
def test_every_commit_anchors_the_head_in_the_checkpoint_store(finished):
    n, head = _head(finished[0])
    ledger = Ledger.open(finished[0])
    try:
        assert checkpoint_store_path(finished[0]) == checkpoint_path(ledger)  # the loop's checkpoint file
        anchored = ledger.anchor.store.read(CID)
        report = verify(ledger, CID)
    finally:
        ledger.close()
    assert (anchored.n_events, anchored.head_hash, anchored.is_keyed) == (n, head, False)
    assert report.is_identical and report.head_problems == []
    assert report.anchor.startswith(f"anchored in {checkpoint_store_path(finished[0])} at seq {n}, not keyed")


def test_a_removed_tail_fails_verify_and_replay_naming_both_heads(copy_db):
    n, head = _head(copy_db)
    cut = _last_lab_result(copy_db)
    _cut_tail(copy_db, cut)
    _, cut_head = _head(copy_db)

    ledger = Ledger.open(copy_db)
    try:
        report = verify(ledger, CID)
    finally:
        ledger.close()
    assert report.chain_break is None  # the shorter chain is a sound chain, and its projections match it
    assert [d["table"] for d in report.differences] == ["head"]
    [problem] = report.head_problems
    assert f"seq {n} (hash {head})" in problem and f"seq {cut - 1} (hash {cut_head})" in problem
    assert "removed" in problem

    result = _invoke("ledger", "verify", CID, "--db", copy_db)
    assert result.exit_code == 1, result.output
    assert "hash chain ok" not in result.output and "projections ok" in result.output
    [line] = [x for x in result.output.splitlines() if "removed" in x]
    assert head in line and cut_head in line

    result = _invoke("replay", CID, "--db", copy_db)
    assert result.exit_code == 1, result.output
    [line] = [x for x in result.output.splitlines() if "removed" in x]
    assert head in line and cut_head in line


def test_a_history_rewritten_with_every_hash_recomputed_fails_verify(copy_db):
    n, head = _head(copy_db)
    _rewrite_from(copy_db, n - 3)
    ledger = Ledger.open(copy_db)
    try:
        report = verify(ledger, CID)
    finally:
        ledger.close()
    assert report.chain_break is None and not report.is_identical
    assert any(f"seq {n} (hash {head})" in p and "rewritten" in p for p in report.head_problems)


def test_a_ledger_copied_without_its_anchor_reports_no_anchor_and_passes(finished, tmp_path):
    db = tmp_path / "alone.db"
    shutil.copy(finished[0], db)
    result = _invoke("ledger", "verify", CID, "--db", db)
    assert result.exit_code == 0, result.output
    assert "no anchor in" in result.output and "hash chain ok" in result.output
    assert not checkpoint_store_path(db).exists(), "verify reads; it creates no checkpoint store"


def test_expect_head_finds_a_kept_head_and_refuses_a_cut_chain(finished, tmp_path):
    db = tmp_path / "alone.db"
    shutil.copy(finished[0], db)  # without its anchor: only the kept head can tell
    n, head = _head(db)
    assert _invoke("ledger", "verify", CID, "--db", db, "--expect-head", head.upper()).exit_code == 0

    _cut_tail(db, _last_lab_result(db))
    _, cut_head = _head(db)
    assert _invoke("ledger", "verify", CID, "--db", db).exit_code == 0  # nothing else shows the cut
    result = _invoke("ledger", "verify", CID, "--db", db, "--expect-head", head)
    assert result.exit_code == 1, result.output
    [line] = [x for x in result.output.splitlines() if "expected head" in x]
    assert head in line and cut_head in line

    earlier = _invoke("ledger", "verify", CID, "--db", db, "--expect-head", cut_head)
    assert earlier.exit_code == 0 and "the expected head is the head" in earlier.output


@pytest.mark.parametrize("value", ["abc", "z" * 64, "0" * 63])
def test_a_malformed_expected_head_is_an_input_error(finished, value):
    result = _invoke("ledger", "verify", CID, "--db", finished[0], "--expect-head", value)
    assert result.exit_code == 2 and "is not a head hash" in result.output


def test_an_earlier_head_kept_is_found_while_the_campaign_went_on(tmp_path):
    ledger = Ledger.open(tmp_path / "l.db")
    try:
        ledger.append("c", started(), key="start")
        ledger.append("c", dispatched(1, "c"), key="d1")
        kept = ledger.head_hash("c")
        ledger.append("c", observed(1, "c"), key="o1")
        report = verify(ledger, "c", expect_head=kept)
        assert report.is_identical and "the expected head is seq 2, 1 event(s) were appended since" in report.anchor
    finally:
        ledger.close()


def test_the_anchor_is_not_moved_on_past_a_cut(copy_db):
    """A campaign resumed after its tail was cut appends again; the anchor keeps recording the removed head."""
    n, head = _head(copy_db)
    _cut_tail(copy_db, n - 2)
    ledger = Ledger.open(copy_db)
    try:
        for i in range(5):  # past the removed head
            ledger.append(CID, dispatched(900 + i, CID), key=f"again-{i}")
        assert ledger.n_events(CID) > n
        anchored = ledger.anchor.store.read(CID)
        report = verify(ledger, CID)
    finally:
        ledger.close()
    assert (anchored.n_events, anchored.head_hash) == (n, head)
    assert any(f"seq {n} (hash {head})" in p for p in report.head_problems) and not report.is_identical


def test_concurrent_writers_keep_the_anchor_at_the_head(tmp_path):
    db = str(tmp_path / "shared.db")
    write_concurrently(db, n_workers=3, n_each=15)
    ledger = Ledger.open(db)
    try:
        anchored = ledger.anchor.store.read("c")
        assert (anchored.n_events, anchored.head_hash) == (ledger.n_events("c"), ledger.head_hash("c"))
        assert verify(ledger, "c").head_problems == []
    finally:
        ledger.close()


# ----------------------------------------------------------------------------------------------------- keyed
def test_a_keyed_anchor_verifies_and_a_forged_one_fails(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "lab secret")
    db = tmp_path / "keyed.db"
    ledger = Ledger.open(db)
    try:
        ledger.append(CID, started(), key="start")
        for i in range(4):
            ledger.append_many(CID, [(dispatched(i, CID), f"d{i}"), (observed(i, CID), f"o{i}")])
        n, head = ledger.n_events(CID), ledger.head_hash(CID)
        report = verify(ledger, CID)
        assert report.is_identical and "keyed, signature verified" in report.anchor
    finally:
        ledger.close()
    assert _anchor_row(db)[4] == 1  # recorded as keyed

    # cut the tail and move the anchor back to match, without the key
    _cut_tail(db, n - 1)
    _, cut_head = _head(db)
    forged = SignedHead.sign(CID, n - 2, cut_head, key=b"a guess")
    with sqlite3.connect(checkpoint_store_path(db)) as conn:
        conn.execute(f"UPDATE {ANCHOR_TABLE} SET n_events = ?, head_hash = ?, mac = ? WHERE campaign_id = ?",
                     (n - 2, cut_head, forged.mac, CID))
    result = _invoke("ledger", "verify", CID, "--db", db)
    assert result.exit_code == 1, result.output
    assert "does not verify: its signature does not match its fields" in result.output

    monkeypatch.setenv(KEY_ENV, "another secret")
    result = _invoke("ledger", "verify", CID, "--db", db)
    assert result.exit_code == 1 and "signed with another key" in result.output

    monkeypatch.delenv(KEY_ENV)
    result = _invoke("ledger", "verify", CID, "--db", db)
    assert "signature not checked: set CLOSEDLOOP_LEDGER_KEY" in result.output and head not in result.output


# ---------------------------------------------------------------------------------------------------- exports
def _lines(path) -> list[str]:
    return path.read_text().splitlines()


def _write(path, lines):
    path.write_text("\n".join(lines) + "\n")
    return path


def _cut_export(lines: list[str], n_keep: int, *, resign: bytes | None | bool = False) -> list[str]:
    """An export cut after ``n_keep`` events with its header made to match; ``resign``: sign the cut head afresh
    (None: unkeyed, bytes: with that key), False: leave the signed head as exported, True: drop it."""
    header = json.loads(lines[0])
    head = json.loads(lines[n_keep])["hash"]
    header |= {"n_events": n_keep, "head_hash": head}
    if resign is True:
        header.pop("signed_head")
    elif resign is not False:
        header["signed_head"] = SignedHead.sign(header["campaign_id"], n_keep, head, key=resign).to_json()
    return [json.dumps(header), *lines[1:n_keep + 1]]


def test_every_export_header_carries_the_signed_head(finished):
    header = json.loads(_lines(finished[1])[0])
    signed = SignedHead.from_json(header["signed_head"])
    assert (signed.campaign_id, signed.n_events, signed.head_hash) == (CID, header["n_events"], header["head_hash"])


def test_an_export_cut_with_its_header_fixed_is_refused(finished, tmp_path):
    lines = _lines(finished[1])
    keep = len(lines) - 4
    cut = _write(tmp_path / "cut.jsonl", _cut_export(lines, keep))
    with pytest.raises(LedgerImportError, match=r"line 1: the header's signed head is seq \d+ .* the file was cut"):
        import_jsonl(cut, Ledger.open(":memory:"))
    result = _invoke("ledger", "import", cut, "--db", tmp_path / "t.db")
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1


def test_import_expect_head_refuses_a_cut_export_naming_both_heads(finished, tmp_path):
    lines = _lines(finished[1])
    head = json.loads(lines[0])["head_hash"]
    keep = len(lines) - 4
    cut_head = json.loads(lines[keep])["hash"]
    cut = _write(tmp_path / "cut.jsonl", _cut_export(lines, keep, resign=None))  # re-signed, unkeyed: sound
    result = _invoke("ledger", "import", cut, "--db", tmp_path / "t.db", "--expect-head", head)
    assert result.exit_code == 2, result.output
    [line] = result.output.strip().splitlines()
    assert line.startswith("error: ") and head in line and cut_head in line
    assert Ledger.open(tmp_path / "t.db").campaign_ids_with_events() == []

    result = _invoke("ledger", "import", finished[1], "--db", tmp_path / "t.db", "--expect-head", head)
    assert result.exit_code == 0 and "the expected head is the head" in result.output


def test_with_a_key_an_import_needs_a_signed_head(finished, tmp_path, monkeypatch):
    lines = _lines(finished[1])
    keep = len(lines) - 4
    monkeypatch.setenv(KEY_ENV, "lab secret")
    for resign in (None, True, b"a guess"):
        cut = _write(tmp_path / "cut.jsonl", _cut_export(lines, keep, resign=resign))
        with pytest.raises(LedgerImportError, match="not signed with a key|does not verify"):
            import_jsonl(cut, Ledger.open(":memory:"))
    # a head the user vouches for imports without a signature (a wrong signature is refused all the same)
    cut_head = json.loads(lines[keep])["hash"]
    with pytest.raises(LedgerImportError, match="does not verify"):
        import_jsonl(cut, Ledger.open(":memory:"), expect_head=cut_head)
    cut = _write(tmp_path / "cut.jsonl", _cut_export(lines, keep, resign=True))
    report = import_jsonl(cut, Ledger.open(":memory:"), expect_head=cut_head)
    assert report.n_added == keep


def test_a_keyed_export_imports_with_its_key(copy_db, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "lab secret")
    path = tmp_path / "keyed.jsonl"
    ledger = Ledger.open(copy_db)
    try:
        export_jsonl(ledger, CID, path)
    finally:
        ledger.close()
    assert json.loads(_lines(path)[0])["signed_head"]["is_keyed"] is True
    report = import_jsonl(path, Ledger.open(":memory:"))
    assert report.head_signature == "head signed and verified"
    monkeypatch.setenv(KEY_ENV, "another secret")
    with pytest.raises(LedgerImportError, match="signed with another key"):
        import_jsonl(path, Ledger.open(":memory:"))
    monkeypatch.delenv(KEY_ENV)
    assert "not checked" in import_jsonl(path, Ledger.open(":memory:")).head_signature


def test_a_ledger_whose_tail_was_cut_is_not_exported(copy_db, tmp_path):
    """Exporting would sign the cut chain afresh; the anchor refuses it."""
    n, head = _head(copy_db)
    _cut_tail(copy_db, n - 3)
    result = _invoke("ledger", "export", CID, "--db", copy_db, "--out", tmp_path / "out.jsonl")
    assert result.exit_code == 2 and head in result.output and "nothing was exported" in result.output
    assert not (tmp_path / "out.jsonl").exists()
