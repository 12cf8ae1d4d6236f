"""Campaign summaries computed from the ledger: best found, lab use, what was measured in which order, and the main
arm against the control."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from orchestrator.ledger import Ledger
from orchestrator.loop.lab_clock import lab_time_s
from orchestrator.loop.resume_policy import recorded_spec
from orchestrator.policy.planner_stats import planner_stats
from orchestrator.seeding import derive_rng
from orchestrator.spec import ObjectiveSpec
from vocabulary.events import Observed, RungSurveyed, Screened, Simulated, batch_records

__all__ = ["arm_comparison", "comparison_ceiling", "measured_order", "summarise"]


def _label(canonical: str) -> str:
    data = json.loads(canonical)
    if data["type"] == "conditions":
        return "; ".join(f"{k}={v}" for k, v in data["values"].items())
    return data.get("smiles") or data.get("formula")


def arm_comparison(results: Sequence[tuple[str, str, float, float, int]], main: str, control: str | None, *,
                   seed: int = 0, ceiling: float | None = None) -> dict[str, Any]:
    """Per-arm lab use and best, and the main arm against the control: experiments to the best level, paired.

    ``results`` are (candidate id, arm, value, utility, iteration dispatched in), in dispatch order (within an
    iteration an arm's jobs go out in the screen's rank order). Both arms plan on one shared state, so an arm's
    experiment is worth comparing only with the other's made at the same time and with the same standing: within an
    iteration both arms dispatched in, each arm's first k (k = the smaller arm's count), i.e. rank for rank, so the
    larger arm's first choices meet the smaller arm's only choices; across iterations of one arm each (an
    asynchronous lab, every job its arm's first choice then), each result of the rarer arm with one of the other's
    dispatched around it, drawn by a generator seeded by ``seed``. The larger arm's other results inform
    the shared state but are not compared. Utilities are clipped at
    ``ceiling`` (``-tolerance`` for a target objective, so every hit in the window is one level; None otherwise).
    ``best_level`` is the better of the two arms' best clipped utilities on their paired results;
    ``experiments_to_best_level`` is each arm's 1-based position, in its paired results, of the first to reach it,
    and for an arm that never did, one more than it had (a lower bound). ``acceleration`` is the control's over the
    main arm's, and ``main_beats_control`` is ``acceleration >= 1``: the main arm reached the best level either arm
    reached, no later than the control (a tie is not behind). Without a pair, acceleration is None and
    main_beats_control False. Splitting one policy's lab order into two arms is a draw at any share.

    Example:
        >>> rows = [("a", "bo", 1, 1, 0), ("b", "random", 2, 2, 0), ("c", "bo", 3, 3, 1), ("d", "random", 0, 0, 1)]
        >>> c = arm_comparison(rows, "bo", "random")
        >>> c["best_level"], c["experiments_to_best_level"], c["acceleration"], c["main_beats_control"]
        (3.0, {'bo': 2, 'random': 3}, 1.5, True)
        >>> hits = [("a", "bo", -4.8, -0.3, 0), ("b", "random", -5.1, -0.1, 0)]  # target -5 ± 0.5: both hit
        >>> arm_comparison(hits, "bo", "random", ceiling=-0.5)["acceleration"]
        1.0
    """
    arms: dict[str, dict[str, Any]] = {}
    for cid, arm, value, utility, _ in results:
        entry = arms.setdefault(arm, {"n_lab": 0, "best_value": None, "best_candidate_id": None, "_best_u": None,
                                      "experiments_to_best": None})
        entry["n_lab"] += 1
        if entry["_best_u"] is None or utility > entry["_best_u"]:
            entry.update(_best_u=utility, best_value=value, best_candidate_id=cid, experiments_to_best=entry["n_lab"])
    out: dict[str, Any] = {"arms": {a: {k: v for k, v in e.items() if not k.startswith("_")} for a, e in arms.items()}}
    if not control or control not in arms or main not in arms:
        return out
    paired = _paired_utilities(results, (main, control), seed, ceiling)
    out["best_utility"] = {a: e["_best_u"] for a, e in arms.items()}
    out["paired_experiments"] = len(paired[main])
    if not paired[main]:
        out.update(best_level=None, experiments_to_best_level={}, acceleration=None, main_beats_control=False)
        return out
    level = max(max(paired[main]), max(paired[control]))
    reached = {arm: next((n for n, u in enumerate(paired[arm], 1) if u >= level), len(paired[arm]) + 1)
               for arm in (main, control)}
    acceleration = reached[control] / reached[main]
    out.update(best_level=float(level), experiments_to_best_level=reached, acceleration=acceleration,
               main_beats_control=acceleration >= 1)
    return out


def comparison_ceiling(objective: ObjectiveSpec) -> float | None:
    """The utility at which arms are compared level: ``-tolerance`` for a target objective (every value inside the
    window is a hit, so none is better than another), None for maximize and minimize."""
    return -objective.tolerance if objective.direction == "target" else None


def _paired_utilities(results: Sequence[tuple[str, str, float, float, int]], pair: tuple[str, str], seed: int,
                      ceiling: float | None) -> dict[str, list[float]]:
    """Each arm's clipped utilities on its paired results, in dispatch order (iteration, then lab order).

    An iteration in which both arms dispatched pairs within itself, rank for rank: each arm's first k results in
    dispatch order, k the smaller arm's count. (A random draw from the larger arm would pit its average pick against
    the smaller arm's best: with one shared ranking and a coin on shared picks, even an A/A split then favours the
    smaller arm.) The other results (an asynchronous lab frees
    one slot at a time, so an iteration often has one arm only) pair across iterations: the arm with fewer of them
    anchors, every result of the other joins the anchor dispatched nearest to it (ties to the earlier), and each
    anchor is paired with one of those drawn by a generator seeded by (seed, anchor's iteration, "anchor"); an anchor
    nobody joined stays unpaired.
    """
    rows = sorted((r[4], n, r[1]) for n, r in enumerate(results) if r[1] in pair)
    arms_of = {}
    for it, _, arm in rows:
        arms_of.setdefault(it, set()).add(arm)
    kept: set[int] = set()
    for it in (i for i, arms in arms_of.items() if len(arms) == 2):
        own = [[n for i, n, a in rows if i == it and a == arm] for arm in pair]
        k = min(map(len, own))
        for members in own:
            kept.update(members[:k])
    alone = {arm: [(it, n) for it, n, a in rows if a == arm and len(arms_of[it]) == 1] for arm in pair}
    anchor_arm, other_arm = sorted(pair, key=lambda arm: (len(alone[arm]), pair.index(arm)))
    anchors = alone[anchor_arm]
    joined: dict[int, list[int]] = {}
    for it, n in alone[other_arm] if anchors else ():
        nearest = min(range(len(anchors)), key=lambda j: (abs(anchors[j][0] - it), abs(anchors[j][1] - n), j))
        joined.setdefault(nearest, []).append(n)
    for j, members in joined.items():
        it, n = anchors[j]
        kept.update((n, int(derive_rng(seed, it, "arm-comparison", "anchor", n).choice(members))))
    return {arm: [min(results[n][3], ceiling) if ceiling is not None else results[n][3] for _, n, a in rows
                  if n in kept and a == arm] for arm in pair}


def measured_order(ledger: Ledger, campaign_id: str) -> list[str]:
    """Candidate ids in the order they were dispatched to the lab, every arm together; a retry does not repeat one."""
    jobs = sorted(ledger.lab_jobs(campaign_id), key=lambda job: job.dispatched_seq)
    return list(dict.fromkeys(job.candidate_id for job in jobs))


def summarise(ledger: Ledger, campaign_id: str) -> dict[str, Any]:
    """A JSON-ready summary of one campaign, from its ledger alone."""
    campaign = ledger.campaign(campaign_id)
    spec = recorded_spec(ledger, campaign_id)
    labels = {row.candidate_id: _label(row.canonical) for row in ledger.candidates(campaign_id)}
    everything = [e.typed() for e in ledger.events(campaign_id, types=[Observed.type])]
    observed = [o for o in everything if o.provenance == "lab"]  # imported past results are history, not this campaign
    dispatched_seq = {job.job_key: job.dispatched_seq for job in ledger.lab_jobs(campaign_id)}
    results = [(o.candidate_id, o.arm, o.value, spec.objective.utility(o.value), o.iteration)
               for o in sorted(observed, key=lambda o: dispatched_seq.get(o.job_key, -1)) if o.status == "ok"]
    best = max(results, key=lambda r: r[3], default=None)
    compute_s = sum(p["observation"].get("cost_s", 0.0)
                    for e in ledger.events(campaign_id, types=[Simulated.type, Screened.type])
                    for kind, p in batch_records(e.type, e.payload) if kind == Simulated.type)
    compute_s += sum(e.payload["cost_s"] for e in ledger.events(campaign_id, types=[RungSurveyed.type]))
    clock_s = lab_time_s(ledger, campaign_id)
    return {
        "campaign_id": campaign_id,
        "name": campaign.name,
        "db": ledger.url,
        "status": campaign.status,
        "stop_reason": campaign.stop_reason,
        "objective": spec.objective.model_dump(),
        "n_lab": len(observed),
        "n_lab_failed": sum(o.status == "failed" for o in observed),
        "n_imported": len(everything) - len(observed),
        "lab_budget": spec.budget.lab_experiments,
        "lab_hours": clock_s / 3600.0,
        "compute_s": compute_s,
        "n_hits": sum(spec.objective.is_hit(r[2], spec.stop.threshold) for r in results),
        "best": None if best is None else {"candidate_id": best[0], "label": labels.get(best[0], best[0]),
                                           "value": best[2], "arm": best[1]},
        "main_arm": spec.planner.main,
        "control_arm": spec.planner.control,
        "measured": measured_order(ledger, campaign_id),
        **arm_comparison(results, spec.planner.main, spec.planner.control, seed=spec.campaign.seed,
                         ceiling=comparison_ceiling(spec.objective)),
        "planner_stats": planner_stats(ledger, campaign_id),
    }
