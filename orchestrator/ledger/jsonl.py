"""Move a campaign's ledger between machines as JSON Lines: one event per line, schema-versioned.

File format (``closedloop.ledger``, format version ``JSONL_SCHEMA_VERSION``), UTF-8, every line ends with ``\\n``:

- line 1, the header: ``{"format": "closedloop.ledger", "schema_version": 2, "kind": "header", "campaign_id": ...,
  "n_events": N, "exported_at": ..., "source": ..., "chain": "sha256-v1", "head_hash": ..., "signed_head": {...}}``.
  ``n_events`` lets an import notice a file cut at a line end; ``head_hash`` is the hash of the last event;
  ``signed_head`` is the campaign's head signed at export (``ledger.anchor.SignedHead``: keyed with an HMAC when
  ``CLOSEDLOOP_LEDGER_KEY`` is set), which a cut file cannot carry unless whoever cut it holds the key.
- lines 2..N+1, one event each, in seq order: ``{"format", "schema_version", "campaign_id", "seq", "type",
  "event_schema_version", "payload", "idempotency_key", "actor", "at", "hash"}``. ``payload`` is the stored payload as
  a JSON object, ``idempotency_key`` the stored (campaign-scoped) key, ``at`` the ISO 8601 UTC time of the original
  append and ``hash`` the event's link in the campaign's hash chain (``ledger.chain``).

An import validates the whole file before it writes anything, recomputes the hash chain and refuses the file at the
first event that does not match (an altered field, a removed, inserted or reordered line), checks the signed head
(its signature, when a key is set: with a key set, a file whose head is not signed imports only with an
``expect_head``) and the head the user expects, then appends every event in one transaction through
``Ledger.append_many`` with the original idempotency keys, so importing the same file twice changes nothing, and
only the import that really added events records a note. Files of layout version 1 (before the chain) import only
with ``unverified=True``, and the ledger notes that import as unverified.

An export refuses a campaign whose anchored head (``ledger.anchor``) its events no longer reach: signing a cut
chain afresh would launder the cut.

Example:
    >>> import tempfile, pathlib
    >>> from vocabulary.events import CampaignStarted
    >>> source = Ledger.open(":memory:")
    >>> _ = source.append("c1", CampaignStarted(name="demo", seed=0, spec={}), key="started")
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "c1.jsonl"
    >>> export_jsonl(source, "c1", path)
    1
    >>> target = Ledger.open(":memory:")
    >>> report = import_jsonl(path, target)
    >>> (report.campaign_id, report.n_added), import_jsonl(path, target).n_added
    (('c1', 1), 0)
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from orchestrator.ledger.anchor import KEY_ENV, SignedHead, ledger_key
from orchestrator.ledger.chain import CHAIN_ALGORITHM, first_break
from orchestrator.ledger.errors import LedgerError
from orchestrator.ledger.outputs import output_file
from orchestrator.ledger.store import Ledger
from orchestrator.ledger.verify import check_expected_head, check_signed_head
from vocabulary.events import EVENT_TYPES, EventPayload, parse_payload

__all__ = [
    "JSONL_FORMAT",
    "JSONL_SCHEMA_VERSION",
    "ImportReport",
    "LedgerImportError",
    "export_jsonl",
    "import_jsonl",
]

JSONL_FORMAT = "closedloop.ledger"
JSONL_SCHEMA_VERSION = 2
"""Version of the line layout (header and envelope fields). Event payloads carry their own ``event_schema_version``.
Version 2 adds the hash chain (``hash`` on every event, ``chain`` and ``head_hash`` in the header); version 1 files,
written before the chain existed, import only when the caller accepts them unverified."""
_UNCHAINED_VERSION = 1

_EVENT_FIELDS = ("campaign_id", "seq", "type", "event_schema_version", "payload", "idempotency_key", "actor", "at")


class LedgerImportError(LedgerError):
    """A JSONL ledger file cannot be imported. Nothing was written.

    ``line_number`` is 1-based (line 1 is the header); 0 means the file as a whole.
    """

    def __init__(self, line_number: int, message: str, *, path: str | Path | None = None):
        self.line_number = line_number
        self.message = message
        self.path = None if path is None else str(path)
        where = f"line {line_number}" if line_number else "file"
        super().__init__(f"{self.path}: {where}: {message}" if self.path else f"{where}: {message}")


@dataclass(frozen=True)
class ImportReport:
    """What an import did: ``n_events`` in the file, of which ``n_added`` were new and ``n_present`` already stored."""

    campaign_id: str
    path: str
    n_events: int
    n_added: int
    n_present: int
    is_verified: bool = True
    """False when the file carried no hash chain and was imported with ``unverified=True``."""
    head_hash: str = ""
    """The file's head: the hash of its last event."""
    head_signature: str = ""
    """What the file's signed head showed, in words (signed and verified, signed but not checked, not signed)."""
    expected_head: str = ""
    """Where the head given as ``expect_head`` is in the file ("" when none was given)."""

    @property
    def is_noop(self) -> bool:
        return self.n_added == 0


