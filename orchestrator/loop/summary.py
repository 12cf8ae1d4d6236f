"""Campaign summaries computed from the ledger: best found, lab use, what was measured in which order, and the main
arm against the control."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from orchestrator.ledger import Ledger
from orchestrator.loop.lab_clock import lab_time_s
from orchestrator.loop.resume_policy import recorded_spec
from orchestrator.loop.upcast import records
from orchestrator.policy.planner_stats import planner_stats
from orchestrator.seeding import derive_rng, derive_seed
from orchestrator.spec_objectives import ObjectiveSpec
from vocabulary.events import (
    Observed,
    RungSurveyed,
    Screened,
    Simulated,
    SurrogateUpdated,
)

__all__ = ["arm_comparison", "comparison_ceiling", "comparison_sentence", "measured_order", "summarise"]


def _label(canonical: str) -> str:
    from orchestrator.space.pool import describe
    from vocabulary.domain import candidate_from_dict

    return describe(candidate_from_dict(json.loads(canonical)))


MAX_PAIRINGS = 4096  # pairings averaged over; all of them when there are no more, else this many drawn


def arm_comparison(results: Sequence[tuple[str, str, float, float, int]], main: str, control: str | None, *,
                   seed: int = 0, ceiling: float | None = None) -> dict[str, Any]:
    """Per-arm lab use and best, and the main arm against the control: experiments to the best level, paired.

    ``results`` are (candidate id, arm, value, utility, iteration dispatched in), in dispatch order (within an
    iteration an arm's jobs go out in the screen's rank order). Both arms plan on one shared state, so an arm's
    experiment is worth comparing only with the other's made at the same time and with the same standing: within an
    iteration both arms dispatched in, each arm's first k (k = the smaller arm's count), i.e. rank for rank, so the
    larger arm's first choices meet the smaller arm's only choices; across iterations of one arm each (an
    asynchronous lab, every job its arm's first choice then), each result of the rarer arm with one of the other's
    dispatched around it. The larger arm's other results inform the shared state but are not compared. Utilities
    are clipped at ``ceiling`` (``-tolerance`` for a target objective, so every hit in the window is one level; None
    otherwise).

    One pairing gives each arm's paired results; on them, the level is the better of the two arms' best clipped
    utilities, each arm's count is its 1-based position of the first paired result at that level (one more than it
    had when it never got there, a lower bound), and the pairing's acceleration is the control's count over the
    main arm's. Which of the results around an anchor it meets is a choice of the comparison, not of the campaign,
    so the figures average over every pairing (``MAX_PAIRINGS`` of them drawn by a generator seeded by ``seed``
    when there are more): ``acceleration`` is the geometric mean of the pairings' accelerations,
    ``experiments_to_best_level`` each arm's geometric-mean count (their ratio is ``acceleration``), ``best_level``
    the median of the pairings' levels and ``pairings`` how many were averaged. A single drawn pairing is the same
    estimate with more noise: it could leave out the main arm's hit and report the control ahead of an arm that
    found the target. ``main_beats_control`` is ``acceleration >= 1``: the main arm reached the best level no
    later than the control (a tie is not behind). Without a pair, acceleration is None and main_beats_control
    False. Splitting one policy's lab order into two arms is a draw at any share.

    Example:
        >>> rows = [("a", "bo", 1, 1, 0), ("b", "random", 2, 2, 0), ("c", "bo", 3, 3, 1), ("d", "random", 0, 0, 1)]
        >>> c = arm_comparison(rows, "bo", "random")
        >>> c["best_level"], c["experiments_to_best_level"], c["acceleration"], c["main_beats_control"]
        (3.0, {'bo': 2.0, 'random': 3.0}, 1.5, True)
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
    out["best_utility"] = {a: e["_best_u"] for a, e in arms.items()}
    designs = _pairing_designs(results, (main, control))
    if not designs[0][0][main] and not designs[0][2]:
        out.update(paired_experiments=0, best_level=None, experiments_to_best_level={}, acceleration=None,
                   main_beats_control=False, pairings=0)
        return out
    utility = np.array([r[3] for r in results], dtype=float)
    if ceiling is not None:
        utility = np.minimum(utility, ceiling)
    position = np.empty(len(results), dtype=int)  # dispatch order: iteration, then order given
    position[sorted(range(len(results)), key=lambda n: (results[n][4], n))] = np.arange(len(results))
    levels, counts, weights, n_paired = [], {main: [], control: []}, [], 0.0
    for fixed, anchor_arm, groups in designs:
        chosen = _pairings([members for _, members in groups], derive_seed(seed, "arm-comparison", anchor_arm))
        anchors = np.broadcast_to(np.array([anchor for anchor, _ in groups], dtype=int), chosen.shape)
        paired = {arm: np.concatenate([np.broadcast_to(np.array(fixed[arm], dtype=int),
                                                       (len(chosen), len(fixed[arm]))),
                                       anchors if arm == anchor_arm else chosen], axis=1)
                  for arm in (main, control)}
        level = np.maximum(*(utility[paired[arm]].max(axis=1) for arm in (main, control)))
        for arm in (main, control):
            counts[arm].append(_first_at_level(position[paired[arm]], utility[paired[arm]], level))
        levels.append(level)
        weights.append(np.full(len(chosen), 1 / len(chosen) / len(designs)))
        n_paired += (len(fixed[main]) + len(groups)) / len(designs)
    weight = np.concatenate(weights)
    count = {arm: np.concatenate(c) for arm, c in counts.items()}
    acceleration = _geometric_mean(count[control] / count[main], weight)
    out.update(paired_experiments=round(n_paired), best_level=float(np.median(np.concatenate(levels))),
               experiments_to_best_level={arm: _geometric_mean(count[arm], weight) for arm in (main, control)},
               acceleration=acceleration, main_beats_control=acceleration >= 1 - 1e-12, pairings=len(weight))
    return out


