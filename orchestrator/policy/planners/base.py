"""What every planner arm sees and returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from vocabulary.domain import Proposal

if TYPE_CHECKING:
    from orchestrator.space.pool import Pool
    from orchestrator.spec import CampaignSpec

__all__ = ["Planner", "PlanningContext"]


@dataclass(frozen=True)
class PlanningContext:
    """The history a planner may use, as pool indices.

    ``observed`` and ``utilities`` are the lab results so far (utility: higher is better, whatever the objective's
    direction); ``values`` are the same results in the objective's unit, when known (a surrogate of a target
    objective models them). ``pending`` are dispatched jobs without results. ``available`` excludes tested, pending
    and already-rejected candidates.
    """

    spec: CampaignSpec
    pool: Pool
    iteration: int
    available: np.ndarray
    observed: np.ndarray
    utilities: np.ndarray
    pending: np.ndarray
    surrogate_state: dict[str, Any] | None
    seed: int
    recorder: Any = None
    """Where the llm arm looks up and records its model calls (``LLMCallRecorder``); None keeps them in memory."""
    values: np.ndarray | None = None
    """Lab values of ``observed`` in the objective's unit, in the same order; None when not known."""
    ladder: Any = None
    """The surveyed proxy rungs (``ladder_view.LadderView``: value per pool row), or None."""
    proposals_per_slot: int = 1
    """Proposals asked for per lab slot: more than one when the screen ranks them on a proxy rung's evidence
    (``n`` then counts ``slots × proposals_per_slot``)."""
    provenance: tuple[tuple[str, int, str], ...] | None = None
    """Per lab result in ``observed`` (same order): (arm, dispatch seq, source), source ``"pick"``, ``"anchor"``
    (bo's pick for an llm arm's slot) or ``"fallback"``; None when the caller does not track it (the llm arm then
    has no track record to split one-per-slot batches by, and its model chooses every proposal)."""


@runtime_checkable
class Planner(Protocol):
    """A planner arm: proposes ``n`` candidates from the available pool, deterministically for a given seed.

    Optional class attributes: ``uses_surrogate`` (the learn node fits the campaign's GP for it) and
    ``uses_ladder`` (the survey node reads affordable proxy rungs over the pool for it).
    """

    name: str

    def propose(self, context: PlanningContext, n: int) -> list[Proposal]: ...
