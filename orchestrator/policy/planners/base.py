"""What every planner arm sees, declares and returns.

Example:
    >>> class Shy:
    ...     name = "shy"
    ...     def propose(self, context, n): return []
    >>> planner_traits(Shy())
    PlannerTraits(uses_surrogate=False, uses_ladder=False, reads_provenance=False, records_llm_calls=False)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from vocabulary.domain import Proposal, SetupError

if TYPE_CHECKING:
    from orchestrator.space.pool import Pool
    from orchestrator.spec import CampaignSpec

__all__ = ["Planner", "PlannerTraits", "PlanningContext", "check_planner_ready", "planner_traits"]


@dataclass(frozen=True)
class PlannerTraits:
    """What a planner arm asks of the campaign, declared once (``Planner.traits``) and read when the campaign starts;
    the loop's nodes never sniff a planner's attributes. Every trait defaults to False: an arm that declares none
    gets the lab results and nothing else prepared for it.
    """

    uses_surrogate: bool = False
    """The learn node fits the campaign's GP for this arm (``PlanningContext.surrogate_state``)."""
    uses_ladder: bool = False
    """The survey node reads the affordable proxy rungs over the pool for this arm (``PlanningContext.ladder``)."""
    reads_provenance: bool = False
    """The plan node passes who proposed each lab result (``PlanningContext.provenance``)."""
    records_llm_calls: bool = False
    """The arm records its model calls in the ledger, and a re-run replays them (``PlanningContext.recorder``)."""


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
    """Where an arm that records its model calls (``PlannerTraits.records_llm_calls``) looks them up and records
    them (``LLMCallRecorder``); None: the arm's own recorder (the llm arm's default keeps them in memory)."""
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
    objective_values: np.ndarray | None = None
    """Several objectives: shape (len(observed), n_objectives), each objective's lab value in its unit, columns in
    ``spec.objective_list`` order; None for one objective. ``utilities`` then holds the scalar of the spec's
    trade-off (``vocabulary.pareto.tradeoff_utilities``) and ``values`` is None."""
    constraint_values: np.ndarray | None = None
    """Outcome constraints: shape (len(observed), n_constraints), values in their units, NaN where not measured;
    None without constraints."""
    failed: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=int))
    """Pool indices of the candidates whose failures the campaign learns from (each once)."""


@runtime_checkable
class Planner(Protocol):
    """A planner arm: proposes ``n`` candidates from the available pool, deterministically for a given seed.

    ``traits`` declares what the campaign prepares for the arm (``PlannerTraits``; read through ``planner_traits``,
    so an arm without it gets ``PlannerTraits()``). An arm may also define ``check_ready() -> None``, called once
    before anything is dispatched (``check_planner_ready``), which raises ``SetupError`` when the arm could never
    plan (the llm arm: a model that cannot be loaded).
    """

    name: str
    traits: PlannerTraits

    def propose(self, context: PlanningContext, n: int) -> list[Proposal]: ...


def planner_traits(planner: Any) -> PlannerTraits:
    """The traits ``planner`` declares (``planner.traits``); ``PlannerTraits()`` when it declares none.

    Raises:
        SetupError: ``planner.traits`` is not a ``PlannerTraits``.
    """
    traits = getattr(planner, "traits", None)
    if traits is None:
        return PlannerTraits()
    if not isinstance(traits, PlannerTraits):
        raise SetupError(
            f"planner arm {getattr(planner, 'name', type(planner).__name__)!r} declares traits={traits!r}, which is "
            f"not a PlannerTraits; declare `traits = PlannerTraits(uses_surrogate=..., uses_ladder=...)` "
            f"(from orchestrator.policy.planners import PlannerTraits), or leave it out for none"
        )
    return traits


def check_planner_ready(planner: Any) -> None:
    """Run ``planner.check_ready()`` where the arm defines it (before anything is dispatched); else do nothing.

    Raises:
        SetupError: the arm could never plan (what its ``check_ready`` raises), or its traits are malformed.
    """
    planner_traits(planner)
    check_ready = getattr(planner, "check_ready", None)
    if check_ready is not None:
        check_ready()
