"""Incremental reads, Alembic migrations of existing ledgers, and concurrent SQLite writers."""

from __future__ import annotations

import sqlite3

import pytest

from orchestrator.ledger import Ledger, verify
from orchestrator.ledger.migrations import BASELINE, head_revision
from orchestrator.ledger.tables import LabJobRow
from tests.orchestrator.ledger.writers import (
    dispatched,
    observed,
    started,
    write_concurrently,
)


def test_typed_reads_fetch_only_new_events(ledger):
    ledger.append("c", started(), key="s")
    ledger.append_many("c", [(dispatched(i), f"d{i}") for i in range(200)])
    assert len(ledger.events("c", types=["Dispatched"])) == 200
    fetched = []
    original = ledger._refresh_type

    def spy(campaign_id, event_type):
        cache = ledger._events.get((campaign_id, event_type))
        before = len(cache.events) if cache else 0
        out = original(campaign_id, event_type)
        fetched.append(len(out.events) - before)
        return out

    ledger._refresh_type = spy
    ledger.append("c", dispatched(200), key="d200")
    events = ledger.events("c", types=["Dispatched"])
    assert [e.payload["job_key"] for e in events][-2:] == ["c/199", "c/200"] and len(events) == 201
    assert fetched == [1], "a second read fetched old events again"
    assert [e.seq for e in ledger.events("c", types=["Dispatched", "CampaignStarted"], after_seq=199)] == [200, 201, 202]


def test_projection_reads_fetch_only_changed_rows(ledger):
    ledger.append("c", started(), key="s")
    ledger.append_many("c", [(dispatched(i), f"d{i}") for i in range(100)])
    assert [j.status for j in ledger.lab_jobs("c")] == ["dispatched"] * 100
    changed = []
    original_read = ledger._read

    def read_spy(sql, params):
        rows = original_read(sql, params)
        if "FROM lab_job" in sql:
            changed.append(len(rows))
        return rows

    ledger._read = read_spy
    try:
        ledger.append("c", observed(7), key="o7")
        jobs = ledger.lab_jobs("c")
        again = ledger.lab_jobs("c")  # no new event since: the table is not read at all
    finally:
        ledger._read = original_read
    assert again == jobs
    assert changed == [1], "only the job the result changed is read again"
    assert [j.job_key for j in jobs] == sorted(f"c/{i}" for i in range(100))
    assert {j.job_key: j.status for j in jobs}["c/7"] == "done"
    assert [j.job_key for j in ledger.lab_jobs("c") if j.status == "done"] == ["c/7"]


def _is_open(job) -> bool:
    return job.status == "dispatched"


def test_a_filtered_read_holds_only_the_rows_it_keeps(ledger):
    ledger.append("c", started(), key="s")
    ledger.append_many("c", [(dispatched(i), f"d{i}") for i in range(5)])
    ledger.append_many("c", [(observed(i), f"o{i}") for i in (1, 3)])
    assert [j.job_key for j in ledger.rows(LabJobRow, "c", keep=_is_open)] == ["c/0", "c/2", "c/4"]
    ledger.append("c", observed(4), key="o4")  # a kept row that stops matching leaves the filtered cache
    ledger.append("c", dispatched(5), key="d5")
    assert [j.job_key for j in ledger.rows(LabJobRow, "c", keep=_is_open)] == ["c/0", "c/2", "c/5"]
    assert len(ledger._rows[(LabJobRow, "c", _is_open)].rows) == 3, "the filtered cache holds rows it does not keep"
    assert [j.job_key for j in ledger.lab_jobs("c")] == [f"c/{i}" for i in range(6)]  # the full read is its own
    assert ledger.rows(LabJobRow, "c")[1].arm is ledger.rows(LabJobRow, "c")[2].arm  # repeated text is shared


def test_a_second_ledger_sees_what_another_writer_appended(tmp_path):
    reader, writer = Ledger.open(tmp_path / "l.db"), Ledger.open(tmp_path / "l.db")
    try:
        writer.append("c", started(), key="s")
        writer.append("c", dispatched(1), key="d1")
        assert [j.status for j in reader.lab_jobs("c")] == ["dispatched"]
        assert len(reader.events("c", types=["Dispatched"])) == 1
        writer.append("c", observed(1), key="o1")
        writer.append("c", dispatched(2), key="d2")
        assert [j.status for j in reader.lab_jobs("c")] == ["done", "dispatched"]
        assert [e.seq for e in reader.events("c", types=["Dispatched", "Observed"])] == [2, 3, 4]
        assert reader.campaign("c").n_lab == 1
    finally:
        reader.close()
        writer.close()


