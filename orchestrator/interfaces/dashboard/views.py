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
from orchestrator.loop.summary import _label
from orchestrator.replay.report import lab_origin_s, ladder_funnel
from vocabulary.events import LLMCall, Observed

if TYPE_CHECKING:
    from orchestrator.ledger import Ledger
    from orchestrator.spec import CampaignSpec

__all__ = ["campaign_rows", "campaign_status", "funnel_stages", "lab_results", "llm_calls", "pending_questions"]


def campaign_rows(ledger: Ledger, runs: BackgroundRuns) -> list[dict[str, Any]]:
    """Every campaign in the ledger, oldest first: id, name, status, lab experiments, best value, events, and the state
    of this dashboard's own run of it (None unless an approval here drives it). Imported past results are
    ``n_imported``, not lab experiments, and the best value is of its own lab results (``campaign_counts``)."""
    rows = []
    imported = imported_counts(ledger)
    for row in ledger.campaigns():
        run = runs.get(row.id)
        rows.append({"campaign_id": row.id, "name": row.name, "status": row.status, "stop_reason": row.stop_reason,
                     **campaign_counts(ledger, row, imported), "n_events": ledger.n_events(row.id),
                     "run_state": None if run is None else run.state})
    return rows


def campaign_status(ledger: Ledger, runs: BackgroundRuns, campaign_id: str, spec: CampaignSpec) -> dict[str, Any]:
    """The status panel: the campaign row, its budget and arms, event count and this dashboard's run of it."""
    row = ledger.campaign(campaign_id)
    run = runs.get(campaign_id)
    objective = spec.objective
    return {
        "campaign_id": campaign_id, "name": row.name, "status": row.status, "stop_reason": row.stop_reason,
        **campaign_counts(ledger, row, imported_counts(ledger, campaign_id)), "lab_budget": spec.budget.lab_experiments,
        "n_events": ledger.n_events(campaign_id),
        "main_arm": spec.planner.main, "control_arm": spec.planner.control if spec.planner.control_share else None,
        "objective": f"{objective.direction} {objective.property}" + (f" ({objective.unit})" if objective.unit else ""),
        "approval_policy": spec.approval.policy, "failure_policy": spec.lab.failure_policy,
        "run": None if run is None else run.as_dict(),
    }


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


def lab_results(ledger: Ledger, campaign_id: str, *, limit: int = 50) -> list[dict[str, Any]]:
    """The newest lab results first: candidate (and its label), arm, value, status or failure reason, lab hours."""
    origin = lab_origin_s(ledger, campaign_id)
    observed = [e for e in ledger.events(campaign_id, types=[Observed.type])
                if e.payload.get("provenance", "lab") == "lab"][::-1][:limit]
    labels = {}
    for event in observed:
        candidate = ledger.candidate(campaign_id, event.payload["candidate_id"])
        labels[event.payload["candidate_id"]] = _label(candidate.canonical) if candidate is not None else ""
    return [{"seq": e.seq, "iteration": e.payload["iteration"], "job_key": e.payload["job_key"],
             "candidate_id": e.payload["candidate_id"], "label": labels[e.payload["candidate_id"]],
             "arm": e.payload["arm"], "value": e.payload["value"], "status": e.payload["status"],
             "reason": e.payload.get("reason"), "lab_hours": (e.payload["sim_time_s"] - origin) / 3600.0}
            for e in observed]


def _text(content: Any) -> str:
    """A message's content as the model saw it: text as it is, structured content (tool calls, parts) as JSON."""
    return content if isinstance(content, str) else json.dumps(content, indent=2, default=str)


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
    """What the campaign waits on a human for: ``approval`` (a lab batch, with each job's candidate label) and
    ``failures`` (failed lab jobs to retry, skip or abort), each None when nothing waits.

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
    if approval is not None:
        jobs = []
        for key in approval["job_keys"]:
            candidate = ledger.candidate(campaign_id, parse_job_key(campaign_id, key)[0])
            jobs.append({"job_key": key, "label": _label(candidate.canonical) if candidate is not None else "",
                         "arm": candidate.arm if candidate is not None else ""})
        approval = {**approval, "jobs": jobs}
    return {"approval": approval, "failures": failures}


def spec_of(ledger: Ledger, campaign_id: str) -> CampaignSpec:
    """The spec the campaign runs under (``resume_policy.recorded_spec``)."""
    return recorded_spec(ledger, campaign_id)