def comparison_sentence(summary: dict[str, Any]) -> str:
    """The main arm against the control in one sentence, from a campaign's ``summarise`` (or ``closedloop run
    --json``).

    Example:
        >>> comparison_sentence({"main_arm": "llm", "control_arm": "bo", "main_beats_control": True,
        ...     "acceleration": 1.5, "experiments_to_best_level": {"llm": 2.0, "bo": 3.0}, "paired_experiments": 3,
        ...     "best_level": -0.5, "pairings": 1})
        'main arm beat the control: on 3 results each, paired by dispatch, it reached the best level either arm reached (utility -0.5) after 2 experiments, the control after 3; acceleration 1.50×.'
    """
    verdict = f"main arm {'beat' if summary['main_beats_control'] else 'did not beat'} the control"
    if summary.get("acceleration") is None:
        return f"{verdict}: no lab results of both arms to pair."
    reached = summary["experiments_to_best_level"]
    n = summary["paired_experiments"]
    pairings = summary.get("pairings") or 1

    def after(arm: str) -> str:
        return f"after {reached[arm]:.3g}" if pairings > 1 or reached[arm] <= n else f"not in {n}"

    averaged = f" (geometric means over {pairings} pairings, {n + 1} where an arm never got there)"
    return (f"{verdict}: on {n} results each, paired by dispatch, it reached the best level either arm reached "
            f"(utility {summary['best_level']:.3g}{', median' if pairings > 1 else ''}) "
            f"{after(summary['main_arm'])} experiments, the control {after(summary['control_arm'])}"
            f"{averaged if pairings > 1 else ''}; acceleration {summary['acceleration']:.2f}×.")


def comparison_ceiling(objective: ObjectiveSpec) -> float | None:
    """The utility at which arms are compared level: ``-tolerance`` for a target objective (every value inside the
    window is a hit, so none is better than another), None for maximize and minimize."""
    return -objective.tolerance if objective.direction == "target" else None


def _geometric_mean(values: np.ndarray, weight: np.ndarray) -> float:
    """The weighted geometric mean of positive ``values`` (``weight`` sums to 1); exactly the value when they are
    all one value."""
    if np.all(values == values[0]):
        return float(values[0])
    return float(np.exp(np.sum(weight * np.log(values))))


def _first_at_level(position: np.ndarray, utility: np.ndarray, level: np.ndarray) -> np.ndarray:
    """Per pairing (row), the 1-based dispatch-order rank of an arm's first paired result at ``level`` among its
    paired results (``position``: their dispatch positions, ``utility``: their clipped utilities), or the number
    of them + 1 if none is."""
    at_level = utility >= level[:, None]
    first = np.where(at_level, position, np.iinfo(position.dtype).max).min(axis=1)
    return np.where(at_level.any(axis=1), (position <= first[:, None]).sum(axis=1), position.shape[1] + 1)


def _pairings(groups: Sequence[Sequence[int]], seed: int) -> np.ndarray:
    """The ways of drawing one member of each group: all of them (one row each) when there are at most
    ``MAX_PAIRINGS``, else that many rows drawn uniformly by a generator seeded by ``seed``."""
    sizes = [len(members) for members in groups]
    if math.prod(sizes) <= MAX_PAIRINGS:
        return np.array(list(itertools.product(*groups)), dtype=int).reshape(math.prod(sizes), len(groups))
    rng = derive_rng(seed, "arm-comparison", "pairings")
    picks = rng.integers(0, np.array(sizes), size=(MAX_PAIRINGS, len(groups)))
    table = np.full((len(groups), max(sizes)), -1, dtype=int)
    for j, members in enumerate(groups):
        table[j, :len(members)] = members
    return table[np.arange(len(groups)), picks]