def _old_ledger(path) -> None:
    """A ledger as closedloop wrote it before Alembic: the baseline tables and triggers, no alembic_version."""
    from alembic import command
    from sqlalchemy import text

    from orchestrator.ledger.migrations import alembic_config

    engine_ledger = Ledger.open(path, migrate=False)
    with engine_ledger.engine.begin() as conn:
        command.upgrade(alembic_config(conn), BASELINE)
        conn.execute(text("DROP TABLE alembic_version"))
        conn.execute(text("INSERT INTO campaign (id, name, seed, status, n_lab, started_seq, objective) "
                          "VALUES ('old', 'demo', 0, 'running', 0, 1, '{\"direction\": \"maximize\"}')"))
        payload = started().model_dump_json()
        conn.execute(text("INSERT INTO event (campaign_id, seq, type, schema_version, payload, idempotency_key, actor, "
                          "at) VALUES ('old', 1, 'CampaignStarted', 1, :p, 'old:s', 'orchestrator', '2025-01-01')"),
                     {"p": payload})
    engine_ledger.close()


def test_a_ledger_from_before_alembic_is_stamped_and_upgraded(tmp_path):
    path = tmp_path / "old.db"
    _old_ledger(path)
    ledger = Ledger.open(path)
    try:
        with sqlite3.connect(path) as conn:
            assert conn.execute("SELECT version_num FROM alembic_version").fetchone()[0] == head_revision()
            columns = {row[1] for row in conn.execute("PRAGMA table_info(lab_job)")}
        assert "updated_seq" in columns
        assert ledger.campaign("old").name == "demo" and [e.seq for e in ledger.events("old")] == [1]
        ledger.append("old", dispatched(1, "old"), key="d1")
        ledger.append("old", observed(1, "old"), key="o1")
        assert [j.status for j in ledger.lab_jobs("old")] == ["done"]
        assert verify(ledger, "old").is_identical
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            with sqlite3.connect(path) as conn:
                conn.execute("DELETE FROM event")
    finally:
        ledger.close()


def test_concurrent_sqlite_writers_lose_no_update(tmp_path):
    write_concurrently(str(tmp_path / "shared.db"), n_workers=3, n_each=20)


def test_the_fast_path_head_is_alembics_head(tmp_path):
    """``migrations.HEAD`` lets a current ledger open without Alembic; it must name Alembic's own head, or a ledger
    one migration behind would be taken for current."""
    from orchestrator.ledger.migrations import HEAD

    assert HEAD == head_revision()
    Ledger.open(tmp_path / "fresh.db").close()
    with sqlite3.connect(tmp_path / "fresh.db") as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone()[0] == HEAD


def _scored(seq_of_old: int | None, value: float, iteration: int):
    from vocabulary.events import Scored

    return Scored(iteration=iteration, stage="outcome", subject="c/1", rubric_id="r", rubric_version="1",
                  criterion_id="improves", value=value, weight=1.0, is_provisional=seq_of_old is None,
                  supersedes_seq=seq_of_old, trajectory="it1:bo:1")


def _record(cls, supersedes: int | None, iteration: int):
    steps = [{"stage": stage, "subject": "1", "scores": [{"criterion_id": c, "value": 0.5, "weight": 1.0, "reason": ""}
                                                          for c in ("valid", "novel")]} for stage in ("proposal", "screen")]
    return cls(iteration=iteration, subject="it2:bo:1", reward=0.5, arm="bo", candidate_id="1", rubric_id="r",
               rubric_version="1", supersedes_seq=supersedes, steps=steps)


def test_a_ledger_with_scored_events_migrates_and_reward_records_carry_their_scores(tmp_path):
    """Revision 0004 re-keys the score table; old ``Scored`` events keep their rows (ordinal 0), a reward record
    projects one row per criterion and step, and a superseding record marks every score of the old one."""
    from alembic import command
    from sqlalchemy import create_engine

    from orchestrator.ledger.migrations import alembic_config
    from vocabulary.events import RewardEstimated, RewardFinalised

    db = tmp_path / "old.db"
    ledger = Ledger.open(db)
    ledger.append("c", started(), key="start")
    first = ledger.append("c", _scored(None, 0.2, 1), key="s1")
    ledger.append("c", _scored(first.seq, 0.9, 2), key="s2")
    ledger.close()
    engine = create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:  # back to the schema before scores moved into the records
        command.downgrade(alembic_config(conn), "0003")
    engine.dispose()

    ledger = Ledger.open(db)  # upgrades to head
    estimate = ledger.append("c", _record(RewardEstimated, None, 2), key="r1")
    final = ledger.append("c", _record(RewardFinalised, estimate.seq, 3), key="r2")
    rows = {(row.seq, row.ordinal): row for row in ledger.scores("c")}
    assert rows[(first.seq, 0)].superseded_by_seq == first.seq + 1 and rows[(first.seq + 1, 0)].value == 0.9
    assert [rows[(estimate.seq, k)].superseded_by_seq for k in range(4)] == [final.seq] * 4
    assert [(rows[(final.seq, k)].stage, rows[(final.seq, k)].criterion_id) for k in range(4)] == [
        ("proposal", "valid"), ("proposal", "novel"), ("screen", "valid"), ("screen", "novel")]
    assert not any(rows[(final.seq, k)].is_provisional for k in range(4))
    assert verify(ledger, "c").is_identical
    ledger.close()
