"""Read-side helpers for callers outside the graph (the environment, reports, tests): what the campaign's view says
has happened, brought up to date first. Nodes read ``ctx.view`` directly; the graph refreshes it before each node."""

from __future__ import annotations

from orchestrator.loop.context import CampaignContext
from orchestrator.loop.view import LabHistory
from vocabulary.events import FailureHandled

__all__ = ["LabHistory", "lab_history", "pending_retries"]


def lab_history(ctx: CampaignContext) -> LabHistory:
    """The lab so far (``LabHistory``), with every recorded event folded in."""
    ctx.view.refresh()
    return ctx.view.history()


def pending_retries(ctx: CampaignContext) -> list[FailureHandled]:
    """Retries decided but not yet dispatched, oldest first, with every recorded event folded in."""
    ctx.view.refresh()
    return ctx.view.pending_retries()