@dataclass(frozen=True)
class _Record:
    line_number: int
    seq: int
    type: str
    payload: EventPayload
    key: str
    """idempotency key without the ``"{campaign_id}:"`` prefix (what ``append_many`` takes)"""
    actor: str
    at: datetime
    payload_text: str = ""
    """the payload as canonical JSON, as hashed"""
    hash: str = ""


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _safe_url(ledger: Ledger) -> str:
    return make_url(ledger.url).render_as_string(hide_password=True)


def _canonical(payload: EventPayload | dict[str, Any]) -> str:
    data = payload.model_dump(mode="json") if isinstance(payload, EventPayload) else payload
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


# ----------------------------------------------------------------------------------------------------- export
def export_jsonl(ledger: Ledger, campaign_id: str, path: str | Path, *, force: bool = False) -> int:
    """Write a campaign's events to ``path`` (header line, then one event a line in seq order).

    The file is written to a temporary name and published when complete, so a crash never leaves a truncated export
    behind. An existing file at ``path`` is replaced only with ``force``; a link, FIFO, device or directory never is
    (``ledger.outputs``). A campaign whose events do not reach its anchored head is refused.

    Returns:
        The number of events written (the header is not counted).
    """
    rows = list(ledger.chain_rows(campaign_id))
    if not rows:
        known = ledger.campaign_ids_with_events()
        raise LedgerError(f"campaign {campaign_id!r} has no events in {_safe_url(ledger)}; campaigns there: {known}")
    target = Path(path)
    _check_anchor(ledger, campaign_id, rows)
    header = {
        "format": JSONL_FORMAT,
        "schema_version": JSONL_SCHEMA_VERSION,
        "kind": "header",
        "campaign_id": campaign_id,
        "n_events": len(rows),
        "exported_at": datetime.now(UTC).isoformat(),
        "source": _safe_url(ledger),
        "chain": CHAIN_ALGORITHM,
        "head_hash": rows[-1].hash,
        "signed_head": SignedHead.sign(campaign_id, len(rows), rows[-1].hash, key=ledger_key()).to_json(),
    }
    lines = [json.dumps(header, sort_keys=True)]
    for row in rows:
        lines.append(json.dumps({
            "format": JSONL_FORMAT,
            "schema_version": JSONL_SCHEMA_VERSION,
            "campaign_id": campaign_id,
            "seq": row.seq,
            "type": row.type,
            "event_schema_version": row.schema_version,
            "payload": json.loads(row.payload),
            "idempotency_key": row.idempotency_key,
            "actor": row.actor,
            "at": _utc(row.at).isoformat(),
            "hash": row.hash,
        }, sort_keys=True, ensure_ascii=False))
    with output_file(target, force=force) as tmp:
        with tmp.open("w", encoding="utf-8", newline="\n") as handle:
            handle.write("\n".join(lines) + "\n")
    return len(rows)


