"""Campaign summaries computed from the ledger: best found, lab use, what was measured in which order, and the main
arm against the control."""

from __future__ import annotations

import json
from typing import Any

from .context import lab_time_s
from .events import CampaignStarted, Observed, RungSurveyed, Simulated
from .ledger import Ledger
from .planner_stats import planner_stats
from .spec import validate_spec

__all__ = ["arm_comparison", "measured_order", "summarise"]


def _label(canonical: str) -> str:
    data = json.loads(canonical)
    if data["type"] == "conditions":
        return "; ".join(f"{k}={v}" for k, v in data["values"].items())
    return data.get("smiles") or data.get("formula")


def arm_comparison(results: list[tuple[str, str, float, float]], main: str, control: str | None) -> dict[str, Any]:
    """Per-arm lab use and best utility, how many experiments the main arm needed to match the control's best, and
    the running acceleration (the control's experiments to its best over the main arm's experiments to match it).

    ``main_beats_control`` is True when the main arm reached the control's best utility in no more of its own lab
    experiments than the control needed to find it, i.e. ``acceleration >= 1``; a main arm that found something
    better only after more experiments than the control needed does not beat it, so the flag always agrees with the
    acceleration.

    ``results`` are (candidate id, arm, value, utility) in the order the lab returned them.

    Example:
        >>> rows = [("a", "bo", 1, 1), ("b", "random", 2, 2), ("c", "bo", 3, 3), ("d", "random", 0, 0)]
        >>> comparison = arm_comparison(rows, "bo", "random")
        >>> comparison["main_experiments_to_control_best"], comparison["acceleration"], comparison["main_beats_control"]
        (2, 0.5, False)
    """
    arms: dict[str, dict[str, Any]] = {}
    for cid, arm, value, utility in results:
        entry = arms.setdefault(arm, {"n_lab": 0, "best_value": None, "best_candidate_id": None, "_best_u": None,
                                      "experiments_to_best": None})
        entry["n_lab"] += 1
        if entry["_best_u"] is None or utility > entry["_best_u"]:
            entry.update(_best_u=utility, best_value=value, best_candidate_id=cid, experiments_to_best=entry["n_lab"])
    out: dict[str, Any] = {"arms": {a: {k: v for k, v in e.items() if not k.startswith("_")} for a, e in arms.items()}}
    if control and control in arms and main in arms:
        target = arms[control]["_best_u"]
        n = 0
        reached = None
        for _, arm, _, utility in results:
            if arm == main:
                n += 1
                if utility >= target:
                    reached = n
                    break
        out["main_experiments_to_control_best"] = reached
        out["control_experiments_to_its_best"] = arms[control]["experiments_to_best"]
        out["main_beats_control"] = reached is not None and reached <= arms[control]["experiments_to_best"]
        out["acceleration"] = None if reached is None else arms[control]["experiments_to_best"] / reached
        out["best_utility"] = {a: e["_best_u"] for a, e in arms.items()}
    return out


def measured_order(ledger: Ledger, campaign_id: str) -> list[str]:
    """Candidate ids in the order they were dispatched to the lab, every arm together; a retry does not repeat one."""
    jobs = sorted(ledger.lab_jobs(campaign_id), key=lambda job: job.dispatched_seq)
    return list(dict.fromkeys(job.candidate_id for job in jobs))


def summarise(ledger: Ledger, campaign_id: str) -> dict[str, Any]:
    """A JSON-ready summary of one campaign, from its ledger alone."""
    campaign = ledger.campaign(campaign_id)
    started = ledger.events(campaign_id, types=[CampaignStarted.type])[0]
    spec = validate_spec(started.payload["spec"])
    labels = {row.candidate_id: _label(row.canonical) for row in ledger.candidates(campaign_id)}
    everything = [e.typed() for e in ledger.events(campaign_id, types=[Observed.type])]
    observed = [o for o in everything if o.provenance == "lab"]  # imported past results are history, not this campaign
    results = [(o.candidate_id, o.arm, o.value, spec.objective.utility(o.value)) for o in observed if o.status == "ok"]
    best = max(results, key=lambda r: r[3], default=None)
    compute_s = sum(e.payload["observation"].get("cost_s", 0.0) for e in ledger.events(campaign_id, types=[Simulated.type]))
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
        **arm_comparison(results, spec.planner.main, spec.planner.control),
        "planner_stats": planner_stats(ledger, campaign_id),
    }
