"""Where a campaign's graph stands, read from its ledger alone.

LangGraph's checkpoint says which node runs next and holds the graph state (ids and cursors); the ledger says what
every node has done. The checkpoint can be missing (only the database was copied, or the ledger was moved with
``ledger export`` / ``ledger import``) or behind the ledger (a power cut loses the newest checkpoints; a kill lands
between a node's commit and its checkpoint). The ledger is the truth, so ``Campaign.run`` checks the checkpoint
against it (``is_checkpoint_current``: every node stamps the ledger head it saw into the state, ``ledger_seq``) and,
when they disagree, puts the graph where the ledger says it is (``ledger_position``):

- the node that wrote the campaign's last event runs again, with the state it ran with. Every node is idempotent at
  its own position (its re-run computes the same events under the same keys, and finds them stored), so a node that
  had finished changes nothing, and one that was cut short finishes; the nodes after it that wrote nothing run again
  on the ledger they saw the first time.
- that state is rebuilt from the iteration's own events (proposals, rejections, the screen's promotions, the
  approval) and, for what only the plan node knew (its retries and lab slots, and whether the iteration planned at
  all or drained the lab), from the ledger as it stood when the iteration began: its events up to there, replayed into
  an in-memory ledger, asked the plan and decide nodes' own questions (``lab_slots``, ``verdict``).

Example:
    >>> from vocabulary.events import Event
    >>> e = Event(campaign_id="c", seq=9, type="Screened", schema_version=1, payload={"iteration": 3, "steps": []},
    ...           idempotency_key="c:it3:screened", actor="screen", at="2026-01-01T00:00:00Z")
    >>> step_of(e)
    ('screen', 3)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from orchestrator.loop.context import CampaignContext
from orchestrator.loop.jobs import parse_job_key
from orchestrator.loop.nodes.decide import verdict
from orchestrator.loop.nodes.plan import lab_slots, slots_after_conflicts
from orchestrator.loop.state import CampaignState
from vocabulary.domain import SetupError
from vocabulary.events import CampaignStarted, Event, LabBudgetChanged

__all__ = ["LedgerPosition", "is_checkpoint_current", "ledger_position", "step_of"]

ITERATION_NODES = ("plan", "validate", "screen", "approve", "dispatch", "observe", "recover", "reward", "learn")
"""The nodes of one iteration that write events, in the order they run; an iteration that drains the lab starts at
``observe``. (``survey`` runs once before the first; ``decide`` writes only when the campaign stops.)"""
_PLAN_PHASE = ITERATION_NODES[:5]

_NODE_OF_TYPE = {
    "RungSurveyed": "survey",
    "Proposed": "plan", "ConflictSettled": "plan", "PoolExtended": "plan",
    "Screened": "screen", "Simulated": "screen", "Promoted": "screen",
    "ApprovalRequested": "approve", "Approved": "approve",
    "Dispatched": "dispatch",
    "Observed": "observe",
    "SlotsOffered": "reward", "RewardEstimated": "reward", "RewardFinalised": "reward", "RungsValidated": "reward",
    "RungValidated": "reward", "Scored": "reward",
    "RungsAssessed": "learn", "RungAssessed": "learn", "ArmsCompared": "learn", "SurrogateUpdated": "learn",
    "CampaignStopped": "decide",
}
_OUTSIDE_ACTORS = ("importer", "replay", "recompute:")
"""Actors of events written outside the graph: a history import, a what-if's copied model calls, a reward
recompute."""
_OUTSIDE_KEY = "env-"
"""The key prefix (after any ``it<n>:``) of records an RL environment step writes between the graph's runs: its
``env-step:`` and a tool's rung read ``it<n>:env-rung:`` (a ``Simulated`` that no screen node wrote), whose actor
``policy:env`` a graph node's (``policy:auto``, ``policy:<failure policy>``) does not tell apart."""


