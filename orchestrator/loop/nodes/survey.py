"""survey: before the first plan, read the affordable proxy rungs over the whole design space (``ladder_view``).

A survey of a computed rung can take minutes (FreeSolv's xtb over 642 molecules), so it reports its progress on the
graph's ``custom`` stream as it goes: ``{"type": "survey_progress", "rung", "simulator", "label", "n_done",
"n_total"}`` (``label`` reads "surveying 642 molecules with xtb"). ``Campaign.run(on_progress=...)`` hears them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from orchestrator.loop.context import CampaignContext, Rung
from orchestrator.loop.ladder_view import survey_items
from orchestrator.loop.screening import reporting_progress
from orchestrator.loop.state import CampaignState

__all__ = ["survey", "survey_label"]

logger = logging.getLogger(__name__)

_NOUNS = {"molecule": "molecules", "material": "materials", "conditions": "conditions"}


def survey_label(kind: str, n_candidates: int, simulator: str) -> str:
    """What a survey is doing, in words.

    Example:
        >>> survey_label("molecule", 642, "xtb")
        'surveying 642 molecules with xtb'
    """
    return f"surveying {n_candidates} {_NOUNS.get(kind, 'candidates')} with {simulator}"


def _stream_writer() -> Callable[[Any], None]:
    """The graph's custom stream writer; a no-op outside a graph run (a node called directly, in a test)."""
    try:
        from langgraph.config import get_stream_writer

        return get_stream_writer()
    except (ImportError, RuntimeError):
        return lambda _chunk: None


def survey(state: CampaignState, ctx: CampaignContext) -> CampaignState:
    write = _stream_writer()
    kind = ctx.spec.campaign.kind

    def report(rung: Rung, n_done: int, n_total: int) -> None:
        write({"type": "survey_progress", "rung": rung.name, "simulator": rung.spec.simulator,
               "label": survey_label(kind, n_total, rung.spec.simulator), "n_done": n_done, "n_total": n_total})

    with reporting_progress(report):
        items = survey_items(ctx, state.get("iteration", 0))
    for payload, _key in items:
        logger.info("survey: rung %r read %d %s (%d failed) for %.1f s of compute", payload.rung,
                    payload.n_candidates, _NOUNS.get(kind, "candidates"), payload.n_failed, payload.cost_s)
    if items:
        ctx.ledger.append_many(ctx.campaign_id, items, actor="survey")
    return {}
