import sqlite3

import pytest
from sqlmodel import Session

from orchestrator.ledger import Ledger, LedgerConflict, LedgerError, verify
from orchestrator.ledger.tables import LabJobRow
from vocabulary.events import CampaignStarted, Dispatched, Observed, Proposed

CANDIDATE = {"type": "molecule", "schema_version": 1, "smiles": "CCO", "id": "LFQSCWFLJHTTHZ-UHFFFAOYSA-N"}


def _seed_campaign(ledger, cid="c1"):
    ledger.append(cid, CampaignStarted(name="demo", seed=0, spec={}), key="started")
    ledger.append(cid, Proposed(iteration=0, arm="bo", candidate_id=CANDIDATE["id"], candidate=CANDIDATE), key="p")
    ledger.append(cid, Dispatched(iteration=0, job_key=f"{cid}/x", candidate_id=CANDIDATE["id"], arm="bo",
                                  driver="simlab", sim_time_s=0.0), key="d")
    ledger.append(cid, Observed(iteration=0, job_key=f"{cid}/x", candidate_id=CANDIDATE["id"], arm="bo", value=2.5,
                                sim_time_s=7200.0), key="o")


def test_append_assigns_consecutive_seq_per_campaign(ledger):
    _seed_campaign(ledger, "a")
    _seed_campaign(ledger, "b")
    assert [e.seq for e in ledger.events("a")] == [1, 2, 3, 4]
    assert [e.seq for e in ledger.events("b")] == [1, 2, 3, 4]
    assert [e.type for e in ledger.events("a", types=["Observed"])] == ["Observed"]


def test_projections_follow_the_events(ledger):
    _seed_campaign(ledger)
    [job] = ledger.lab_jobs("c1")
    assert (job.status, job.value, job.completed_s) == ("done", 2.5, 7200.0)
    [candidate] = ledger.candidates("c1")
    assert candidate.status == "observed"
    assert ledger.campaign("c1").n_lab == 1
    assert [o.is_lab for o in ledger.observations("c1")] == [True]


def test_same_key_same_payload_is_a_no_op(ledger):
    _seed_campaign(ledger)
    again = ledger.append("c1", CampaignStarted(name="demo", seed=0, spec={}), key="started")
    assert again.seq == 1
    assert len(ledger.events("c1")) == 4
    assert ledger.campaign("c1").n_lab == 1


def test_same_key_different_payload_is_a_conflict(ledger):
    _seed_campaign(ledger)
    with pytest.raises(LedgerConflict, match="not deterministic"):
        ledger.append("c1", CampaignStarted(name="demo", seed=1, spec={}), key="started")


def test_append_many_is_all_or_nothing(ledger):
    _seed_campaign(ledger)
    with pytest.raises(LedgerConflict):
        ledger.append_many("c1", [(CampaignStarted(name="x", seed=0, spec={}), "new"),
                                  (CampaignStarted(name="demo", seed=9, spec={}), "started")])
    assert len(ledger.events("c1")) == 4


def test_events_are_append_only_at_the_database_level(ledger, tmp_path):
    _seed_campaign(ledger)
    connection = sqlite3.connect(tmp_path / "ledger.db")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        connection.execute("UPDATE event SET payload = '{}' WHERE seq = 1")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        connection.execute("DELETE FROM event")
    connection.close()


def test_uniqueness_constraints_exist(ledger, tmp_path):
    _seed_campaign(ledger)
    connection = sqlite3.connect(tmp_path / "ledger.db")
    with pytest.raises(sqlite3.IntegrityError):
        connection.execute("INSERT INTO event (campaign_id, seq, type, schema_version, payload, idempotency_key, actor, at)"
                           " VALUES ('c1', 1, 'X', 1, '{}', 'fresh-key', 'me', '2026-01-01')")
    with pytest.raises(sqlite3.IntegrityError):
        connection.execute("INSERT INTO event (campaign_id, seq, type, schema_version, payload, idempotency_key, actor, at)"
                           " VALUES ('c1', 99, 'X', 1, '{}', 'c1:started', 'me', '2026-01-01')")
    connection.close()


def test_sqlite_runs_in_wal_mode(ledger, tmp_path):
    _seed_campaign(ledger)
    mode = sqlite3.connect(tmp_path / "ledger.db").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_verify_passes_then_catches_a_tampered_projection(ledger):
    _seed_campaign(ledger)
    report = verify(ledger, "c1")
    assert report.is_identical and report.n_events == 4
    with Session(ledger.engine) as session:
        job = session.get(LabJobRow, ("c1", "c1/x"))
        job.value = 99.0
        session.add(job)
        session.commit()
    report = verify(ledger, "c1")
    assert not report.is_identical
    assert report.differences[0]["table"] == "lab_job"
    assert report.differences[0]["stored"]["value"] == 99.0 and report.differences[0]["rebuilt"]["value"] == 2.5


def test_unknown_campaign_and_missing_directory_errors(ledger, tmp_path):
    with pytest.raises(LedgerError, match="known campaigns"):
        ledger.campaign("nope")
    with pytest.raises(LedgerError, match="does not exist"):
        Ledger.open(tmp_path / "missing" / "x.db")


def test_campaign_best_is_current_while_running(ledger):
    ledger.append("m", CampaignStarted(name="m", seed=0, spec={"objective": {"direction": "minimize"}}), key="s")
    for n, value in enumerate([3.0, 1.0, 2.0]):
        ledger.append("m", Observed(iteration=0, job_key=f"m/{n}", candidate_id=f"c{n}", arm="bo", value=value,
                                    sim_time_s=float(n)), key=f"o{n}")
    row = ledger.campaign("m")
    assert (row.best_candidate_id, row.best_value, row.status) == ("c1", 1.0, "running")
    assert verify(ledger, "m").is_identical


def test_opening_a_new_ledger_waits_while_another_process_holds_its_lock(tmp_path):
    """Several campaigns opening one new ledger at once (Ray fan-out): the WAL switch waits for the lock like any
    statement, instead of failing after sqlite3's default 5 s."""
    import sqlite3
    import threading

    from orchestrator.ledger import Ledger

    path = tmp_path / "busy.db"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")  # as another opener creating the schema would
    release = threading.Timer(6.0, lambda: holder.execute("COMMIT"))
    release.start()
    try:
        ledger = Ledger.open(path)
        ledger.close()
    finally:
        release.join()
        holder.close()


def test_a_ledger_sqlite_reports_locked_at_once_is_migrated_on_a_later_try(tmp_path, monkeypatch):
    """SQLite reports some lock conflicts without waiting; opening tries again instead of failing the campaign."""
    from sqlalchemy.exc import OperationalError

    from orchestrator.ledger import Ledger, migrations
    from orchestrator.ledger.errors import LedgerError

    real_upgrade, calls = migrations.upgrade, []

    def locked_twice(engine, **where):
        calls.append(1)
        if len(calls) <= 2:
            raise OperationalError("BEGIN IMMEDIATE", {}, Exception("database is locked"))
        return real_upgrade(engine, **where)

    monkeypatch.setattr(migrations, "upgrade", locked_twice)
    Ledger.open(tmp_path / "a.db").close()
    assert len(calls) == 3

    def broken(engine, **where):
        raise OperationalError("SELECT", {}, Exception("no such table: event"))

    monkeypatch.setattr(migrations, "upgrade", broken)
    with pytest.raises(LedgerError, match="no such table"):  # other errors are not retried
        Ledger.open(tmp_path / "b.db")
