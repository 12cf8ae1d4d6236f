"""The append-only campaign ledger (SQLModel; SQLite by default, PostgreSQL by URL; Alembic migrations)."""

from .integrity import CorruptDatabase, check_sqlite_file
from .jsonl import ImportReport, LedgerImportError, export_jsonl, import_jsonl
from .store import Ledger, LedgerConflict, LedgerError, database_url, is_postgres_url, safe_url
from .tables import CampaignRow, CandidateRow, EventRow, LabJobRow, ObservationRow, ScoreRow
from .verify import VerifyReport, rebuild_projections, verify

__all__ = [
    "CampaignRow",
    "CandidateRow",
    "CorruptDatabase",
    "EventRow",
    "ImportReport",
    "LabJobRow",
    "Ledger",
    "LedgerConflict",
    "LedgerError",
    "LedgerImportError",
    "ObservationRow",
    "ScoreRow",
    "VerifyReport",
    "check_sqlite_file",
    "database_url",
    "export_jsonl",
    "import_jsonl",
    "is_postgres_url",
    "rebuild_projections",
    "safe_url",
    "verify",
]
