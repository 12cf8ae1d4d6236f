"""The append-only campaign ledger (SQLModel; SQLite by default, PostgreSQL by URL; Alembic migrations).

Owns: the store, its tables, the hash chain, verify, projections, JSONL import/export and ``migrations/``.
May import: vocabulary only (and the card). Every other floor reads and writes through it."""

from orchestrator.ledger.chain import GENESIS, ChainBreak, event_hash, first_break
from orchestrator.ledger.errors import LedgerFull, LedgerNeedsMigration, LedgerTooNew
from orchestrator.ledger.integrity import (
    CorruptDatabase,
    UnreadableDatabase,
    check_sqlite_file,
)
from orchestrator.ledger.jsonl import (
    ImportReport,
    LedgerImportError,
    export_jsonl,
    import_jsonl,
)
from orchestrator.ledger.store import (
    Ledger,
    LedgerConflict,
    LedgerError,
    database_url,
    is_postgres_url,
    is_url,
    safe_url,
    sqlite_file,
)
from orchestrator.ledger.tables import (
    CampaignRow,
    CandidateRow,
    EventRow,
    LabJobRow,
    LedgerNoteRow,
    ObservationRow,
    ScoreRow,
)
from orchestrator.ledger.verify import VerifyReport, rebuild_projections, verify

__all__ = [
    "CampaignRow",
    "CandidateRow",
    "ChainBreak",
    "CorruptDatabase",
    "EventRow",
    "GENESIS",
    "ImportReport",
    "LabJobRow",
    "Ledger",
    "LedgerConflict",
    "LedgerError",
    "LedgerFull",
    "LedgerImportError",
    "LedgerNeedsMigration",
    "LedgerNoteRow",
    "LedgerTooNew",
    "ObservationRow",
    "ScoreRow",
    "UnreadableDatabase",
    "VerifyReport",
    "check_sqlite_file",
    "database_url",
    "event_hash",
    "export_jsonl",
    "first_break",
    "import_jsonl",
    "is_postgres_url",
    "is_url",
    "rebuild_projections",
    "safe_url",
    "sqlite_file",
    "verify",
]
