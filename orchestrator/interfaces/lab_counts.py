"""Lab experiments a campaign ran, apart from the past results it imported, for the readers of the campaign row.

The ledger's campaign row (``CampaignRow.n_lab``) counts every ``Observed`` event, and past results imported from a
CSV (``closedloop run --history``) are ``Observed`` events too, with provenance ``imported``. They are history, not
experiments this campaign ran: the lab budget does not count them and neither does ``summarise``. ``closedloop ls``,
the MCP tools and the dashboard show ``n_lab`` without them, the imported ones beside it as ``n_imported``, and the
best value (``campaign_counts``) of the campaign's own lab results, as ``summarise`` reports it per arm (the row's
best counts the history too).

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

__all__ = ["campaign_counts", "imported_counts", "lab_counts"]


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


def campaign_counts(ledger: Ledger, row: Any, imported: dict[str, int]) -> dict[str, Any]:
    """``lab_counts`` of a campaign row and the best of its own lab results (``best_value``, ``best_candidate_id``):
    the row's own where nothing was imported, else one query over the campaign's non-imported lab results (the
    first to reach the best utility, as the row keeps it)."""
    counts: dict[str, Any] = lab_counts(row, imported)
    if not counts["n_imported"]:
        return {**counts, "best_value": row.best_value, "best_candidate_id": row.best_candidate_id}
    import json

    from sqlalchemy import or_, select

    from orchestrator.ledger import ObservationRow
    from vocabulary.domain import objective_utility

    objective = json.loads(row.objective or "{}")
    table = ObservationRow.__table__
    query = (select(table.c.candidate_id, table.c.value)
             .where(table.c.campaign_id == row.id, table.c.is_lab, table.c.status == "ok",
                    table.c.value.is_not(None), or_(table.c.provenance.is_(None), table.c.provenance != "imported"))
             .order_by(table.c.seq))
    best, best_utility = (None, None), None
    with ledger.engine.connect() as connection:
        for candidate_id, value in connection.execute(query):
            utility = objective_utility(objective.get("direction", "maximize"), value, objective.get("target"))
            if best_utility is None or utility > best_utility:
                best, best_utility = (value, candidate_id), utility
    return {**counts, "best_value": best[0], "best_candidate_id": best[1]}
