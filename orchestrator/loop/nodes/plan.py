"""plan: size this iteration to the lab's free capacity, queue due retries first, split the remaining slots
between the main and control arms, and ask each arm for proposals.

The control is fair: every arm plans on the same state (the same available candidates, so neither plans from the
other's leftovers) and is asked for the same number of proposals per lab slot (``proposals_per_slot`` when the ladder
has a proxy rung for the screen to rank by, one otherwise). When two arms propose the same candidate, a coin seeded
by (campaign seed, iteration, candidate id) gives it to one of them and is recorded as ``ConflictSettled``; only the
winner's proposal is recorded, and the other arm fills its lab slots from its other proposals at the screen. A slot
the coin leaves without any proposal (one proposal per slot) is not offered to that arm this iteration, so losing the
coin is not scored as an abstention; the running share gives the slot back later.
"""

from __future__ import annotations

import logging

import numpy as np

from orchestrator.loop.context import CampaignContext
from orchestrator.loop.llm_calls import LedgerLLMRecorder
from orchestrator.loop.ruled_out import failed_for_good, held_after_denial
from orchestrator.loop.state import CampaignState
from orchestrator.policy.planners import PlanningContext
from orchestrator.seeding import derive_seed
from vocabulary.events import (
    ConflictSettled,
    PoolExtended,
    Proposed,
)

__all__ = ["allocate_slots", "lab_slots", "plan", "settle_conflicts", "slots_after_conflicts"]


logger = logging.getLogger(__name__)


def allocate_slots(n_dispatched: int, n_control_so_far: int, n_slots: int, control_share: float) -> int:
    """Control slots this batch so that the control arm's running share tracks ``control_share``.

    Example:
        >>> [allocate_slots(4 * i, i, 4, 0.25) for i in range(3)]
        [1, 1, 1]
    """
    target = int(np.floor(control_share * (n_dispatched + n_slots) + 0.5))
    return int(min(max(target - n_control_so_far, 0), n_slots))


def settle_conflicts(seed: int, iteration: int, wanted: dict[str, list[str]]) -> dict[str, tuple[list[str], str]]:
    """Who gets each candidate that more than one arm proposed in an iteration: candidate id -> (the arms that
    proposed it, in ``wanted``'s order, and the winner), decided by a fair coin seeded by (seed, iteration, candidate
    id), so a re-run settles every conflict the same way.

    Example:
        >>> settled = settle_conflicts(0, 1, {"bo": ["a", "b"], "random": ["b", "c"]})
        >>> list(settled), settled["b"][0], settled["b"][1] in ("bo", "random")
        (['b'], ['bo', 'random'], True)
    """
    claimants: dict[str, list[str]] = {}
    for arm, candidate_ids in wanted.items():
        for cid in dict.fromkeys(candidate_ids):
            claimants.setdefault(cid, []).append(arm)
    return {cid: (arms, arms[derive_seed(seed, iteration, "conflict", cid) % len(arms)])
            for cid, arms in claimants.items() if len(arms) > 1}


def _rejected_for_good(ctx: CampaignContext) -> set[str]:
    """Candidates validation rejected as invalid or out of space (not mere duplicates); never proposed again."""
    return ctx.view.proposals.rejected_for_good


def _provenance(ctx: CampaignContext, history) -> tuple[tuple[str, int, str], ...]:
    """Per lab result (``history.results`` order): (arm, dispatch seq, source), source ``"anchor"`` or
    ``"fallback"`` as its ``Proposed`` record says, else ``"pick"``."""
    sources = ctx.view.proposals.sources
    return tuple((arm, seq, sources.get((arm, cid), "pick"))
                 for (cid, arm, _, _), seq in zip(history.results, history.dispatched_seqs, strict=True))


def _grow_by_mutation(ctx: CampaignContext, iteration: int, history) -> list:
    """Open spaces: add edits of the best lab results so far (of the seed library before any) to the pool."""
    from orchestrator.policy.generation import neighbours
    from orchestrator.seeding import derive_seed

    pool, space = ctx.pool, ctx.spec.space
    if space.neighbours_per_iteration == 0:
        return []
    best_first = sorted(history.results, key=lambda r: -r[3])
    parents = [pool.get(r[0]) for r in best_first[:4]]
    if not parents:
        rng = np.random.default_rng(derive_seed(ctx.seed, iteration, "seed-parents"))
        parents = [pool.candidates[int(i)] for i in rng.choice(pool.seed_size or len(pool), size=min(4, len(pool)), replace=False)]
    found = neighbours(parents, space, n=space.neighbours_per_iteration, known=set(pool.ids),
                       seed=derive_seed(ctx.seed, iteration, "mutations"))
    added = pool.extend(found)
    return _extended(ctx, iteration, "mutation", added, history)


