"""survey: before the first plan, read the affordable proxy rungs over the whole design space (``ladder_view``)."""

from __future__ import annotations

from orchestrator.loop.context import CampaignContext
from orchestrator.loop.ladder_view import survey_items
from orchestrator.loop.state import CampaignState

__all__ = ["survey"]


def survey(state: CampaignState, ctx: CampaignContext) -> CampaignState:
    items = survey_items(ctx, state.get("iteration", 0))
    if items:
        ctx.ledger.append_many(ctx.campaign_id, items, actor="survey")
    return {}
