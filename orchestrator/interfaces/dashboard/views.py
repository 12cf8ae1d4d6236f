"""What the dashboard shows, read from the ledger: plain dicts for the templates, one function per panel.

Every function here only reads (``Ledger`` read methods and the report's ledger -> data functions), so the dashboard
can watch a campaign that another process is running. Times are lab-clock hours since the campaign's first dispatch,
as in ``closedloop report``.

Example:
    >>> from vocabulary.events import CampaignStarted
    >>> from orchestrator.ledger import Ledger
    >>> ledger = Ledger.open(":memory:")
    >>> _ = ledger.append("c1", CampaignStarted(name="demo", seed=0, spec={}), key="started")
    >>> funnel_stages(ledger, "c1", [])
    [('proposed', {}), ('lab', {}), ('measured', {})]
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from orchestrator.interfaces.background import (
    BackgroundRuns,
    pending_approval,
    pending_failure_decision,
)
from orchestrator.interfaces.lab_counts import campaign_counts, imported_counts
from orchestrator.loop.jobs import parse_job_key
from orchestrator.loop.resume_policy import recorded_spec
from orchestrator.replay.report import lab_origin_s, ladder_funnel
from orchestrator.space.depiction import candidate_svg
from orchestrator.space.pool import describe
from vocabulary.domain import candidate_from_dict
from vocabulary.events import LLMCall, Observed
from vocabulary.numbers import plus_minus, rounded

if TYPE_CHECKING:
    from orchestrator.ledger import Ledger
    from orchestrator.spec import CampaignSpec

__all__ = ["CandidateText", "campaign_rows", "campaign_status", "candidate_drawing", "funnel_stages", "lab_results",
           "llm_calls", "measured", "model_stats", "pareto_front", "pending_entries", "pending_questions", "rounded_pair",
           "shown_status", "status_text"]


def status_text(status: str | None) -> str:
    """A campaign status as a person reads it: ``waiting_for_approval`` -> ``waiting for approval``.

    Example:
        >>> status_text("waiting_for_results"), status_text(None)
        ('waiting for results', '–')
    """
    return "–" if status is None else str(status).replace("_", " ")


def shown_status(ledger: Ledger, row: Any, run: Any) -> str:
    """The campaign's status as the page shows it: the row's, except for a campaign whose row says ``running`` while
    no run here drives it and it waits on a person: ``waiting_for_results`` when its last run ended with a manual
    lab's jobs at the bench (``manual_results.is_waiting_for_results``), ``waiting_for_approval`` when its last lab
    batch has no answer (a ledger written before the row had that status)."""
    if row.status != "running" or (run is not None and run.is_active):
        return row.status
    if ledger.last_event(row.id, "ResultsAwaited") is not None:
        from orchestrator.loop.manual_results import is_waiting_for_results

        if is_waiting_for_results(ledger, row.id):
            return "waiting_for_results"
    if pending_approval(ledger, row.id):
        return "waiting_for_approval"
    return row.status


def rounded_pair(value: float | None, sd: float | None = None) -> tuple[str, str]:
    """(value, sd) as text, each rounded to the precision the sd gives (``vocabulary.numbers``): the sd to one
    significant digit, two when it is a 1; four significant digits without an sd; "–" for a missing one.

    Example:
        >>> rounded_pair(-11.8734, 0.1), rounded_pair(87.123456, 1.4), rounded_pair(2.2894284851066633, None)
        (('-11.87', '0.10'), ('87.1', '1.4'), ('2.289', '–'))
    """
    return rounded(value, sd), rounded(sd, sd)


def measured(value: float | None, sd: float | None = None, unit: str = "") -> str:
    """A value with its sd and unit as one text (``numbers.plus_minus``); "–" without a value.

    Example:
        >>> measured(-11.8734, 0.1, "kcal/mol"), measured(2.2894284851066633), measured(None)
        ('-11.87 ± 0.10 kcal/mol', '2.289', '–')
    """
    return plus_minus(value, sd, unit=unit or None)


class CandidateText:
    """The labels of a campaign's candidates (``pool.describe``: SMILES, formula or name=value pairs, never the
    InChIKey-like id), read in one query, and whether each has a drawing (``depiction.candidate_svg``)."""

    def __init__(self, ledger: Ledger, campaign_id: str):
        self._rows = {row.candidate_id: row for row in ledger.candidates(campaign_id)}
        self._candidates: dict[str, Any] = {}

    def candidate(self, candidate_id: str) -> Any:
        if candidate_id not in self._candidates:
            row = self._rows.get(candidate_id)
            self._candidates[candidate_id] = None if row is None else candidate_from_dict(json.loads(row.canonical))
        return self._candidates[candidate_id]

    def label(self, candidate_id: str | None) -> str:
        candidate = None if candidate_id is None else self.candidate(candidate_id)
        return "" if candidate is None else describe(candidate)

    def arm(self, candidate_id: str) -> str:
        row = self._rows.get(candidate_id)
        return "" if row is None else row.arm

    def is_drawn(self, candidate_id: str | None) -> bool:
        candidate = None if candidate_id is None else self.candidate(candidate_id)
        return candidate is not None and candidate_svg(candidate) is not None

    def about(self, candidate_id: str | None) -> dict[str, Any]:
        """What a template needs to show a candidate: its id (for the drawing's URL only), label and ``is_drawn``."""
        return {"candidate_id": candidate_id, "label": self.label(candidate_id), "is_drawn": self.is_drawn(candidate_id)}


def candidate_drawing(ledger: Ledger, campaign_id: str, candidate_id: str) -> str | None:
    """The SVG drawing of one of the campaign's candidates, or None (not a candidate here, or nothing to draw)."""
    candidate = CandidateText(ledger, campaign_id).candidate(candidate_id)
    return None if candidate is None else candidate_svg(candidate)


def campaign_rows(ledger: Ledger, runs: BackgroundRuns) -> list[dict[str, Any]]:
    """Every campaign in the ledger, oldest first: id, name, status, lab experiments, best value and its candidate's
    label (``best_label``: SMILES, formula or conditions), events, and the state
    of this dashboard's own run of it (None unless an approval here drives it). Imported past results are
    ``n_imported``, not lab experiments, and the best value is of its own lab results (``campaign_counts``)."""
    rows = []
    imported = imported_counts(ledger)
    for row in ledger.campaigns():
        run = runs.get(row.id)
        counts = campaign_counts(ledger, row, imported)
        best = counts.get("best_candidate_id")
        rows.append({"campaign_id": row.id, "name": row.name, "status": shown_status(ledger, row, run),
                     "stop_reason": row.stop_reason, **counts,
                     "best_label": "" if best is None else CandidateText(ledger, row.id).label(best),
                     "n_events": ledger.n_events(row.id), "run_state": None if run is None else run.state})
    return rows


def campaign_status(ledger: Ledger, runs: BackgroundRuns, campaign_id: str, spec: CampaignSpec) -> dict[str, Any]:
    """The status panel: the campaign row (its status as ``shown_status``), the objective with its unit and target,
    the best lab result so far with its uncertainty and candidate, budget and arms, event count and this dashboard's
    run of it."""
    row = ledger.campaign(campaign_id)
    run = runs.get(campaign_id)
    objective = spec.objective
    unit = objective.unit or ""
    counts = campaign_counts(ledger, row, imported_counts(ledger, campaign_id))
    best = None
    if counts["best_value"] is not None:
        candidates = CandidateText(ledger, campaign_id)
        best = {**candidates.about(counts["best_candidate_id"]), "value": counts["best_value"],
                "uncertainty": _uncertainty_of(ledger, campaign_id, counts["best_candidate_id"], counts["best_value"])}
        best["text"] = measured(best["value"], best["uncertainty"], unit)
        if objective.direction == "target":
            best["is_hit"] = objective.is_hit(best["value"], None)
            best["off_target"] = measured(abs(best["value"] - objective.target), best["uncertainty"], unit)
    target = None
    if objective.direction == "target":
        target = f"{objective.target:g} ± {objective.tolerance:g}" + (f" {unit}" if unit else "")
    return {
        "campaign_id": campaign_id, "name": row.name, "status": shown_status(ledger, row, run),
        "stop_reason": row.stop_reason, **counts, "lab_budget": spec.budget.lab_experiments,
        "n_events": ledger.n_events(campaign_id), "best": best, "target": target, "unit": unit,
        "main_arm": spec.planner.main, "control_arm": spec.planner.control if spec.planner.control_share else None,
        "objective": f"{objective.direction} {objective.property}" + (f" ({unit})" if unit else ""),
        "approval_policy": spec.approval.policy, "failure_policy": spec.lab.failure_policy,
        "run": None if run is None else run.as_dict(),
    }


def _uncertainty_of(ledger: Ledger, campaign_id: str, candidate_id: str | None, value: float) -> float | None:
    """The sd the lab gave with the result ``value`` of ``candidate_id`` (None when it gave none)."""
    for event in ledger.events(campaign_id, types=[Observed.type]):
        p = event.payload
        if p["candidate_id"] == candidate_id and p.get("value") == value:
            return p.get("uncertainty")
    return None


def funnel_stages(ledger: Ledger, campaign_id: str, rungs: list[str]) -> list[tuple[str, dict[str, int]]]:
    """The report's ladder funnel (proposed, each rung, dispatched to the lab) plus ``measured``: distinct candidates
    with a successful lab result, per arm."""
    stages = ladder_funnel(ledger, campaign_id, rungs)
    measured: dict[str, str] = {}
    for event in ledger.events(campaign_id, types=[Observed.type]):
        p = event.payload
        if p.get("provenance", "lab") == "lab" and p["status"] == "ok":
            measured.setdefault(p["candidate_id"], p["arm"])
    counts: dict[str, int] = {}
    for arm in measured.values():
        counts[arm] = counts.get(arm, 0) + 1
    return [*stages, ("measured", counts)]


def lab_results(ledger: Ledger, campaign_id: str, spec: CampaignSpec, *, limit: int = 500) -> list[dict[str, Any]]:
    """The newest ``limit`` lab results, newest first: iteration, job key, candidate (label, drawing), arm, value,
    its unit and uncertainty (the lab's sd; None when it gave none), status or failure reason, lab hours, and
    ``others_text``: every other measured property (further objectives, constraints) with its unit, "" for one.

    Results entered by hand or measured off-plan are lab results too (every provenance but ``imported``)."""
    origin = lab_origin_s(ledger, campaign_id)
    observed = [e for e in ledger.events(campaign_id, types=[Observed.type])
                if e.payload.get("provenance", "lab") != "imported"][::-1][:limit]
    candidates = CandidateText(ledger, campaign_id)
    unit = spec.objective.unit or ""
    units = {**{c.property: c.unit for c in spec.constraints}, **{o.property: o.unit for o in spec.objective_list}}
    others = spec.measured_properties[1:]
    rows = []
    for e in observed:
        p = e.payload
        values = p.get("values") or {}
        measured = ", ".join(f"{name} {rounded(values[name])}" + (f" {units[name]}" if units.get(name) else "")
                             for name in others if values.get(name) is not None)
        rows.append({"seq": e.seq, "iteration": p["iteration"], "job_key": p["job_key"],
                     **candidates.about(p["candidate_id"]), "arm": p["arm"], "value": p["value"], "unit": unit,
                     "uncertainty": p.get("uncertainty"),
                     **dict(zip(("value_text", "uncertainty_text"), rounded_pair(p["value"], p.get("uncertainty")),
                                strict=True)),
                     "status": p["status"], "reason": p.get("reason"), "provenance": p.get("provenance", "lab"),
                     "lab_hours": (p["sim_time_s"] - origin) / 3600.0, "others_text": measured})
    return rows


def pareto_front(ledger: Ledger, campaign_id: str, spec: CampaignSpec) -> dict[str, Any] | None:
    """The measured Pareto front panel, as the report's (``replay.report_front``): ``headers`` and ``rows`` (one per
    non-dominated result: its label and every measured property, rounded), ``summary`` (how many of the results are
    on it, its hypervolume and reference point). None for one objective; ``rows`` empty before any result has every
    objective."""
    if not spec.is_multi_objective:
        return None
    from orchestrator.loop.front import hypervolume_unit
    from orchestrator.replay.report_front import front_data, front_table_rows

    units = {**{c.property: c.unit for c in spec.constraints}, **{o.property: o.unit for o in spec.objective_list}}
    objectives = [o.property for o in spec.objective_list]
    props = [*objectives, *(p for p in spec.measured_properties if p not in objectives)]
    headers = ["candidate", "arm", *(f"{p}{f' ({units[p]})' if units.get(p) else ''}"
                                     f"{'' if p in objectives else ' (constraint)'}" for p in props)]
    data = front_data(ledger, campaign_id, spec)
    if data is None:
        return {"headers": headers, "rows": [], "summary": "no result has every objective measured yet"}
    front = data.front
    unit = hypervolume_unit(front.units)
    reference = ", ".join(f"{p} {rounded(v)}" for p, v in zip(front.properties, front.reference_point, strict=True))
    summary = (f"{len(front.points)} of {front.n_results} results non-dominated; hypervolume "
               f"{rounded(front.hypervolume)}{' ' + unit if unit else ''} above ({reference}, "
               f"{'inferred' if front.reference_inferred else 'given'})")
    if front.n_breaking_constraints:
        summary += f"; {front.n_breaking_constraints} break an outcome constraint"
    rows = [{"label": row["candidate"], "arm": row["arm"], "values": [row[p] for p in props]}
            for row in front_table_rows(data, spec)]
    return {"headers": headers, "rows": rows, "summary": summary}


def _text(content: Any) -> str:
    """A message's content as the model saw it: text as it is, structured content (tool calls, parts) as JSON."""
    return content if isinstance(content, str) else json.dumps(content, indent=2, default=str)


MODEL_STATS = (("n_model_picks", "model's own picks"), ("n_anchor", "bo's anchors"),
               ("fallback_share", "fallback share (of the model's decisions)"),
               ("differs_from_bo_share", "picks bo would not make"),
               ("coin_differs_from_bo_share", "… a coin in the same slots"),
               ("first_option_share", "picks that were the first row shown"),
               ("coin_first_option_share", "… a coin in the same slots"),
               ("n_lab_model_picks", "lab experiments the model chose"), ("n_lab_anchor", "lab experiments bo chose"))
"""The model panel's rows: ``planner_stats`` key and label."""


def model_stats(ledger: Ledger, campaign_id: str) -> list[dict[str, Any]]:
    """Per llm arm that ran, the panel's statistics (``policy.planner_stats``): ``arm`` and ``rows`` of
    (label, value rounded to 2 decimals, or None where not recorded)."""
    from orchestrator.policy.planner_stats import planner_stats

    out = []
    for arm, stats in planner_stats(ledger, campaign_id).items():
        if stats:
            rows = [(label, None if stats.get(key) is None else round(float(stats[key]), 2))
                    for key, label in MODEL_STATS]
            out.append({"arm": arm, "rows": rows})
    return out


def llm_calls(ledger: Ledger, campaign_id: str) -> list[dict[str, Any]]:
    """Every recorded model call, oldest first, with exactly the messages the model saw and the text it answered."""
    calls = []
    for event in ledger.events(campaign_id, types=[LLMCall.type]):
        p = event.payload
        messages = [{"role": m.get("role", m.get("type", "?")), "content": _text(m.get("content", m))}
                    for m in p["messages"]]
        calls.append({"seq": event.seq, "at": event.at, "iteration": p["iteration"], "key": p["key"],
                      "model": p["model"], "parameters": json.dumps(p.get("parameters") or {}, default=str),
                      "messages": messages, "response": p["response"], "error": p.get("error"),
                      "n_prompt_tokens": p.get("n_prompt_tokens"),
                      "n_completion_tokens": p.get("n_completion_tokens"), "latency_s": p.get("latency_s")})
    return calls


def pending_questions(ledger: Ledger, runs: BackgroundRuns, campaign_id: str) -> dict[str, Any]:
    """What the campaign waits on a human for: ``approval`` (a lab batch: per job its candidate's label and drawing,
    arm, and the surrogate's prediction, ``predicted`` and ``sd`` in the objective's unit, None where none was
    recorded) and ``failures`` (failed lab jobs to retry, skip or abort), each None when nothing waits.

    As in ``closedloop mcp``'s status: nothing while this dashboard's own run drives the campaign, else what the
    ledger says (another process may have answered since a run here stopped); the graph's checkpoint, which an answer
    consults, decides.
    """
    row = ledger.campaign(campaign_id)
    run = runs.get(campaign_id)
    if row.status == "stopped" or (run is not None and run.is_active):
        return {"approval": None, "failures": None}
    approval = pending_approval(ledger, campaign_id)
    failures = pending_failure_decision(ledger, campaign_id)
    candidates = CandidateText(ledger, campaign_id)
    if approval is not None:
        predicted = {p["job_key"]: p for p in approval.get("predictions") or []}
        jobs = []
        for key in approval["job_keys"]:
            candidate_id = parse_job_key(campaign_id, key)[0]
            jobs.append({"job_key": key, **candidates.about(candidate_id), "arm": candidates.arm(candidate_id),
                         "predicted": predicted.get(key, {}).get("predicted"), "sd": predicted.get(key, {}).get("sd")})
        approval = {**approval, "jobs": jobs}
    if failures is not None:
        failures = {**failures, "failures": [{**f, "label": candidates.label(f["candidate_id"])}
                                             for f in failures["failures"]]}
    return {"approval": approval, "failures": failures}


def pending_entries(ledger: Ledger, campaign_id: str, spec: CampaignSpec) -> dict[str, Any] | None:
    """What a person enters for a manual campaign (``[lab] driver = "manual"``), or None for another lab:

    - ``pending``: the lab jobs at the bench (``manual_results.pending_jobs``), per job its key, candidate (label,
      drawing), arm and the surrogate's prediction (``predicted``, ``sd``, objective unit; None where there is none);
    - ``entered``: results entered that the campaign has not read yet (it reads them when it next runs), per job its
      candidate, value text, status or reason and who entered it.
    """
    if spec.lab.driver != "manual":
        return None
    import math

    from orchestrator.loop.manual_results import pending_jobs

    candidates = CandidateText(ledger, campaign_id)
    pending = []
    for record in pending_jobs(ledger, campaign_id).to_dict("records"):
        key = record["job"]
        candidate_id = parse_job_key(campaign_id, key)[0]
        mean, sd = record.get("predicted"), record.get("sd")
        pending.append({"job_key": key, **candidates.about(candidate_id), "arm": candidates.arm(candidate_id),
                        "predicted": None if mean is None or math.isnan(mean) else float(mean),
                        "sd": None if sd is None or math.isnan(sd) else float(sd)})
    observed = {e.payload["job_key"] for e in ledger.events(campaign_id, types=[Observed.type])}
    entered = []
    for event in ledger.events(campaign_id, types=["ResultEntered"]):
        p = event.payload
        if p["job_key"] in observed:
            continue
        entered.append({"job_key": p["job_key"], "label": candidates.label(p["candidate_id"]), "status": p["status"],
                        "text": (measured(p["value"], p.get("uncertainty"), spec.objective.unit or "")
                                 if p["status"] == "ok" else f"failed: {p.get('reason') or ''}"),
                        "by": p.get("by") or event.actor})
    return {"pending": pending, "entered": entered}


def spec_of(ledger: Ledger, campaign_id: str) -> CampaignSpec:
    """The spec the campaign runs under (``resume_policy.recorded_spec``)."""
    return recorded_spec(ledger, campaign_id)