def _check_anchor(ledger: Ledger, campaign_id: str, rows: list) -> None:
    """Refuse to export (and so sign afresh) a campaign whose events do not reach the head anchored for it."""
    store = ledger.anchor.store
    if store is None:
        return
    try:
        anchored = store.read(campaign_id)
    except (OSError, ValueError, sqlite3.Error, SQLAlchemyError):  # unreadable says nothing of the events
        return
    hashes = {row.seq: row.hash for row in rows}
    _, problems = check_signed_head(anchored, (rows[-1].seq, rows[-1].hash), hashes.get, where=store.where)
    if problems:
        raise LedgerError(f"{problems[0]}; nothing was exported")


# ----------------------------------------------------------------------------------------------------- import
def _read_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of the non-blank lines; refuses a file whose last line is not newline-terminated."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise LedgerImportError(0, "no such file; give the path of a file written by `closedloop ledger export`",
                                path=path) from exc
    raw = raw.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte-order mark an editor added is not part of the export
    if not raw.strip():
        raise LedgerImportError(0, "the file is empty; export the campaign again", path=path)
    chunks = raw.split(b"\n")
    if chunks[-1].strip():
        raise LedgerImportError(
            len(chunks), "the last line does not end with a newline, so the file was cut short (an interrupted copy "
            "or download); copy or export it again", path=path)
    lines = []
    for number, chunk in enumerate(chunks[:-1], start=1):
        try:
            text = chunk.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise LedgerImportError(number, f"is not valid UTF-8 ({exc.reason}); the file is corrupt, export it "
                                            "again", path=path) from exc
        if text.strip():
            lines.append((number, text))
    return lines


def _load_json(number: int, text: str, path: Path, *, is_last: bool) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        hint = ("the line is cut short, so the file was truncated; copy or export it again" if is_last
                else "the line is corrupt; restore the file from the original export")
        raise LedgerImportError(number, f"is not valid JSON ({exc.msg} at column {exc.colno}); {hint}",
                                path=path) from exc
    if not isinstance(data, dict):
        raise LedgerImportError(number, f"holds a JSON {type(data).__name__}, not an object; the file is corrupt",
                                path=path)
    return data


def _check_format(number: int, data: dict[str, Any], path: Path, version: int | None = None) -> int:
    """The line's layout version; raises unless it is a closedloop export of a version this closedloop reads (and,
    given ``version``, the header's)."""
    if data.get("format") != JSONL_FORMAT:
        raise LedgerImportError(number, f"format is {data.get('format')!r}, not {JSONL_FORMAT!r}; this is not a "
                                        "closedloop ledger export", path=path)
    found = data.get("schema_version")
    if found not in (_UNCHAINED_VERSION, JSONL_SCHEMA_VERSION) or isinstance(found, bool):
        raise LedgerImportError(number, f"schema_version {found!r} is not supported (this closedloop reads "
                                        f"{_UNCHAINED_VERSION} and {JSONL_SCHEMA_VERSION}); import it with the "
                                        "closedloop version that exported it, or upgrade", path=path)
    if version is not None and found != version:
        raise LedgerImportError(number, f"schema_version {found!r} differs from the header's {version}; lines from "
                                        "different exports were mixed, export the campaign again", path=path)
    return found


def _parse_header(number: int, data: dict[str, Any], path: Path) -> tuple[str, int]:
    version = _check_format(number, data, path)
    if data.get("kind") != "header":
        raise LedgerImportError(number, "the first line must be the export header (kind 'header'); the start of "
                                        "the file is missing, export it again", path=path)
    if version == JSONL_SCHEMA_VERSION and data.get("chain") != CHAIN_ALGORITHM:
        raise LedgerImportError(number, f"the header's chain {data.get('chain')!r} is not {CHAIN_ALGORITHM!r}; "
                                        "import it with the closedloop version that exported it", path=path)
    campaign_id, n_events = data.get("campaign_id"), data.get("n_events")
    if not isinstance(campaign_id, str) or not campaign_id:
        raise LedgerImportError(number, "the header has no campaign_id; the file is corrupt", path=path)
    if not isinstance(n_events, int) or isinstance(n_events, bool) or n_events < 1:
        raise LedgerImportError(number, f"the header's n_events {n_events!r} is not a positive whole number; the "
                                        "file is corrupt", path=path)
    return campaign_id, n_events


