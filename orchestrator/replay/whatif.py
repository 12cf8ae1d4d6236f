"""What-if replay: re-run a recorded campaign's decisions under another planner arm or rubric.

The what-if campaign starts from the recorded spec with the planner and/or rubric swapped, in its own ledger. Its
lab is the recorded campaign's simulated lab (same oracle, noise and seed) when there was one; otherwise a
``recorded`` lab that reuses the measured results and marks every other result unknown. When the planner is
unchanged, the recorded model calls are copied over, so the llm arm answers from them and no model is called.

The comparison reports which proposals differ, the rewards before and after, and how many lab experiments each
campaign needed to reach the best result either of them found. With several objectives it also compares the
measured fronts (``hypervolume``: each campaign's hypervolume after each lab result, over one reference point, the
spec's or inferred from both campaigns' results) and the lab experiments each needed to reach the original's final
hypervolume; "best" there is the first objective's.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from orchestrator.ledger import Ledger, sqlite_file
from orchestrator.spec import CampaignSpec, validate_spec
from vocabulary.domain import SetupError
from vocabulary.events import LLMCall, Observed, Proposed, RewardFinalised

__all__ = ["compare_campaigns", "what_if", "what_if_spec"]


def what_if_spec(spec: CampaignSpec, *, db_url: str, campaign_id: str, planner: str | None = None,
                 rubric: str | None = None, model: str | None = None, recorded_lab: bool = False) -> CampaignSpec:
    """The recorded spec with the planner, model and rubric swapped and the lab made replayable."""
    data = spec.model_dump()
    if planner is not None:
        data["planner"]["main"] = planner
        if data["planner"]["control"] == planner:  # the control must differ from the main arm
            data["planner"]["control"] = "random" if planner == "bo" else "bo"
    if model is not None:
        data["planner"]["model"] = model
    if rubric is not None:
        data["rewards"]["rubric"] = str(Path(rubric).resolve()) if rubric.endswith(".toml") else rubric
    if data["lab"]["driver"] != "simlab" or recorded_lab:
        keep = {k: v for k, v in data["lab"]["parameters"].items() if k in {"stations", "durations_s", "transfer_s"}}
        data["lab"].update(driver="recorded", parameters={**keep, "db": db_url, "campaign_id": campaign_id},
                           oracle_column=None, oracle=None, oracle_simulator=None, oracle_property=None)
    data["campaign"]["name"] = f"{data['campaign']['name']} (what-if)"
    return validate_spec(data)


def _lab_results(ledger: Ledger, campaign_id: str, spec: CampaignSpec) -> list[dict[str, Any]]:
    rows = []
    for event in ledger.events(campaign_id, types=[Observed.type]):
        p = event.payload
        if p["provenance"] != "lab":
            continue
        ok = p["status"] == "ok" and p["value"] is not None
        rows.append({"candidate_id": p["candidate_id"], "arm": p["arm"], "value": p["value"],
                     "utility": spec.objective.utility(p["value"]) if ok else None,
                     "unknown": not ok and (p["reason"] or "").startswith("unknown"),
                     "measured": {spec.objective.property: float(p["value"]),
                                  **{k: float(v) for k, v in (p.get("values") or {}).items()}} if ok else None})
    return rows


def _hypervolumes(spec: CampaignSpec, a_rows: list[dict[str, Any]], b_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Several objectives: both campaigns' hypervolume after each lab result over one reference point (objective
    units: the spec's, else BoTorch's rule over both campaigns' results), and the lab experiments each needed to
    reach the original's final hypervolume. Results breaking an outcome constraint add nothing."""
    import numpy as np

    from vocabulary.pareto import (
        hypervolume,
        infer_reference_point,
        reference_in_units,
        reference_in_utility,
        utility_matrix,
    )

    objectives = spec.objective_list

    def utilities(rows: list[dict[str, Any]]) -> np.ndarray:
        values = [[m.get(o.property, np.nan) for o in objectives]
                  if m is not None and all(c.is_met(m.get(c.property)) for c in spec.constraints)
                  else [np.nan] * len(objectives) for m in (r["measured"] for r in rows)]
        return utility_matrix(objectives, np.asarray(values, dtype=float).reshape(-1, len(objectives)))

    a, b = utilities(a_rows), utilities(b_rows)
    given = spec.tradeoff.reference_point
    both = np.concatenate([a, b])
    usable = both[np.isfinite(both).all(axis=1)]
    if given is None and not len(usable):
        return {"reference_point": None, "reference_inferred": True, "original": [], "what_if": [],
                "experiments_to_original_hypervolume": {"original": None, "what_if": None}}
    reference = reference_in_utility(objectives, given) if given is not None else infer_reference_point(usable)
    curves = {name: [float(hypervolume(Y[: k + 1], reference)) for k in range(len(Y))]
              for name, Y in (("original", a), ("what_if", b))}
    goal = curves["original"][-1] if curves["original"] else None

    def reached(curve: list[float]) -> int | None:
        if not goal:
            return None
        return next((n for n, volume in enumerate(curve, start=1) if volume >= goal * (1 - 1e-9)), None)

    return {"reference_point": [float(v) for v in (given if given is not None
                                                   else reference_in_units(objectives, reference))],
            "reference_inferred": given is None, **curves,
            "experiments_to_original_hypervolume": {name: reached(curve) for name, curve in curves.items()}}


