"""Lab experiments a campaign ran, apart from the past results it imported, for the readers of the campaign row.

The ledger's campaign row (``CampaignRow.n_lab``) counts every ``Observed`` event, and past results imported from a
CSV (``closedloop run --history``) are ``Observed`` events too, with provenance ``imported``. They are history, not
experiments this campaign ran: the lab budget does not count them and neither does ``summarise``. ``closedloop ls``,
the MCP tools and the dashboard show ``n_lab`` without them, and the imported ones beside it as ``n_imported``.

The count is one grouped query over the observation projection (the row is left as it is: changing what a
projection column means would make every stored ledger differ from its replay).

Example:
    >>> from orchestrator.ledger import Ledger
    >>> imported_counts(Ledger.open(":memory:"))
    {}
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.ledger import Ledger

__all__ = ["imported_counts", "lab_counts"]


def imported_counts(ledger: Ledger, campaign_id: str | None = None) -> dict[str, int]:
    """Imported past results per campaign id (campaigns without any are left out); only ``campaign_id``'s if given."""
    from sqlalchemy import func, select

    from orchestrator.ledger import ObservationRow

    table = ObservationRow.__table__
    query = (select(table.c.campaign_id, func.count())
             .where(table.c.is_lab, table.c.provenance == "imported")
             .group_by(table.c.campaign_id))
    if campaign_id is not None:
        query = query.where(table.c.campaign_id == campaign_id)
    with ledger.engine.connect() as connection:
        return {cid: int(n) for cid, n in connection.execute(query)}


def lab_counts(row: Any, imported: dict[str, int]) -> dict[str, int]:
    """``n_lab`` (lab results this campaign received, ok or failed) and ``n_imported`` of a campaign row, given
    ``imported_counts``."""
    n_imported = imported.get(row.id, 0)
    return {"n_lab": row.n_lab - n_imported, "n_imported": n_imported}