def _parse_event(number: int, data: dict[str, Any], path: Path, *, campaign_id: str, expected_seq: int,
                 version: int) -> _Record:
    _check_format(number, data, path, version)
    fields = _EVENT_FIELDS + (("hash",) if version == JSONL_SCHEMA_VERSION else ())
    missing = [name for name in fields if name not in data]
    if missing:
        raise LedgerImportError(number, f"lacks the field(s) {missing}; the file is corrupt", path=path)
    if data["campaign_id"] != campaign_id:
        raise LedgerImportError(number, f"belongs to campaign {data['campaign_id']!r}, but the file holds "
                                        f"{campaign_id!r}; one file holds one campaign, export each separately",
                                path=path)
    seq = data["seq"]
    if seq != expected_seq:
        raise LedgerImportError(number, f"has seq {seq!r} where {expected_seq} was expected: lines are missing, "
                                        "repeated or out of order; restore the file from the original export",
                                path=path)
    event_type = data["type"]
    if event_type not in EVENT_TYPES:
        raise LedgerImportError(number, f"event type {event_type!r} is unknown to this closedloop (known: "
                                        f"{sorted(EVENT_TYPES)}); upgrade closedloop to import it", path=path)
    supported = EVENT_TYPES[event_type].schema_version
    if data["event_schema_version"] != supported:
        raise LedgerImportError(number, f"{event_type} has event_schema_version {data['event_schema_version']!r}; "
                                        f"this closedloop reads version {supported}; use the closedloop version "
                                        "that exported it", path=path)
    if not isinstance(data["payload"], dict):
        raise LedgerImportError(number, "payload is not a JSON object; the file is corrupt", path=path)
    try:
        payload = parse_payload(event_type, data["payload"])
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise LedgerImportError(number, f"the {event_type} payload is invalid: {exc}", path=path) from exc
    prefix = f"{campaign_id}:"
    key, actor = data["idempotency_key"], data["actor"]
    if not isinstance(key, str) or not key.startswith(prefix) or key == prefix:
        raise LedgerImportError(number, f"idempotency_key {key!r} does not start with {prefix!r}; the file is "
                                        "corrupt", path=path)
    if not isinstance(actor, str):
        raise LedgerImportError(number, f"actor {actor!r} is not a string; the file is corrupt", path=path)
    try:
        at = _utc(datetime.fromisoformat(data["at"]))
    except (TypeError, ValueError) as exc:
        raise LedgerImportError(number, f"at {data['at']!r} is not an ISO 8601 time; the file is corrupt",
                                path=path) from exc
    stated_hash = data.get("hash", "")
    if not isinstance(stated_hash, str):
        raise LedgerImportError(number, f"hash {stated_hash!r} is not a string; the file is corrupt", path=path)
    return _Record(number, seq, event_type, payload, key.removeprefix(prefix), actor, at,
                   payload_text=_canonical(data["payload"]), hash=stated_hash)


def _read_jsonl(path: str | Path, *, unverified: bool = False, expect_head: str | None = None
                ) -> tuple[str, list[_Record], bool, tuple[str, str]]:
    """Validate a whole export file and return its campaign id, its records, whether its hash chain was verified and
    what its signed head and ``expect_head`` showed; raise ``LedgerImportError`` otherwise (a file without a chain
    unless ``unverified``)."""
    file = Path(path)
    lines = _read_lines(file)
    number, text = lines[0]
    header = _load_json(number, text, file, is_last=len(lines) == 1)
    campaign_id, n_events = _parse_header(number, header, file)
    version = header["schema_version"]
    if version == _UNCHAINED_VERSION and not unverified:
        raise LedgerImportError(number, "the file was exported before closedloop chained its events, so nothing "
                                        "shows it is unaltered; import it with --unverified to accept it as it is "
                                        "(the ledger then records the import as unverified)", path=file)
    records: list[_Record] = []
    seen_keys: dict[str, int] = {}
    for index, (number, text) in enumerate(lines[1:], start=1):
        data = _load_json(number, text, file, is_last=index == len(lines) - 1)
        record = _parse_event(number, data, file, campaign_id=campaign_id, expected_seq=index, version=version)
        if record.key in seen_keys:
            raise LedgerImportError(number, f"repeats the idempotency key of line {seen_keys[record.key]}; the file "
                                            "is corrupt", path=file)
        seen_keys[record.key] = number
        records.append(record)
    if records and records[0].type != "CampaignStarted":
        raise LedgerImportError(records[0].line_number, f"the first event is {records[0].type}, not "
                                                        "CampaignStarted; the file is corrupt", path=file)
    if len(records) != n_events:
        last = lines[-1][0]
        raise LedgerImportError(last, f"the file holds {len(records)} events but its header announces {n_events}: "
                                      "the end of the file is missing; copy or export it again", path=file)
    if version != JSONL_SCHEMA_VERSION:
        if expect_head is not None:
            raise LedgerImportError(0, "--expect-head cannot be checked against an export without a hash chain; "
                                       "import it without --expect-head", path=file)
        return campaign_id, records, False, ("", "")
    _check_chain(campaign_id, records, header, file)
    return campaign_id, records, True, _check_head(campaign_id, records, header, file, expect_head)


