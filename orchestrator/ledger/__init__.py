"""The append-only campaign ledger (SQLModel; SQLite by default, PostgreSQL by URL; Alembic migrations)."""

from .chain import GENESIS, ChainBreak, event_hash, first_break
from .integrity import CorruptDatabase, check_sqlite_file
from .jsonl import ImportReport, LedgerImportError, export_jsonl, import_jsonl
from .store import Ledger, LedgerConflict, LedgerError, database_url, is_postgres_url, safe_url
from .tables import CampaignRow, CandidateRow, EventRow, LabJobRow, LedgerNoteRow, ObservationRow, ScoreRow
from .verify import VerifyReport, rebuild_projections, verify

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
    "LedgerImportError",
    "LedgerNoteRow",
    "ObservationRow",
    "ScoreRow",
    "VerifyReport",
    "check_sqlite_file",
    "database_url",
    "event_hash",
    "export_jsonl",
    "first_break",
    "import_jsonl",
    "is_postgres_url",
    "rebuild_projections",
    "safe_url",
    "verify",
]
