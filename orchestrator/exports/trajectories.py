"""Trajectories as the ledger recorded them: one record per trajectory, with its steps, scores and rewards.

This is the native export (``trajectories.jsonl``); the trainer formats are views of it. It reads stored records
only (the current reward record of each trajectory, with the criterion scores it carries, or in older ledgers the
current ``Scored`` event of each criterion and step); it never rescores.

Several objectives (or outcome constraints): a record's ``lab`` also carries ``values``, every property the lab
measured for that result by name (the first objective's ``value`` among them), and its prompt names every objective
and the size of the measured front instead of one best value. One objective: records are what they were.

Example:
    >>> from orchestrator.ledger import Ledger
    >>> from vocabulary.events import CampaignStarted
    >>> ledger = Ledger.open(":memory:")
    >>> _ = ledger.append("c1", CampaignStarted(name="demo", seed=0, spec={}), key="started")
    >>> trajectory_records(ledger, "c1")
    []
"""

from __future__ import annotations

import json
from collections import defaultdict
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from orchestrator.ledger import Ledger, LedgerError
from vocabulary.events import SCHEMA_VERSION, CampaignStarted

__all__ = ["TRAJECTORY_SCHEMA_VERSION", "completion_text", "prompt_text", "trajectory_records"]

TRAJECTORY_SCHEMA_VERSION = 1


def _closedloop_version() -> str:
    try:
        return version("closedloop")
    except PackageNotFoundError:
        return "unknown"


def _goal(objective: dict[str, Any]) -> str:
    unit = f" {objective['unit']}" if objective.get("unit") else ""
    direction = objective.get("direction", "?")
    prop = objective.get("property", "the objective")
    if direction == "target":
        return f"bring {prop} to {objective.get('target')} ± {objective.get('tolerance')}{unit}"
    return f"{direction} {prop} ({unit.strip() or 'objective units'})"


def prompt_text(spec: dict[str, Any], iteration: int, n_lab: int, best: float | None, *,
                n_front: int | None = None) -> str:
    """The task a planner faced at one iteration, in words: objective, design space and lab progress so far.

    A spec with several objectives (``objectives`` in its JSON) names every one, and ``n_front`` (the results on the
    measured Pareto front) replaces the best value.

    Example:
        >>> spec = {"campaign": {"name": "d", "kind": "conditions"},
        ...         "objectives": [{"property": "a", "direction": "maximize"},
        ...                        {"property": "b", "direction": "minimize", "unit": "nm"}]}
        >>> prompt_text(spec, 2, 4, None, n_front=3)  # doctest: +NORMALIZE_WHITESPACE
        'Campaign d: propose one conditions from the design space to maximize a (objective units) and minimize b
        (nm), trading them off on a Pareto front. Iteration 2; 4 lab results so far; 3 on the Pareto front so far.
        Answer with the candidate, a hypothesis and a rationale.'
    """
    campaign = spec.get("campaign", {})
    objectives = spec.get("objectives") or []
    if len(objectives) > 1:
        method = (spec.get("tradeoff") or {}).get("method") or "pareto"
        how = {"pareto": "trading them off on a Pareto front", "desirability": "combined as a desirability",
               "weighted_sum": "combined as a weighted sum"}.get(method, method)
        goals = " and ".join(_goal(o) for o in objectives)
        return (f"Campaign {campaign.get('name', '?')}: propose one {campaign.get('kind', 'candidate')} from the "
                f"design space to {goals}, {how}. Iteration {iteration}; {n_lab} lab results so far; "
                f"{n_front or 0} on the Pareto front so far. Answer with the candidate, a hypothesis and a rationale.")
    objective = spec.get("objective", {})
    unit = f" {objective['unit']}" if objective.get("unit") else ""
    direction = objective.get("direction", "?")
    prop = objective.get("property", "the objective")
    goal = (f"bring {prop} to {objective.get('target')} ± {objective.get('tolerance')}{unit}"
            if direction == "target" else f"{direction} {prop} ({unit.strip() or 'objective units'})")
    campaign = spec.get("campaign", {})
    best_text = "none yet" if best is None else f"{best:g}{unit}"
    return (f"Campaign {campaign.get('name', '?')}: propose one {campaign.get('kind', 'candidate')} from the design "
            f"space to {goal}. "
            f"Iteration {iteration}; {n_lab} lab results so far; best so far: {best_text}. "
            "Answer with the candidate, a hypothesis and a rationale.")


def completion_text(proposal: dict[str, Any] | None) -> str:
    """The planner's recorded answer, as JSON text (candidate, hypothesis, rationale, expected); '' if none."""
    if proposal is None:
        return ""
    candidate = proposal["candidate"]
    label = candidate.get("smiles") or candidate.get("formula") or candidate.get("values") or proposal["candidate_id"]
    return json.dumps({"candidate": label, "hypothesis": proposal["hypothesis"], "rationale": proposal["rationale"],
                       "expected": proposal["expected"]}, ensure_ascii=False, sort_keys=True)