def _check_head(campaign_id: str, records: list[_Record], header: dict[str, Any], path: Path,
                expect_head: str | None) -> tuple[str, str]:
    """Check the header's signed head and the head the user expects against the verified chain; return what each
    showed, in words. With ``CLOSEDLOOP_LEDGER_KEY`` set, a head that is not signed with a key is accepted only
    when the user vouches for it with ``expect_head``: otherwise a cut file, its header made to match, would pass."""
    head = (records[-1].seq, records[-1].hash)
    expected = ""
    if expect_head is not None:
        seq = next((r.seq for r in records if r.hash == expect_head), None)
        expected, problem = check_expected_head(expect_head, head, seq)
        if problem is not None:
            raise LedgerImportError(0, f"{problem}; nothing was imported", path=path)
    key, raw = ledger_key(), header.get("signed_head")
    signed = None
    if raw is not None:
        try:
            signed = SignedHead.from_json(raw)
        except ValueError as exc:
            raise LedgerImportError(1, f"the header's signed_head {exc}; the file is corrupt, export it again",
                                    path=path) from exc
        if (signed.campaign_id, signed.n_events, signed.head_hash) != (campaign_id, *head):
            raise LedgerImportError(1, f"the header's signed head is {signed.describe()} of {signed.campaign_id!r}, "
                                       f"but the file's events end at seq {head[0]} (hash {head[1]}) of "
                                       f"{campaign_id!r}: the file was cut or altered after export; restore it from "
                                       "the original export", path=path)
        problem = signed.signature_problem(key)
        if problem is not None:
            raise LedgerImportError(1, f"the header's signed head ({signed.describe()}) does not verify: {problem}",
                                    path=path)
    if signed is not None and signed.is_keyed:
        return ("head signed and verified" if key is not None else
                f"head signed with key id {signed.key_id}, not checked (set {KEY_ENV} to check it)"), expected
    if key is not None and expect_head is None:
        raise LedgerImportError(1, f"the export's head is not signed with a key, so with {KEY_ENV} set nothing shows "
                                   "that the file is whole (a file cut short, its header made to match, would "
                                   "pass); pass --expect-head with the head hash `ledger verify` printed where it "
                                   f"came from, or unset {KEY_ENV}", path=path)
    return "head not signed with a key", expected


def _check_chain(campaign_id: str, records: list[_Record], header: dict[str, Any], path: Path) -> None:
    """Recompute the file's hash chain; name the first event whose content does not match its hash."""
    rows = [SimpleNamespace(seq=r.seq, type=r.type, schema_version=r.payload.schema_version, payload=r.payload_text,
                            idempotency_key=f"{campaign_id}:{r.key}", actor=r.actor, at=r.at, hash=r.hash)
            for r in records]
    broken, head = first_break(campaign_id, rows)
    if broken is not None:
        record = records[broken.seq - 1]
        raise LedgerImportError(record.line_number, f"{broken.describe()}; the file was altered after export, "
                                                    "restore it from the original export", path=path)
    if header.get("head_hash") != head:
        raise LedgerImportError(1, f"the header's head_hash {str(header.get('head_hash'))[:12]}… is not the hash of "
                                   f"the last event ({head[:12]}…); the file was altered after export, restore it "
                                   "from the original export", path=path)


