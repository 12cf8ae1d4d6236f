"""The ledger and the loop on a real PostgreSQL server: migrations, locks, the LangGraph Postgres checkpointer, and
passwords that never leave the URL.

The server comes from ``CLOSEDLOOP_TEST_POSTGRES_URL`` (CI) or is started by ``tests.postgres``; each test gets its
own database.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from orchestrator.ledger import (
    Ledger,
    LedgerConflict,
    LedgerError,
    export_jsonl,
    verify,
)
from orchestrator.loop.campaign import Campaign
from tests.conftest import small_spec
from tests.orchestrator.ledger.writers import (
    dispatched,
    observed,
    started,
    write_concurrently,
)

pytestmark = pytest.mark.postgres

def _password(url: str) -> str:
    """The password in the server URL (fixed by tests/postgres.py, random in CI's .ci/run)."""
    from sqlalchemy.engine import make_url

    return make_url(url).password


def _comparable(ledger, campaign_id):
    return [(e.seq, e.type, e.payload, e.idempotency_key) for e in ledger.events(campaign_id)]


def test_ledger_on_postgres_is_append_only_and_idempotent(postgres_url):
    assert postgres_url.startswith("postgresql://")
    ledger = Ledger.open(postgres_url)
    try:
        assert ledger.is_postgres and _password(postgres_url) not in ledger.url and "***" in ledger.url
        ledger.append("c", started(), key="start")
        ledger.append("c", dispatched(1), key="d1")
        assert ledger.append("c", dispatched(1), key="d1").seq == 2  # an identical re-append is a no-op
        with pytest.raises(LedgerConflict, match="not deterministic"):
            ledger.append("c", dispatched(2), key="d1")
        with pytest.raises(DBAPIError, match="append-only"):
            with ledger.engine.begin() as conn:
                conn.execute(text("UPDATE event SET actor = 'mallory'"))
        with pytest.raises(DBAPIError, match="append-only"):
            with ledger.engine.begin() as conn:
                conn.execute(text("DELETE FROM event"))
        assert [e.type for e in ledger.events("c")] == ["CampaignStarted", "Dispatched"]
        assert ledger.lab_jobs("c")[0].status == "dispatched"
        ledger.append("c", observed(1), key="o1")
        assert ledger.lab_jobs("c")[0].status == "done"  # the incremental read sees the update
        assert verify(ledger, "c").is_identical
    finally:
        ledger.close()


def test_migrations_create_exactly_the_models(postgres_url, tmp_path):
    """Alembic's autogenerate comparison finds nothing to change on a freshly migrated database, on both backends."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext
    from sqlmodel import SQLModel

    from orchestrator.ledger.migrations import head_revision
    from orchestrator.ledger.tables import PROJECTION_TABLES, EventRow, LedgerNoteRow

    ours = {EventRow.__tablename__, LedgerNoteRow.__tablename__, *(t.__tablename__ for t in PROJECTION_TABLES)}
    for db in (postgres_url, tmp_path / "fresh.db"):
        ledger = Ledger.open(db)
        try:
            with ledger.engine.connect() as conn:
                context = MigrationContext.configure(
                    conn, opts={"include_object": lambda obj, name, kind, *_: kind != "table" or name in ours})
                assert context.get_current_revision() == head_revision()
                assert compare_metadata(context, SQLModel.metadata) == []
        finally:
            ledger.close()


def test_concurrent_writers_lose_no_update(postgres_url):
    """Four processes append to one campaign at once: seqs stay gap-free and the projections count every result."""
    write_concurrently(postgres_url, n_workers=4, n_each=25)


def test_campaign_on_postgres_uses_the_langgraph_postgres_checkpointer(postgres_url, tmp_path):
    """Stopped twice and resumed on PostgreSQL, a campaign ends with the same ledger as an uninterrupted SQLite run."""
    spec = small_spec(lab_experiments=6)
    with Campaign.start(spec, db=tmp_path / "ref.db", campaign_id="pg") as reference:
        reference.run()
        expected = _comparable(reference.ledger, "pg")
    with Campaign.start(spec, db=postgres_url, campaign_id="pg") as campaign:
        from langgraph.checkpoint.postgres import PostgresSaver

        assert isinstance(campaign.graph.checkpointer, PostgresSaver)
        campaign.run(max_steps=7)
    with Campaign.resume("pg", db=postgres_url) as campaign:
        campaign.run(max_steps=9)
    with Campaign.resume("pg", db=postgres_url) as campaign:
        summary = campaign.run()
        assert summary["status"] == "stopped"
        assert _password(postgres_url) not in json.dumps(summary, default=str)
        assert _comparable(campaign.ledger, "pg") == expected
        assert verify(campaign.ledger, "pg").is_identical
        with campaign.ledger.engine.connect() as conn:
            n_checkpoints = conn.execute(text("SELECT count(*) FROM checkpoints WHERE thread_id = 'pg'")).scalar()
        assert n_checkpoints > 10


def test_a_password_never_reaches_ledger_checkpoints_exports_or_logs(postgres_url, tmp_path):
    password = _password(postgres_url)
    assert password and password in postgres_url
    from tests.conftest import FREESOLV_SPEC

    toml = FREESOLV_SPEC.read_text().replace('main = "llm"', 'main = "random"').replace(
        'pool = "data/', f'pool = "{FREESOLV_SPEC.parent}/data/')
    (tmp_path / "spec.toml").write_text(toml)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cli = [sys.executable, "-m", "orchestrator.interfaces.cli"]
    runs = [
        subprocess.run(cli + ["-v", "run", str(tmp_path / "spec.toml"), "--db", postgres_url, "--lab-budget", "3",
                              "--campaign-id", "secret", "--json"], env=env, capture_output=True, text=True, timeout=600),
        subprocess.run(cli + ["ledger", "verify", "secret", "--db", postgres_url], env=env, capture_output=True,
                       text=True, timeout=300),
        subprocess.run(cli + ["run", "--resume", "nobody", "--db", postgres_url], env=env, capture_output=True,
                       text=True, timeout=300),
    ]
    assert runs[0].returncode == 0, runs[0].stderr[-2000:]
    assert runs[1].returncode == 0, runs[1].stderr[-2000:]
    assert runs[2].returncode != 0 and "nobody" in runs[2].stderr
    for run in runs:
        assert password not in run.stdout + run.stderr
    ledger = Ledger.open(postgres_url)
    try:
        export_jsonl(ledger, "secret", tmp_path / "export.jsonl")
        assert password not in (tmp_path / "export.jsonl").read_text()
        with ledger.engine.connect() as conn:
            for table in ("event", "campaign", "candidate", "lab_job", "observation", "score", "checkpoints",
                          "checkpoint_blobs", "checkpoint_writes"):
                dump = conn.execute(text(f"SELECT CAST(t AS text) FROM {table} AS t")).scalars().all()
                assert dump, table
                assert not any(password in row or password.encode().hex() in row for row in dump), table
    finally:
        ledger.close()


def test_a_missing_driver_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(LedgerError, match=r"pip install 'closedloop\[postgres\]'") as info:
        Ledger.open("postgresql://me:hunter2@127.0.0.1:1/nowhere")
    assert "hunter2" not in str(info.value)


def test_an_unreachable_server_is_reported_without_the_password():
    with pytest.raises(LedgerError, match="cannot open the ledger database") as info:
        Ledger.open("postgresql://me:hunter2@127.0.0.1:1/nowhere?connect_timeout=2")
    assert "hunter2" not in str(info.value) and "***" in str(info.value)


def test_a_postgres_ledger_written_before_the_chain_is_chained_by_the_migration(postgres_url):
    """Migration 0003 lifts the append-only trigger only to fill the hash column, and the chain it computes is the one
    live appends compute."""
    ledger = Ledger.open(postgres_url)
    ledger.append("c", started(), key="start")
    ledger.append("c", dispatched(1), key="d1")
    ledger.append("c", observed(1), key="o1")
    with ledger.engine.begin() as conn:
        original = conn.execute(text("SELECT seq, hash FROM event ORDER BY seq")).all()
        conn.execute(text("DROP TABLE ledger_note"))
        conn.execute(text("ALTER TABLE event DROP COLUMN hash"))
        conn.execute(text("UPDATE alembic_version SET version_num = '0002'"))
    ledger.close()
    ledger = Ledger.open(postgres_url)
    try:
        with ledger.engine.begin() as conn:
            assert conn.execute(text("SELECT seq, hash FROM event ORDER BY seq")).all() == original
        report = verify(ledger, "c")
        assert report.is_identical and report.notes[0].startswith("chained_by_migration (seq 1..3")
        with pytest.raises(DBAPIError, match="append-only"):
            with ledger.engine.begin() as conn:
                conn.execute(text("UPDATE event SET actor = 'mallory'"))
    finally:
        ledger.close()
