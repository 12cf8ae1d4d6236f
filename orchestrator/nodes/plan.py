"""plan: size this iteration to the lab's free capacity, queue due retries first, split the remaining slots
between the main and control arms, and ask each arm for proposals."""

from __future__ import annotations

import numpy as np

from ..context import CampaignContext
from ..events import PoolExtended, Proposed, Rejected, SurrogateUpdated
from ..history import lab_history, pending_retries
from ..llm_calls import LedgerLLMRecorder
from ..planners import PlanningContext
from ..state import CampaignState

__all__ = ["allocate_slots", "plan"]


def allocate_slots(n_dispatched: int, n_control_so_far: int, n_slots: int, control_share: float) -> int:
    """Control slots this batch so that the control arm's running share tracks ``control_share``.

    Example:
        >>> [allocate_slots(4 * i, i, 4, 0.25) for i in range(3)]
        [1, 1, 1]
    """
    target = int(np.floor(control_share * (n_dispatched + n_slots) + 0.5))
    return int(min(max(target - n_control_so_far, 0), n_slots))


def _latest_surrogate_state(ctx: CampaignContext) -> dict | None:
    events = ctx.ledger.events(ctx.campaign_id, types=[SurrogateUpdated.type])
    for event in reversed(events):
        if event.payload["hyperparameters"]:
            return event.payload["hyperparameters"]
    return None


def _rejected_for_good(ctx: CampaignContext) -> set[str]:
    """Candidates validation rejected as invalid or out of space (not mere duplicates); never proposed again."""
    events = ctx.ledger.events(ctx.campaign_id, types=[Rejected.type])
    return {e.payload["candidate_id"] for e in events if e.payload["candidate_id"] and "duplicate" not in e.payload["reason"]}


def _grow_by_mutation(ctx: CampaignContext, iteration: int, history) -> list:
    """Open spaces: add edits of the best lab results so far (of the seed library before any) to the pool."""
    from ..generation import neighbours
    from ..seeding import derive_seed

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
    from ..generation import novelty

    if not added:
        return []
    known = [ctx.pool.get(cid) for cid in history.tested] or ctx.pool.candidates[: ctx.pool.seed_size]
    payload = PoolExtended(iteration=iteration, source=source, candidates=[c.model_dump(mode="json") for c in added],
                           novelty=[novelty(c, known) for c in added])
    return [(payload, f"it{iteration}:pool-extended:{source}")]


def plan(state: CampaignState, ctx: CampaignContext) -> CampaignState:
    iteration = state["iteration"]
    spec, pool = ctx.spec, ctx.pool
    history = lab_history(ctx)
    free = ctx.max_pending - len(history.pending)
    n_free = max(min(spec.planner.batch_size, free, spec.budget.lab_experiments - history.n_dispatched), 0)
    retries = [r.retry_key for r in pending_retries(ctx)][:n_free]
    n_slots = n_free - len(retries)
    control = spec.planner.control
    n_control = allocate_slots(history.n_dispatched, history.n_by_arm.get(control, 0), n_slots, spec.planner.control_share) if control else 0
    slots = {spec.planner.main: n_slots - n_control, **({control: n_control} if control else {})}

    items = []
    generate = spec.space.generate
    if generate and n_slots > 0:
        items += _grow_by_mutation(ctx, iteration, history)
    excluded = set(history.tested) | _rejected_for_good(ctx)
    available = np.asarray([i for i, cid in enumerate(pool.ids) if cid not in excluded], dtype=int)
    observed = np.asarray([pool.index[r[0]] for r in history.results], dtype=int)
    utilities = np.asarray([r[3] for r in history.results], dtype=float)
    values = np.asarray([r[2] for r in history.results], dtype=float)
    pending = np.asarray([pool.index[cid] for cid in history.pending], dtype=int)
    surrogate_state = _latest_surrogate_state(ctx)
    has_proxy = any(r.spec.proxy for r in ctx.rungs)

    proposed_ids: list[str] = []
    for arm in ctx.arms:
        if slots.get(arm, 0) == 0:
            continue
        n_wanted = slots[arm] * (spec.planner.proposals_per_slot if arm == spec.planner.main and has_proxy else 1)
        taken = {pool.index[cid] for cid in proposed_ids}
        context = PlanningContext(
            spec=spec,
            pool=pool,
            iteration=iteration,
            available=np.asarray([i for i in available if i not in taken], dtype=int),
            observed=observed,
            utilities=utilities,
            values=values,
            pending=pending,
            surrogate_state=surrogate_state,
            seed=ctx.seed,
            recorder=LedgerLLMRecorder(ctx.ledger, ctx.campaign_id, iteration),
        )
        planner = ctx.planners[arm]
        if hasattr(planner, "recorder"):  # the llm arm records (and on a re-run, replays) its calls in the ledger
            planner.recorder = context.recorder
        n_known = len(pool)
        proposals = planner.propose(context, n_wanted)
        if generate:
            items += _extended(ctx, iteration, arm, pool.candidates[n_known:], history)
            reference = [pool.get(cid) for cid in history.tested] or pool.candidates[: pool.seed_size]
        for proposal in proposals:
            cid = proposal.candidate.id
            novelty = None
            if generate:
                from ..generation import novelty as novelty_of

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
                acquisition=proposal.acquisition,
                is_fallback=proposal.is_fallback,
                is_bo_pick=proposal.is_bo_pick,
                novelty=novelty,
                is_generated=generate and pool.index[cid] >= (pool.seed_size or len(pool)),
            )
            items.append((payload, f"it{iteration}:proposed:{arm}:{cid}"))
    ctx.ledger.append_many(ctx.campaign_id, items, actor="planner")
    return {"proposed": proposed_ids, "slots": slots, "retries": retries}