def _check_against_stored(ledger: Ledger, campaign_id: str, records: list[_Record], path: Path) -> int:
    """How many of the file's events are stored already; raise if the stored campaign is a different one."""
    stored = ledger.events(campaign_id)
    for event, record in zip(stored, records, strict=False):
        same = (
            event.type == record.type
            and event.idempotency_key == f"{campaign_id}:{record.key}"
            and _canonical(event.payload) == _canonical(record.payload)
        )
        if not same:
            raise LedgerImportError(
                record.line_number,
                f"campaign {campaign_id!r} already exists in {_safe_url(ledger)} and differs from this file at seq "
                f"{record.seq} (stored {event.type} {event.idempotency_key!r}, file {record.type} "
                f"{campaign_id}:{record.key!r}); import it under another campaign id or into another database",
                path=path,
            )
    return min(len(stored), len(records))


def _append(ledger: Ledger, campaign_id: str, records: list[_Record], written: list) -> list:
    """Append the records in one transaction, keeping each event's original actor and ``at``; ``written`` receives
    the events this call added (another import of the same file may have added the rest first)."""
    return ledger.append_many(campaign_id, [(r.payload, r.key, r.actor, r.at) for r in records], written=written)


def import_jsonl(path: str | Path, ledger: Ledger, *, campaign_id: str | None = None,
                 unverified: bool = False, expect_head: str | None = None) -> ImportReport:
    """Import an exported campaign into ``ledger``: validate every line, then append all events in one transaction.

    Events already stored (same seq, key and payload) are skipped, so re-importing a file, or a longer export of a
    campaign imported before, only adds what is new. Projections are rebuilt by the same fold as live appends.

    Args:
        path: a file written by ``export_jsonl``.
        ledger: where to import.
        campaign_id: store the campaign under this id instead of the file's. Only the envelope changes: payloads
            (job keys, for instance) keep the original id as recorded.
        unverified: accept a file written before exports carried the hash chain (layout version 1). The ledger
            records such an import as ``imported_unverified`` (``ledger verify`` lists it).
        expect_head: a head hash kept outside the ledger (what ``ledger verify`` printed at the source): the file's
            chain must reach it (it is the hash of the file's last event, or of an earlier one).

    Raises:
        LedgerImportError: the file is corrupt, truncated, out of order, altered (its hash chain does not verify),
            of an unknown format or event type, its signed head does not match or verify, it does not reach
            ``expect_head``, or the database holds a different campaign under that id. Nothing is written then.
    """
    file = Path(path)
    expect_head = None if expect_head is None else expect_head.strip().lower()
    file_campaign_id, records, is_verified, (signature, expected) = _read_jsonl(file, unverified=unverified,
                                                                                expect_head=expect_head)
    target_id = campaign_id or file_campaign_id
    n_present = _check_against_stored(ledger, target_id, records, file)
    new, added = records[n_present:], []
    if new:
        appended = _append(ledger, target_id, new, added)
        if [event.seq for event in appended] != [record.seq for record in new]:
            raise LedgerError(
                f"imported events of {target_id!r} landed at seqs {appended[0].seq}..{appended[-1].seq} instead of "
                f"{new[0].seq}..{new[-1].seq}: another writer appended to this campaign during the import"
            )
    if added:  # only the import that added events notes it: a concurrent one of the same file found them stored
        kind = "imported_verified" if is_verified else "imported_unverified"
        detail = (f"from {file.name}, whose hash chain verified ({signature})" if is_verified else
                  f"from {file.name}, an export without a hash chain, accepted with --unverified: nothing shows "
                  "these events are as first recorded")
        ledger.add_note(target_id, kind, added[0].seq, added[-1].seq, detail)
    return ImportReport(target_id, str(file), len(records), len(added), len(records) - len(added), is_verified,
                        head_hash=records[-1].hash, head_signature=signature, expected_head=expected)