def _extended(ctx: CampaignContext, iteration: int, source: str, added: list, history) -> list:
    """The ``PoolExtended`` record of candidates that just joined an open space, with their novelty."""
    from orchestrator.policy.generation import novelty

    if not added:
        return []
    known = [ctx.pool.get(cid) for cid in history.tested] or ctx.pool.candidates[: ctx.pool.seed_size]
    payload = PoolExtended(iteration=iteration, source=source, candidates=[c.model_dump(mode="json") for c in added],
                           novelty=[novelty(c, known) for c in added])
    return [(payload, f"it{iteration}:pool-extended:{source}")]


def measured_matrices(spec, history) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(objective values, constraint values) of the lab results in ``history.results`` order, in their units (NaN
    where not measured): the first None for one objective, the second None without outcome constraints."""
    def matrix(properties: list[str]) -> np.ndarray:
        return np.asarray([[m.get(p, np.nan) for p in properties] for m in history.measured],
                          dtype=float).reshape(len(history.measured), len(properties))

    objectives = matrix([o.property for o in spec.objective_list]) if spec.is_multi_objective else None
    constraints = matrix([c.property for c in spec.constraints]) if spec.constraints else None
    return objectives, constraints


def lab_slots(ctx: CampaignContext) -> tuple[list[str], dict[str, int]]:
    """This iteration's retries (job keys, oldest first) and lab slots per arm, sized to the lab's free capacity and
    the budget left; the slots are before the conflicts are settled (``slots_after_conflicts``)."""
    spec = ctx.spec
    history = ctx.view.history()
    free = ctx.max_pending - len(history.pending)
    batch_size = ctx.view.batch_request.n or spec.planner.batch_size  # a person's `suggest(n)` sizes the next batch
    n_free = max(min(batch_size, free, spec.budget.lab_experiments - history.n_dispatched), 0)
    retries = [r.retry_key for r in ctx.view.pending_retries()][:n_free]
    n_slots = n_free - len(retries)
    control = spec.planner.control
    n_control = allocate_slots(history.n_dispatched, history.n_by_arm.get(control, 0), n_slots, spec.planner.control_share) if control else 0
    return retries, {spec.planner.main: n_slots - n_control, **({control: n_control} if control else {})}


def slots_after_conflicts(n_slots: int, n_proposed: int, n_lost: int) -> int:
    """An arm's lab slots once the coin has given ``n_lost`` of its proposals to another arm and ``n_proposed`` of
    them are recorded: a slot left without any proposal is not offered to the arm.

    Example:
        >>> slots_after_conflicts(2, 1, 1), slots_after_conflicts(2, 3, 1)
        (1, 2)
    """
    return n_slots - min(n_lost, max(n_slots - n_proposed, 0))


def plan(state: CampaignState, ctx: CampaignContext) -> CampaignState:
    iteration = state["iteration"]
    spec, pool = ctx.spec, ctx.pool
    history = ctx.view.history()
    retries, slots = lab_slots(ctx)
    n_slots = sum(slots.values())

    items = []
    generate = spec.space.generate
    if generate and n_slots > 0:
        items += _grow_by_mutation(ctx, iteration, history)
    excluded = (set(history.tested) | set(history.learned_failures) | _rejected_for_good(ctx) | failed_for_good(ctx)
                | held_after_denial(ctx, iteration))
    # By row, not by scanning every id: a streamed pool spells ids on demand.
    excluded_rows = [pool.index[cid] for cid in excluded if cid in pool.index]
    is_available = np.ones(len(pool), dtype=bool)
    is_available[np.asarray(excluded_rows, dtype=int)] = False
    available = np.flatnonzero(is_available)
    observed = np.asarray([pool.index[r[0]] for r in history.results], dtype=int)
    utilities = np.asarray([r[3] for r in history.results], dtype=float)
    values = np.asarray([r[2] for r in history.results], dtype=float)
    objective_values, constraint_values = measured_matrices(spec, history)
    if objective_values is not None:  # several objectives: single-number arms plan on the trade-off's scalar
        from vocabulary.pareto import tradeoff_utilities

        utilities, values = tradeoff_utilities(spec, objective_values), None
    failed = np.asarray([pool.index[cid] for cid in history.learned_failures if cid in pool.index], dtype=int)
    pending = np.asarray([pool.index[cid] for cid in history.pending], dtype=int)
    surrogate_state = ctx.view.fits.latest_state
    has_proxy = any(r.spec.proxy for r in ctx.rungs)

    # One state for every arm: the same available set (neither plans from the other's leftovers), and the same number
    # of proposals per lab slot (the screen's ranking then picks each arm's lab candidates among its own proposals).
    context = PlanningContext(
        spec=spec,
        pool=pool,
        iteration=iteration,
        available=available,
        observed=observed,
        utilities=utilities,
        values=values,
        pending=pending,
        surrogate_state=surrogate_state,
        seed=ctx.seed,
        recorder=LedgerLLMRecorder(ctx.ledger, ctx.campaign_id, iteration, known=ctx.view.calls.by_key),
        ladder=ctx.view.ladder,
        proposals_per_slot=spec.planner.proposals_per_slot if has_proxy else 1,
        provenance=(_provenance(ctx, history) if any(ctx.traits[arm].reads_provenance
                                                      for arm in ctx.arms if slots.get(arm, 0)) else None),
        objective_values=objective_values,
        constraint_values=constraint_values,
        failed=failed,
    )
    per_slot = context.proposals_per_slot
    proposals_by_arm: dict[str, list] = {}
    for arm in ctx.arms:
        if slots.get(arm, 0) == 0:
            continue
        planner = ctx.planners[arm]
        n_known = len(pool)
        proposals_by_arm[arm] = planner.propose(context, slots[arm] * per_slot)
        if generate:
            items += _extended(ctx, iteration, arm, pool.candidates[n_known:], history)

    conflicts = settle_conflicts(ctx.seed, iteration, {arm: [p.candidate.id for p in proposals]
                                                        for arm, proposals in proposals_by_arm.items()})
    for cid, (arms, winner) in conflicts.items():
        items.append((ConflictSettled(iteration=iteration, candidate_id=cid, arms=arms, winner=winner),
                      f"it{iteration}:conflict:{cid}"))
    proposed_ids: list[str] = []
    if generate:
        reference = [pool.get(cid) for cid in history.tested] or pool.candidates[: pool.seed_size]
    for arm, proposals in proposals_by_arm.items():
        n_lost = 0
        for proposal in proposals:
            cid = proposal.candidate.id
            if cid in conflicts and conflicts[cid][1] != arm:
                n_lost += 1
                continue  # the coin gave it to the other arm; this arm's other proposals compete for its slots
            novelty = None
            if generate:
                from orchestrator.policy.generation import novelty as novelty_of

                novelty = novelty_of(proposal.candidate, reference)
            proposed_ids.append(cid)
            payload = Proposed(
                iteration=iteration,
                arm=arm,  # the slot's arm: a registered arm may reuse a built-in planner class
                candidate_id=cid,
                candidate=proposal.candidate.model_dump(mode="json"),
                hypothesis=proposal.hypothesis,
                rationale=proposal.rationale,
                expected=proposal.expected,
                expected_sd=proposal.expected_sd,
                acquisition=proposal.acquisition,
                is_fallback=proposal.is_fallback,
                is_bo_pick=proposal.is_bo_pick,
                is_anchor=proposal.is_anchor,
                shown_position=proposal.shown_position,
                n_shown=proposal.n_shown,
                n_shown_bo_picks=proposal.n_shown_bo_picks,
                novelty=novelty,
                is_generated=generate and pool.index[cid] >= (pool.seed_size or len(pool)),
            )
            items.append((payload, f"it{iteration}:proposed:{arm}:{cid}"))
        # A slot the coin left without a proposal is not offered to the arm (it did not abstain); the running share
        # gives it back in a later iteration.
        slots[arm] = slots_after_conflicts(slots[arm], len(proposals) - n_lost, n_lost)
    ctx.ledger.append_many(ctx.campaign_id, items, actor="planner")
    logger.info("plan: iteration %d, %d proposal(s) for %d lab slot(s) (%s), %d retried job(s), %d of %d candidates "
                "still available", iteration, len(proposed_ids), n_slots,
                ", ".join(f"{arm} {n}" for arm, n in slots.items()) or "none", len(retries), len(available), len(pool))
    return {"proposed": proposed_ids, "slots": slots, "retries": retries}
