"""The append-only campaign ledger (SQLModel; SQLite by default, any SQLAlchemy URL otherwise)."""

from .store import Ledger, LedgerConflict, LedgerError, database_url
from .tables import CampaignRow, CandidateRow, EventRow, LabJobRow, ObservationRow, ScoreRow
from .verify import VerifyReport, rebuild_projections, verify

__all__ = [
    "CampaignRow",
    "CandidateRow",
    "EventRow",
    "LabJobRow",
    "Ledger",
    "LedgerConflict",
    "LedgerError",
    "ObservationRow",
    "ScoreRow",
    "VerifyReport",
    "database_url",
    "rebuild_projections",
    "verify",
]
