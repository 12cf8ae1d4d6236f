"""What callers outside the graph (the environment's tools) read of the rung results: the view's fold
(``view.rungs.RungResults``: first proxy value per candidate, compute seconds per iteration), brought up to date."""

from __future__ import annotations

from orchestrator.loop.context import CampaignContext
from orchestrator.loop.view.rungs import RungResults

__all__ = ["RungResults", "rung_digest"]


def rung_digest(ctx: CampaignContext) -> RungResults:
    """The campaign's rung results with every recorded event folded in."""
    ctx.view.refresh()
    return ctx.view.rungs
