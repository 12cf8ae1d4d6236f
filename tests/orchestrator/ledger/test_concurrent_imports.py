"""Imports of one export racing each other: the data is right, and so are the report and the notes: the import
that adds the events says so and records a note, the others report them as already present. On SQLite and
PostgreSQL, and on PostgreSQL the head is anchored outside the event table as on SQLite."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
from sqlalchemy import text

from orchestrator.ledger import Ledger, verify
from orchestrator.ledger import jsonl as jsonl_module
from orchestrator.ledger.anchor import ANCHOR_TABLE
from orchestrator.ledger.jsonl import export_jsonl, import_jsonl
from tests.orchestrator.ledger.writers import dispatched, observed, started

CID = "race"
N_PAIRS = 38  # 1 + 2 * 38 = 77 events


@pytest.fixture
def export(tmp_path) -> tuple[Path, int]:
    source = Ledger.open(tmp_path / "source.db")
    try:
        source.append(CID, started(), key="start")
        for i in range(N_PAIRS):
            source.append_many(CID, [(dispatched(i, CID), f"d{i}"), (observed(i, CID), f"o{i}")])
        path = tmp_path / "race.jsonl"
        return path, export_jsonl(source, CID, path)
    finally:
        source.close()


def _import(db: str, path: str, barrier, results) -> None:
    ledger = Ledger.open(db)
    try:
        barrier.wait(60)
        report = import_jsonl(path, ledger)
        results.put((report.n_added, report.n_present))
    finally:
        ledger.close()


def _race(db: str, path: Path, n_workers: int = 4) -> list[tuple[int, int]]:
    Ledger.open(db).close()  # the schema first: the race is over the events, not the migration
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(n_workers), context.Queue()
    workers = [context.Process(target=_import, args=(db, str(path), barrier, results)) for _ in range(n_workers)]
    for w in workers:
        w.start()
    reports = [results.get(timeout=180) for _ in workers]
    for w in workers:
        w.join(60)
        assert w.exitcode == 0
    return reports


def _check(db: str, n_events: int, reports: list[tuple[int, int]]) -> None:
    assert sorted(reports) == [(0, n_events)] * (len(reports) - 1) + [(n_events, 0)], reports
    ledger = Ledger.open(db)
    try:
        notes = ledger.notes(CID)
        assert [(n.kind, n.first_seq, n.last_seq) for n in notes] == [("imported_verified", 1, n_events)]
        report = verify(ledger, CID)
        assert report.is_identical and report.n_events == n_events and report.head_problems == []
    finally:
        ledger.close()


def test_an_import_that_finds_its_events_added_meanwhile_reports_none_added(export, tmp_path, monkeypatch):
    """Deterministically: a second import runs to the end between the first one's check and its append."""
    path, n_events = export
    db = tmp_path / "target.db"
    first, second = Ledger.open(db), Ledger.open(db)
    appended = jsonl_module._append
    reports = []

    def racing_append(ledger, campaign_id, records, written):
        if ledger is first and not reports:
            reports.append(import_jsonl(path, second))
        return appended(ledger, campaign_id, records, written)

    monkeypatch.setattr(jsonl_module, "_append", racing_append)
    try:
        late = import_jsonl(path, first)
        assert (reports[0].n_added, reports[0].n_present) == (n_events, 0)
        assert (late.n_added, late.n_present) == (0, n_events)
        assert [(n.kind, n.first_seq, n.last_seq) for n in first.notes(CID)] == [("imported_verified", 1, n_events)]
    finally:
        first.close()
        second.close()


def test_four_concurrent_imports_on_sqlite_add_and_note_once(export, tmp_path):
    path, n_events = export
    db = str(tmp_path / "target.db")
    _check(db, n_events, _race(db, path))


@pytest.mark.postgres
def test_four_concurrent_imports_on_postgres_add_and_note_once(export, postgres_url):
    path, n_events = export
    _check(postgres_url, n_events, _race(postgres_url, path))


@pytest.mark.postgres
def test_a_removed_tail_on_postgres_fails_verify(export, postgres_url):
    path, n_events = export
    ledger = Ledger.open(postgres_url)
    try:
        import_jsonl(path, ledger)
        anchored = ledger.anchor.store.read(CID)
        assert (anchored.n_events, anchored.head_hash) == (n_events, ledger.head_hash(CID))
        with ledger.engine.begin() as conn:  # what the table's owner could do
            conn.execute(text("ALTER TABLE event DISABLE TRIGGER USER"))
            conn.execute(text("DELETE FROM event WHERE campaign_id = :c AND seq > :s"), {"c": CID, "s": n_events - 2})
            conn.execute(text("ALTER TABLE event ENABLE TRIGGER USER"))
            names = conn.execute(text("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")).scalars()
            assert ANCHOR_TABLE in set(names)  # a table of its own, not the event table
        report = verify(ledger, CID)
        assert not report.is_identical
        assert any(f"seq {n_events} (hash {anchored.head_hash})" in p and "removed" in p
                   for p in report.head_problems)
    finally:
        ledger.close()