def _experiments_to(rows: list[dict[str, Any]], utility: float, tolerance: float) -> int | None:
    for n, row in enumerate(rows, start=1):
        if row["utility"] is not None and row["utility"] >= utility - tolerance:
            return n
    return None


def _rewards(ledger: Ledger, campaign_id: str) -> dict[str, Any]:
    """Mean current (not superseded) trajectory reward, overall and per arm."""
    records = [e for e in ledger.events(campaign_id, types=[RewardFinalised.type])]
    superseded = {e.payload.get("supersedes_seq") for e in records}
    current = [e.payload for e in records if e.seq not in superseded]
    by_arm: dict[str, list[float]] = {}
    for p in current:
        by_arm.setdefault(p.get("arm") or "?", []).append(p["reward"])
    values = [p["reward"] for p in current]
    return {"mean": sum(values) / len(values) if values else None, "n": len(values),
            "by_arm": {arm: sum(v) / len(v) for arm, v in sorted(by_arm.items())}}


def _proposals(ledger: Ledger, campaign_id: str) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for event in ledger.events(campaign_id, types=[Proposed.type]):
        if event.payload["iteration"] >= 0:
            out.setdefault(event.payload["iteration"], set()).add(event.payload["candidate_id"])
    return out


def compare_campaigns(original: tuple[Ledger, str], what_if: tuple[Ledger, str]) -> dict[str, Any]:
    """Side by side: proposals that differ, rewards, and lab experiments to the best either campaign found."""
    from orchestrator.replay.report import _spec

    (a_ledger, a_id), (b_ledger, b_id) = original, what_if
    a_spec, b_spec = _spec(a_ledger, a_id), _spec(b_ledger, b_id)
    a_rows, b_rows = _lab_results(a_ledger, a_id, a_spec), _lab_results(b_ledger, b_id, a_spec)
    a_props, b_props = _proposals(a_ledger, a_id), _proposals(b_ledger, b_id)
    by_iteration = []
    for iteration in sorted(set(a_props) | set(b_props)):
        only_a = sorted(a_props.get(iteration, set()) - b_props.get(iteration, set()))
        only_b = sorted(b_props.get(iteration, set()) - a_props.get(iteration, set()))
        if only_a or only_b:
            by_iteration.append({"iteration": iteration, "only_original": only_a, "only_what_if": only_b})
    all_a = set().union(*a_props.values()) if a_props else set()
    all_b = set().union(*b_props.values()) if b_props else set()
    utilities = [r["utility"] for r in a_rows + b_rows if r["utility"] is not None]
    best = max(utilities) if utilities else None
    a_best = max((r["utility"] for r in a_rows if r["utility"] is not None), default=None)
    tolerance = max(a_spec.lab.noise_sd, 1e-9)
    a_dispatched = [r["candidate_id"] for r in a_rows]
    b_dispatched = [r["candidate_id"] for r in b_rows]
    several = {"hypervolume": _hypervolumes(a_spec, a_rows, b_rows)} if a_spec.is_multi_objective else {}
    return {
        "campaign_id": a_id,
        "what_if_campaign_id": b_id,
        "planner": {"original": a_spec.planner.main, "what_if": b_spec.planner.main},
        "control": {"original": a_spec.planner.control, "what_if": b_spec.planner.control},
        "rubric": {"original": a_spec.rewards.rubric, "what_if": b_spec.rewards.rubric},
        "lab": "the same simulated lab" if b_spec.lab.driver == "simlab" else "recorded results; others unknown",
        "identical_decisions": a_dispatched == b_dispatched and not by_iteration,
        "proposals": {"n_original": len(all_a), "n_what_if": len(all_b), "n_common": len(all_a & all_b),
                      "differ_by_iteration": by_iteration},
        "lab_experiments": {"original": len(a_rows), "what_if": len(b_rows),
                            "n_common_candidates": len(set(a_dispatched) & set(b_dispatched))},
        "n_unknown": sum(r["unknown"] for r in b_rows),
        "rewards": {"original": _rewards(a_ledger, a_id), "what_if": _rewards(b_ledger, b_id)},
        "experiments_to_best": {
            "best_utility": best, "tolerance": tolerance,
            "original": _experiments_to(a_rows, best, tolerance) if best is not None else None,
            "what_if": _experiments_to(b_rows, best, tolerance) if best is not None else None,
        },
        "experiments_to_original_best": {
            "original": _experiments_to(a_rows, a_best, tolerance) if a_best is not None else None,
            "what_if": _experiments_to(b_rows, a_best, tolerance) if a_best is not None else None,
        },
        **several,
    }


