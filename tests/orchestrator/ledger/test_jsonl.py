"""JSONL export and import of a campaign ledger: round trips, and every kind of bad file refused whole."""

from __future__ import annotations

import json

import pytest

from orchestrator.ledger import Ledger, LedgerError, rebuild_projections, verify
from orchestrator.ledger.anchor import SignedHead
from orchestrator.ledger.jsonl import (
    JSONL_FORMAT,
    LedgerImportError,
    export_jsonl,
    import_jsonl,
)
from orchestrator.ledger.tables import PROJECTION_TABLES
from orchestrator.loop.campaign import Campaign
from orchestrator.spec import load_spec
from tests.conftest import BUCHWALD_SPEC
from vocabulary.events import CampaignStarted

CID = "bh-export"


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A small finished Buchwald–Hartwig campaign and its export: (ledger path, jsonl path, n events)."""
    root = tmp_path_factory.mktemp("jsonl")
    spec = load_spec(BUCHWALD_SPEC).with_overrides(lab_budget=8, planner="bo")
    with Campaign.start(spec, db=root / "source.db", campaign_id=CID) as campaign:
        campaign.run()
        n_events = export_jsonl(campaign.ledger, CID, root / "campaign.jsonl")
    return root / "source.db", root / "campaign.jsonl", n_events


@pytest.fixture
def source(exported):
    store = Ledger.open(exported[0])
    yield store
    store.close()


def _lines(path) -> list[str]:
    return path.read_text().splitlines()


def _write(path, lines: list[str], *, end: str = "\n"):
    path.write_text("\n".join(lines) + end)
    return path


def _event_line(line: str, **changes) -> str:
    data = json.loads(line)
    data.update(changes)
    return json.dumps(data)


def _rows(ledger, campaign_id):
    return {t.__tablename__: [r.model_dump() for r in ledger.rows(t, campaign_id)] for t in PROJECTION_TABLES}


def _assert_nothing_imported(ledger):
    assert ledger.campaign_ids_with_events() == []
    assert ledger.campaigns() == []


# ------------------------------------------------------------------------------------------------------- export
def test_export_writes_a_header_then_one_event_per_line_in_seq_order(exported, source):
    _, path, n_events = exported
    lines = _lines(path)
    header, events = json.loads(lines[0]), [json.loads(line) for line in lines[1:]]
    assert header["kind"] == "header" and header["format"] == JSONL_FORMAT and header["n_events"] == n_events
    assert n_events == len(events) == len(source.events(CID)) > 50
    assert [e["seq"] for e in events] == list(range(1, n_events + 1))
    first = events[0]
    assert set(first) == {"format", "schema_version", "campaign_id", "seq", "type", "event_schema_version", "payload",
                          "idempotency_key", "actor", "at", "hash"}
    assert (first["type"], first["idempotency_key"], first["campaign_id"]) == ("CampaignStarted", f"{CID}:started", CID)
    assert path.read_bytes().endswith(b"\n")


def test_exporting_an_unknown_campaign_is_an_error(source, tmp_path):
    with pytest.raises(LedgerError, match="no events"):
        export_jsonl(source, "nope", tmp_path / "x.jsonl")
    assert not (tmp_path / "x.jsonl").exists()


# ------------------------------------------------------------------------------------------------------- round trip
def test_round_trip_keeps_every_event_and_projection(exported, source, tmp_path):
    _, path, n_events = exported
    target = Ledger.open(tmp_path / "target.db")
    report = import_jsonl(path, target)
    assert (report.campaign_id, report.n_events, report.n_added, report.n_present) == (CID, n_events, n_events, 0)

    assert target.events(CID) == source.events(CID)  # envelopes too: actor and `at` are the originals
    assert _rows(target, CID) == _rows(source, CID)
    original, imported = verify(source, CID), verify(target, CID)
    assert imported.is_identical
    assert (original.n_events, original.differences) == (imported.n_events, imported.differences)
    rebuilt_original, rebuilt_imported = rebuild_projections(source, CID), rebuild_projections(target, CID)
    assert _rows(rebuilt_imported, CID) == _rows(rebuilt_original, CID) == _rows(source, CID)


def test_export_of_an_import_reproduces_the_events(exported, tmp_path):
    _, path, _ = exported
    target = Ledger.open(tmp_path / "target.db")
    import_jsonl(path, target)
    again = tmp_path / "again.jsonl"
    export_jsonl(target, CID, again)

    def body(p):
        return _lines(p)[1:]

    assert body(again) == body(path)


def test_reimporting_the_same_file_is_a_no_op(exported, tmp_path):
    _, path, n_events = exported
    target = Ledger.open(tmp_path / "target.db")
    import_jsonl(path, target)
    before = _rows(target, CID)
    report = import_jsonl(path, target)
    assert report.is_noop and report.n_present == n_events
    assert len(target.events(CID)) == n_events
    assert _rows(target, CID) == before


@pytest.mark.parametrize("edit", ["bom", "crlf", "bom+crlf"])
def test_an_export_resaved_with_a_bom_or_crlf_imports_whole(exported, tmp_path, edit):
    """An editor or a Windows copy adds a UTF-8 byte-order mark or CRLF line ends; the events are unchanged, so the
    import verifies and adds every event."""
    _, path, n_events = exported
    raw = path.read_bytes()
    if "crlf" in edit:
        raw = raw.replace(b"\n", b"\r\n")
    if "bom" in edit:
        raw = b"\xef\xbb\xbf" + raw
    resaved = tmp_path / "resaved.jsonl"
    resaved.write_bytes(raw)
    report = import_jsonl(resaved, Ledger.open(tmp_path / "target.db"))
    assert report.is_verified and report.n_added == n_events


def test_a_longer_export_adds_only_the_new_events(exported, tmp_path):
    _, path, n_events = exported
    lines = _lines(path)
    head = json.loads(lines[20])["hash"]  # the header an export taken at seq 20 carried
    header = json.loads(lines[0]) | {"n_events": 20, "head_hash": head,
                                     "signed_head": SignedHead.sign(CID, 20, head, key=None).to_json()}
    prefix = _write(tmp_path / "prefix.jsonl", [json.dumps(header), *lines[1:21]])
    target = Ledger.open(tmp_path / "target.db")
    assert import_jsonl(prefix, target).n_added == 20
    report = import_jsonl(path, target)
    assert (report.n_present, report.n_added) == (20, n_events - 20)
    assert verify(target, CID).is_identical


def test_import_under_another_campaign_id(exported, source, tmp_path):
    _, path, n_events = exported
    target = Ledger.open(tmp_path / "target.db")
    report = import_jsonl(path, target, campaign_id="copy")
    assert report.campaign_id == "copy" and len(target.events("copy")) == n_events
    assert target.events("copy")[0].idempotency_key == "copy:started"
    assert target.campaign("copy").best_value == source.campaign(CID).best_value
    assert verify(target, "copy").is_identical


def test_a_different_campaign_with_the_same_id_is_refused(exported, tmp_path):
    _, path, _ = exported
    target = Ledger.open(tmp_path / "target.db")
    target.append(CID, CampaignStarted(name="other", seed=1, spec={}), key="started")
    with pytest.raises(LedgerImportError, match="already exists") as info:
        import_jsonl(path, target)
    assert info.value.line_number == 2
    assert len(target.events(CID)) == 1


# ------------------------------------------------------------------------------------------------------- bad files
def test_a_corrupt_line_in_the_middle_is_named_and_nothing_is_imported(exported, tmp_path):
    _, path, _ = exported
    lines = _lines(path)
    lines[30] = lines[30][: len(lines[30]) // 2] + "}{garbage"
    bad = _write(tmp_path / "corrupt.jsonl", lines)
    target = Ledger.open(tmp_path / "target.db")
    with pytest.raises(LedgerImportError, match="line 31: is not valid JSON.*corrupt") as info:
        import_jsonl(bad, target)
    assert info.value.line_number == 31
    _assert_nothing_imported(target)


def test_a_file_cut_mid_line_is_truncated(exported, tmp_path):
    _, path, _ = exported
    text = path.read_text()
    bad = tmp_path / "cut.jsonl"
    bad.write_text(text[: len(text) - 40])
    target = Ledger.open(tmp_path / "target.db")
    with pytest.raises(LedgerImportError, match="cut short") as info:
        import_jsonl(bad, target)
    assert info.value.line_number == len(text[: len(text) - 40].split("\n"))
    _assert_nothing_imported(target)


def test_a_file_cut_at_a_line_end_is_truncated(exported, tmp_path):
    _, path, n_events = exported
    lines = _lines(path)
    bad = _write(tmp_path / "short.jsonl", lines[:-5])
    target = Ledger.open(tmp_path / "target.db")
    with pytest.raises(LedgerImportError, match=f"holds {n_events - 5} events but its header announces {n_events}"):
        import_jsonl(bad, target)
    _assert_nothing_imported(target)


def test_out_of_order_lines_are_refused(exported, tmp_path):
    _, path, _ = exported
    lines = _lines(path)
    lines[10], lines[11] = lines[11], lines[10]
    bad = _write(tmp_path / "swapped.jsonl", lines)
    target = Ledger.open(tmp_path / "target.db")
    with pytest.raises(LedgerImportError, match="has seq 11 where 10 was expected.*out of order") as info:
        import_jsonl(bad, target)
    assert info.value.line_number == 11
    _assert_nothing_imported(target)


def test_a_missing_line_is_refused(exported, tmp_path):
    _, path, _ = exported
    lines = _lines(path)
    del lines[40]
    bad = _write(tmp_path / "gap.jsonl", lines)
    with pytest.raises(LedgerImportError, match="line 41: has seq 41 where 40 was expected"):
        import_jsonl(bad, Ledger.open(tmp_path / "target.db"))


def test_an_unknown_event_type_is_refused(exported, tmp_path):
    _, path, _ = exported
    lines = _lines(path)
    lines[5] = _event_line(lines[5], type="Teleported")
    bad = _write(tmp_path / "unknown.jsonl", lines)
    target = Ledger.open(tmp_path / "target.db")
    with pytest.raises(LedgerImportError, match="line 6: event type 'Teleported' is unknown"):
        import_jsonl(bad, target)
    _assert_nothing_imported(target)


def test_an_invalid_payload_is_refused(exported, tmp_path):
    _, path, _ = exported
    lines = _lines(path)
    data = json.loads(lines[-2])
    data["payload"]["unexpected_field"] = 1
    lines[-2] = json.dumps(data)
    bad = _write(tmp_path / "payload.jsonl", lines)
    target = Ledger.open(tmp_path / "target.db")
    with pytest.raises(LedgerImportError, match=f"line {len(lines) - 1}: the {data['type']} payload is invalid"):
        import_jsonl(bad, target)
    _assert_nothing_imported(target)


@pytest.mark.parametrize(
    ("line", "changes", "message"),
    [
        (3, {"schema_version": 99}, "schema_version 99 is not supported"),
        (3, {"event_schema_version": 7}, "event_schema_version 7"),
        (3, {"format": "something.else"}, "not a closedloop ledger export"),
        (3, {"campaign_id": "another"}, "belongs to campaign 'another'"),
        (3, {"idempotency_key": "another:x"}, "does not start with"),
        (3, {"at": "yesterday"}, "not an ISO 8601 time"),
    ],
)
def test_bad_envelopes_are_refused_with_their_line(exported, tmp_path, line, changes, message):
    _, path, _ = exported
    lines = _lines(path)
    lines[line - 1] = _event_line(lines[line - 1], **changes)
    bad = _write(tmp_path / "envelope.jsonl", lines)
    target = Ledger.open(tmp_path / "target.db")
    with pytest.raises(LedgerImportError, match=message) as info:
        import_jsonl(bad, target)
    assert info.value.line_number == line
    _assert_nothing_imported(target)


def test_a_file_without_its_header_is_refused(exported, tmp_path):
    _, path, _ = exported
    bad = _write(tmp_path / "headless.jsonl", _lines(path)[1:])
    with pytest.raises(LedgerImportError, match="line 1: the first line must be the export header"):
        import_jsonl(bad, Ledger.open(tmp_path / "target.db"))


def test_a_missing_or_empty_file_is_refused(tmp_path):
    target = Ledger.open(tmp_path / "target.db")
    with pytest.raises(LedgerImportError, match="no such file"):
        import_jsonl(tmp_path / "missing.jsonl", target)
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(LedgerImportError, match="empty"):
        import_jsonl(tmp_path / "empty.jsonl", target)