def _pairing_designs(results: Sequence[tuple[str, str, float, float, int]], pair: tuple[str, str]
                     ) -> list[tuple[dict[str, list[int]], str, list[tuple[int, list[int]]]]]:
    """Which results are compared: per design, each arm's results paired for certain, the anchor arm, and the
    groups (an anchor and the other arm's results it may meet), as indices into ``results``.

    An iteration in which both arms dispatched pairs within itself, rank for rank: each arm's first k results in
    dispatch order, k the smaller arm's count. (A random draw from the larger arm would pit its average pick against
    the smaller arm's best: with one shared ranking and a coin on shared picks, even an A/A split then favours the
    smaller arm.) The other results (an asynchronous lab frees one slot at a time, so an iteration often has one
    arm only) pair across iterations: the arm with fewer of them anchors, and every result of the other joins the
    anchor dispatched nearest to it (ties to the earlier); each anchor meets one of those. An anchor nobody joined
    stays unpaired. When both arms have as many, either could anchor, and both designs are returned: picking one by
    its name would make an A/A split at equal shares favour that arm.
    """
    rows = sorted((r[4], n, r[1]) for n, r in enumerate(results) if r[1] in pair)
    arms_of: dict[int, set[str]] = {}
    for it, _, arm in rows:
        arms_of.setdefault(it, set()).add(arm)
    fixed: dict[str, list[int]] = {arm: [] for arm in pair}
    for it in (i for i, arms in arms_of.items() if len(arms) == 2):
        own = {arm: [n for i, n, a in rows if i == it and a == arm] for arm in pair}
        k = min(map(len, own.values()))
        for arm, members in own.items():
            fixed[arm].extend(members[:k])
    alone = {arm: [(it, n) for it, n, a in rows if a == arm and len(arms_of[it]) == 1] for arm in pair}
    fewest = min(len(alone[arm]) for arm in pair)
    designs = []
    for anchor_arm in (arm for arm in pair if len(alone[arm]) == fewest):
        other_arm = pair[1 - pair.index(anchor_arm)]
        anchors = alone[anchor_arm]
        joined: dict[int, list[int]] = {}
        for it, n in alone[other_arm] if anchors else ():
            nearest = min(range(len(anchors)), key=lambda j: (abs(anchors[j][0] - it), abs(anchors[j][1] - n), j))
            joined.setdefault(nearest, []).append(n)
        designs.append((fixed, anchor_arm, [(anchors[j][1], members) for j, members in sorted(joined.items())]))
    return designs


def measured_order(ledger: Ledger, campaign_id: str) -> list[str]:
    """Candidate ids in the order they were dispatched to the lab, every arm together; a retry does not repeat one."""
    jobs = sorted(ledger.lab_jobs(campaign_id), key=lambda job: job.dispatched_seq)
    return list(dict.fromkeys(job.candidate_id for job in jobs))


def ladder_prior(ledger: Ledger, campaign_id: str) -> dict[str, Any] | None:
    """What the campaign's GP last took from the ladder (``planners.ladder_prior``), from its last fitted state: the
    rung, its ``form`` (``mean`` or GP ``feature``), whether the lab has proved it informative, ``evidence`` (the
    probability given its pairs that it is informative at all; None in ledgers from before it was recorded), the
    calibration line (lab value ≈ intercept + slope · rung value) and the lab results it was fitted on. None before
    the GP is fitted or when it plans without a rung (single fidelity, or every rung ruled out)."""
    fitted = [e.payload for e in ledger.events(campaign_id, types=[SurrogateUpdated.type])
              if e.payload.get("hyperparameters")]
    if not fitted or not fitted[-1]["hyperparameters"].get("prior"):
        return None
    prior = fitted[-1]["hyperparameters"]["prior"]
    return {"rung": prior["rung"], "form": prior.get("form", "mean"), "is_calibrated": prior["is_calibrated"],
            "evidence": prior.get("evidence"), "intercept": prior["intercept"], "slope": prior["slope"],
            "n_train": fitted[-1]["n_train"], "iteration": fitted[-1]["iteration"]}


def _status(ledger: Ledger, campaign_id: str, spec, status: str) -> str:
    """The campaign row's status, or ``waiting_for_results`` where a manual lab's last run ended waiting on a person."""
    if status == "running" and spec.lab.driver == "manual":
        from orchestrator.loop.manual_results import is_waiting_for_results

        if is_waiting_for_results(ledger, campaign_id):
            return "waiting_for_results"
    return status


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
                    for kind, p in records(e) if kind == Simulated.type)
    compute_s += sum(e.payload["cost_s"] for e in ledger.events(campaign_id, types=[RungSurveyed.type]))
    clock_s = lab_time_s(ledger, campaign_id)
    return {
        "campaign_id": campaign_id,
        "name": campaign.name,
        "db": ledger.url,
        "status": _status(ledger, campaign_id, spec, campaign.status),
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
        "ladder_prior": ladder_prior(ledger, campaign_id),
        **_front_entry(ledger, campaign_id, spec),
    }


def _front_entry(ledger: Ledger, campaign_id: str, spec) -> dict[str, Any]:
    """``{"front": ...}`` for several objectives (``loop.front``), nothing for one."""
    if not spec.is_multi_objective:
        return {}
    from orchestrator.loop.front import ledger_front

    front = ledger_front(ledger, campaign_id, spec)
    return {"front": None if front is None else front.as_dict()}