def what_if(ledger: Ledger, campaign_id: str, *, planner: str | None = None, rubric: str | None = None,
            model: str | None = None, out_db: str | Path | None = None, recorded_lab: bool = False,
            max_steps: int | None = None) -> dict[str, Any]:
    """Run the what-if campaign into ``out_db`` (a temporary file by default) and compare it with the original.

    ``recorded_lab`` answers from the recorded results even when the original lab was simulated (what a real lab
    campaign gets): candidates it never measured are unknown.
    """
    from orchestrator.loop.campaign import Campaign
    from orchestrator.replay.report import _spec

    if planner is None and rubric is None and model is None:
        raise SetupError("a what-if needs --planner, --rubric or --model; for an exact replay leave them all out")
    spec = _spec(ledger, campaign_id)
    new_spec = what_if_spec(spec, db_url=ledger.location, campaign_id=campaign_id, planner=planner, rubric=rubric, model=model,
                            recorded_lab=recorded_lab)
    if out_db is None:
        out_db = Path(tempfile.mkdtemp(prefix="closedloop-whatif-")) / "whatif.db"
    if str(out_db) in {ledger.url, ledger.location} or sqlite_file(out_db) in {ledger.path} - {None}:
        raise SetupError("the what-if needs its own ledger; pass --out-db with another path than the recorded one")
    # The same id in its own ledger: the same job keys, so a simulated lab draws the same noise and durations
    # for the same candidate, and what differs is only what the swapped planner or rubric changed.
    new_id = campaign_id
    answers_recorded = new_spec.planner.main == spec.planner.main and model is None
    with Campaign.start(new_spec, db=out_db, campaign_id=new_id, check_models=not answers_recorded) as campaign:
        if answers_recorded:
            # the same planner sees the same history: answer its model calls from the recording
            calls = [(e.typed(), e.idempotency_key) for e in ledger.events(campaign_id, types=[LLMCall.type])]
            if calls:
                campaign.ledger.append_many(new_id, calls, actor="replay")
        campaign.run(max_steps=max_steps)
        result = compare_campaigns((ledger, campaign_id), (campaign.ledger, new_id))
        result["what_if_db"] = str(out_db)
        result["what_if_campaign_id"] = new_id
    return result