def trajectory_records(ledger: Ledger, campaign_id: str) -> list[dict[str, Any]]:
    """Every rewarded trajectory of a campaign, in the order its first reward was recorded.

    Raises:
        LedgerError: the campaign is not in the ledger.
    """
    events = ledger.events(campaign_id)
    started = [e for e in events if e.type == CampaignStarted.type]
    if not started:
        raise LedgerError(f"campaign {campaign_id!r} is not in {ledger.url}; campaigns there: "
                          f"{ledger.campaign_ids_with_events()}")
    spec = started[0].payload["spec"]
    direction = spec.get("objective", {}).get("direction")
    proposals = {f"it{e.payload['iteration']}:{e.payload['arm']}:{e.payload['candidate_id']}": e.payload
                 for e in events if e.type == "Proposed"}
    rewards: dict[str, Any] = {}
    first_seq: dict[str, int] = {}
    scores: dict[str, dict[tuple, Any]] = defaultdict(dict)
    for e in events:
        p = e.payload
        if e.type in ("RewardEstimated", "RewardFinalised") and "arm" in p:
            rewards[p["subject"]] = e
            first_seq.setdefault(p["subject"], e.seq)
        elif e.type == "Scored" and p.get("trajectory"):
            scores[p["trajectory"]][(p["stage"], p["subject"], p["criterion_id"])] = p
    lab = {e.payload["job_key"]: e.payload for e in events if e.type == "Observed"}
    observed_order = [e.payload for e in events if e.type == "Observed"]
    first_property = spec.get("objective", {}).get("property", "value")
    fronts = _front_sizes(spec, observed_order)

    records = []
    for tid in sorted(rewards, key=first_seq.get):
        event = rewards[tid]
        r = event.payload
        proposal = proposals.get(tid)
        iteration = int(tid.split(":", 1)[0].removeprefix("it"))
        before = [o for o in observed_order if o["observe_iteration"] is not None and o["observe_iteration"] < iteration
                  and o["status"] == "ok" and o["value"] is not None]
        values = [o["value"] for o in before]
        best = (min(values) if direction == "minimize" else max(values)) if values and direction != "target" else None
        steps = []
        for step in r["steps"]:
            if "scores" in step:  # the record carries its scores
                step_scores = [{**s, "is_provisional": event.type == "RewardEstimated"} for s in step["scores"]]
            else:  # a ledger from before: one Scored event per criterion and step
                step_scores = [{"criterion_id": s["criterion_id"], "value": s["value"], "weight": s["weight"],
                                "reason": s["reason"], "is_provisional": s["is_provisional"]}
                               for (stage, subject, _), s in scores[tid].items()
                               if (stage, subject) == (step["stage"], step["subject"])
                               and s["rubric_hash"] == r["rubric_hash"]]  # the rubric the reward came from
            steps.append({**step, "scores": step_scores})
        outcome = next((lab[s["subject"]] for s in r["steps"] if s["stage"] == "outcome" and s["subject"] in lab), None)
        records.append({
            "type": "trajectory",
            "schema_version": TRAJECTORY_SCHEMA_VERSION,
            "campaign_id": campaign_id,
            "trajectory_id": tid,
            "iteration": iteration,
            "arm": r["arm"],
            "candidate_id": r["candidate_id"],
            "candidate": proposal["candidate"] if proposal else None,
            "prompt": prompt_text(spec, iteration, len(before), best, n_front=fronts(before)),
            "completion": completion_text(proposal),
            "steps": steps,
            "rewards": {name: {"score": value, "weight": r["weights"].get(name, 0.0)}
                        for name, value in r["components"].items()},
            "reward": r["reward"],
            "status": "final" if event.type == "RewardFinalised" else "provisional",
            "lab": _lab(outcome, first_property) if outcome else None,
            "versions": {"rubric_id": r["rubric_id"], "rubric_version": r["rubric_version"],
                         "rubric_hash": r["rubric_hash"], "event_schema": SCHEMA_VERSION,
                         "closedloop": _closedloop_version()},
            "reward_seq": event.seq,
        })
    return records


def _lab(outcome: dict[str, Any], first_property: str) -> dict[str, Any]:
    """A record's lab result: job key, value and status, plus ``values`` (every measured property) when the lab
    measured more than the first objective."""
    lab = {"job_key": outcome["job_key"], "value": outcome["value"], "status": outcome["status"]}
    others = outcome.get("values") or {}
    if others:
        value = outcome["value"]
        lab["values"] = {**({first_property: value} if value is not None else {}), **others}
    return lab


def _front_sizes(spec: dict[str, Any], observed: list[dict[str, Any]]):
    """``n_front(results)``: how many of the ok ``Observed`` payloads ``results`` are on their Pareto front
    (several objectives; None for one)."""
    objectives = spec.get("objectives") or []
    if len(objectives) < 2:
        return lambda results: None
    import numpy as np

    from orchestrator.spec_objectives import ObjectiveSpec, OutcomeConstraintSpec
    from vocabulary.pareto import non_dominated, utility_matrix

    specs = [ObjectiveSpec.model_validate(o) for o in objectives]
    constraints = [OutcomeConstraintSpec.model_validate(c) for c in spec.get("constraints") or []]
    first = specs[0].property

    def n_front(results: list[dict[str, Any]]) -> int:
        rows = []
        for o in results:
            measured = {first: o["value"], **(o.get("values") or {})}
            if all(c.is_met(measured.get(c.property)) for c in constraints):
                rows.append([measured.get(x.property, np.nan) for x in specs])
        if not rows:
            return 0
        return int(non_dominated(utility_matrix(specs, np.asarray(rows, dtype=float))).sum())

    return n_front