def step_of(event: Event) -> tuple[str, int] | None:
    """(the node that wrote ``event``, its iteration), or None for an event written outside the graph (the start,
    a budget change, an import, a person's verdict, a recompute, an environment step or its tool's rung read)."""
    if event.actor.startswith(_OUTSIDE_ACTORS):
        return None
    payload, kind = event.payload, event.type
    key = event.idempotency_key.removeprefix(f"{event.campaign_id}:")
    if key.startswith(_OUTSIDE_KEY) or key.partition(":")[2].startswith(_OUTSIDE_KEY):
        return None
    if kind == "Promoted" and event.actor == "validator":  # ledgers before the screen's Promoted records
        node = "validate"
    elif kind == "Rejected":
        node = {"validate": "validate", "approve": "approve", "dispatch": "dispatch"}.get(payload.get("stage"))
    elif kind == "FailureHandled":
        node = "approve" if key.startswith("denied:") else "recover"
    elif kind == "LLMCall":
        node = "reward" if key.startswith("judge:") else "plan"
    else:
        node = _NODE_OF_TYPE.get(kind)
    if node is None:
        return None
    if node == "decide":
        return node, -1
    iteration = payload.get("observe_iteration") if kind == "Observed" else None
    if iteration is None:
        iteration = payload.get("iteration")
    return (node, int(iteration)) if isinstance(iteration, int) else None


def _tail(ledger: Any, campaign_id: str, head: int) -> Iterator[tuple[Event, tuple[str, int]]]:
    """The campaign's node events, newest first (read in growing windows from the end)."""
    upper, size = head, 16
    while upper > 0:
        lower = max(upper - size, 0)
        window = [e for e in ledger.events(campaign_id, after_seq=lower) if e.seq <= upper]
        for event in reversed(window):
            step = step_of(event)
            if step is not None:
                yield event, step
        upper, size = lower, size * 8


def is_checkpoint_current(ledger: Any, campaign_id: str, values: dict[str, Any], next_nodes: tuple[str, ...]) -> bool:
    """Whether the checkpoint (its state ``values`` and the nodes it runs ``next``) agrees with the ledger.

    It does when it has seen every node event and no event the ledger lacks (``ledger_seq`` between the last node
    event and the head), or when it waits before the node that wrote the last events, having seen everything before
    them (that node was cut short after a commit, or waits on a person).
    """
    head = ledger.head_seq(campaign_id)
    tail = _tail(ledger, campaign_id, head)
    last = next(tail, None)
    if not values:
        return last is None
    stamp = values.get("ledger_seq")
    if not isinstance(stamp, int) or stamp > head:
        return False
    if last is None or stamp >= last[0].seq:
        return True
    node, iteration = last[1]
    if next_nodes != (node,) or values.get("iteration") != iteration:
        return False
    before = next((event for event, step in tail if step != last[1]), None)
    return stamp >= (before.seq if before is not None else 0)


@dataclass(frozen=True)
class LedgerPosition:
    """Where the ledger puts the graph: ``node`` runs next, with ``state``; ``as_node`` is the node the state is
    recorded as coming from (LangGraph's ``update_state``), so the graph's edges lead to ``node``."""

    node: str
    as_node: str
    state: CampaignState


def ledger_position(ctx: CampaignContext) -> LedgerPosition | None:
    """The graph's position by the ledger alone; None when no node has written anything yet (start afresh).

    Raises:
        SetupError: the campaign has stopped (there is no position to resume from).
    """
    cid = ctx.campaign_id
    events = ctx.ledger.events(cid)
    steps = [(event, step) for event in events if (step := step_of(event)) is not None]
    if not steps:
        return None
    node, iteration = steps[-1][1]
    if node == "decide":
        raise SetupError(f"campaign {cid!r} has stopped; there is nothing to resume")
    before = next((e for e, s in reversed(steps) if s != (node, iteration)), None)
    seen = before.seq if before is not None else 0  # the rebuilt checkpoint has seen everything before the node
    base: dict[str, Any] = {"campaign_id": cid, "iteration": iteration, "is_done": False, "ledger_seq": seen}
    if node == "survey":
        return LedgerPosition("survey", "__start__", base)
    mine = [e for e, s in steps if s[1] == iteration and s[0] in ITERATION_NODES]
    by_type: dict[str, list[dict]] = {}
    for event in mine:
        by_type.setdefault(event.type, []).append(event.payload)
    plans = node in _PLAN_PHASE or any(s[0] in _PLAN_PHASE for e, s in steps if s[1] == iteration)
    resets = {"proposed": [], "valid": [], "promoted": [], "job_keys": [], "slots": {}, "retries": []}
    if node == "plan":
        return LedgerPosition("plan", "decide", {**base, **resets, "next_node": "plan"})
    start = min(e.seq for e in mine)  # the iteration's first event: what came before is what its plan saw
    planned_on = _ledger_before(ctx, [e for e in events if e.seq < start])
    try:
        if not plans and iteration > 0:  # iteration 0 always plans; a later one drains when decide said so
            previous = {"iteration": iteration - 1,
                        "proposed": [e.payload["candidate_id"] for e, s in steps
                                     if s == ("plan", iteration - 1) and e.type == "Proposed"],
                        "retries": [k for e, s in steps if s == ("approve", iteration - 1)
                                    and e.type == "ApprovalRequested" for k in e.payload["job_keys"]
                                    if parse_job_key(cid, k)[1] > 1]}
            plans = verdict(previous, planned_on, planned_on.view.history())[1] != "observe"
        if not plans and iteration > 0:  # draining the lab: decide sent the loop to observe with everything reset
            as_node = "decide" if node == "observe" else ITERATION_NODES[ITERATION_NODES.index(node) - 1]
            return LedgerPosition(node, as_node, {**base, **resets, "next_node": "observe"})
        retries, slots = lab_slots(planned_on)
    finally:
        planned_on.ledger.close()
    state = {**base, **resets, "next_node": "plan", "retries": retries,
             **_after_plan(by_type, slots, list(ctx.arms), ITERATION_NODES.index(node))}
    return LedgerPosition(node, ITERATION_NODES[ITERATION_NODES.index(node) - 1], state)


