"""The append-only campaign ledger (SQLModel; SQLite by default, PostgreSQL by URL; Alembic migrations)."""

from .jsonl import ImportReport, LedgerImportError, export_jsonl, import_jsonl
from .store import Ledger, LedgerConflict, LedgerError, database_url, is_postgres_url, safe_url
from .tables import CampaignRow, CandidateRow, EventRow, LabJobRow, ObservationRow, ScoreRow
from .verify import VerifyReport, rebuild_projections, verify

__all__ = [
    "CampaignRow",
    "CandidateRow",
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
    "database_url",
    "export_jsonl",
    "import_jsonl",
    "is_postgres_url",
    "rebuild_projections",
    "safe_url",
    "verify",
]
