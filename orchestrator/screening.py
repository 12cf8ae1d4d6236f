"""Running one rung on a batch of candidates: through the result cache and the configured executor."""

from __future__ import annotations

from collections.abc import Sequence

from .context import CampaignContext, Rung
from .domain import Observation

__all__ = ["run_rung"]


def run_rung(ctx: CampaignContext, rung: Rung, candidates: Sequence) -> list[Observation]:
    """One observation per candidate, in order."""
    if not candidates:
        return []
    return rung.simulator.evaluate(list(candidates))