def _after_plan(by_type: dict[str, list[dict]], slots: dict[str, int], arms: list[str], at: int) -> dict[str, Any]:
    """The state fields the iteration's nodes before the one at index ``at`` of ``ITERATION_NODES`` returned, from
    the iteration's events (``by_type``) and the plan's lab slots before its conflicts were settled."""
    proposals = by_type.get("Proposed", [])
    proposed = [p["candidate_id"] for p in proposals]
    slots = dict(slots)
    for arm in arms:  # as the plan node: each arm asked for proposals gives up the slots the coin left empty
        if slots.get(arm, 0):
            n_lost = sum(arm in c["arms"] and c["winner"] != arm for c in by_type.get("ConflictSettled", []))
            slots[arm] = slots_after_conflicts(slots[arm], sum(p["arm"] == arm for p in proposals), n_lost)
    fields: dict[str, Any] = {"proposed": proposed, "slots": slots}
    if at > ITERATION_NODES.index("validate"):
        rejected = {r["candidate_id"] for r in by_type.get("Rejected", []) if r.get("stage") == "validate"}
        fields["valid"] = [cid for cid in proposed if cid not in rejected]
    if at > ITERATION_NODES.index("screen"):
        fields["promoted"] = [step["candidate_id"] for screened in by_type.get("Screened", [])
                              for step in screened["steps"] if step.get("kind") == "promoted"
                              and step.get("to_rung") == "lab" and step.get("decision") == "promote"]
    if at > ITERATION_NODES.index("approve"):
        fields["job_keys"] = [k for approved in by_type.get("Approved", []) for k in approved["job_keys"]]
    return fields


def _ledger_before(ctx: CampaignContext, events: list[Event]) -> CampaignContext:
    """A copy of ``ctx`` whose ledger is an in-memory replay of ``events`` (a prefix of the campaign's) and whose
    spec has the lab budget in force at its end. The caller closes its ledger."""
    from orchestrator.ledger import Ledger

    prefix = len(ctx.campaign_id) + 1
    scratch = Ledger.open(":memory:")
    try:
        scratch.append_many(ctx.campaign_id, [
            (e.typed(), e.idempotency_key[prefix:], e.actor, e.at if e.at.tzinfo else e.at.replace(tzinfo=UTC))
            for e in events])
    except BaseException:
        scratch.close()
        raise
    spec = ctx.spec
    budgets = [e.payload["lab_experiments"] for e in events if e.type == LabBudgetChanged.type]
    started = [e.payload["spec"]["budget"]["lab_experiments"] for e in events if e.type == CampaignStarted.type]
    budget = budgets[-1] if budgets else started[0] if started else spec.budget.lab_experiments
    if budget != spec.budget.lab_experiments:
        spec = spec.model_copy(update={"budget": spec.budget.model_copy(update={"lab_experiments": budget})})
    from orchestrator.loop.view import CampaignView

    view = CampaignView(scratch, ctx.campaign_id, spec, ctx.pool, ctx.rungs)
    view.refresh()
    return dataclasses.replace(ctx, ledger=scratch, spec=spec, view=view)
