"""One line of text per ledger event, for ``closedloop show``, ``closedloop ledger events`` and the MCP server's event
listing.

Candidates are named as a chemist reads them (SMILES, formula, ``name=value``: ``pool.describe``) when ``labels``
maps their ids (``replay.candidates.candidate_labels``); job keys, which embed a candidate id, are named by their
candidate too. Without a label an id prints as itself. Numbers are rounded to their precision
(``vocabulary.numbers``).

Example:
    >>> describe_event("Proposed", {"iteration": 2, "arm": "bo", "candidate_id": "mol-7"})
    'it2 bo → mol-7'
    >>> describe_event("Observed", {"iteration": 2, "job_key": "c1/mol-7", "candidate_id": "mol-7", "value": -5.0912,
    ...     "uncertainty": 0.1, "status": "ok", "sim_time_s": 7200.0}, labels={"mol-7": "CCO"})
    'it2 CCO = -5.09 ± 0.10 (ok) at 2.0 h'
    >>> describe_event("ResultEntered", {"job_key": "c1/mol-7", "candidate_id": "mol-7", "value": 71.234,
    ...     "uncertainty": 1.5, "status": "ok", "sim_time_s": 86400.0, "by": "human:ada"}, labels={"mol-7": "CCO"})
    'human:ada entered CCO = 71.2 ± 1.5 (ok) at 24.0 h'
    >>> describe_event("ResultsAwaited", {"iteration": 3, "job_keys": ["c1/mol-7"]}, labels={"mol-7": "CCO"})
    'it3 waiting for results of CCO'

A result that measured several properties (several objectives, outcome constraints: the event's ``values``) lists
each; ``units`` (``measured_units(spec)``) names the first objective and gives every unit:

    >>> p = {"iteration": 1, "candidate_id": "f-1", "value": 0.01234, "uncertainty": None, "status": "ok",
    ...      "sim_time_s": 3600.0, "values": {"encap_efficiency": 0.4123, "particle_diameter": 180.3}}
    >>> describe_event("Observed", p)
    'it1 f-1 = 0.01234, encap_efficiency 0.4123, particle_diameter 180.3 (ok) at 1.0 h'
    >>> describe_event("Observed", p, units={"drug_loading": "", "encap_efficiency": "", "particle_diameter": "nm"})
    'it1 f-1: drug_loading 0.01234, encap_efficiency 0.4123, particle_diameter 180.3 nm (ok) at 1.0 h'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vocabulary.numbers import plus_minus, rounded

__all__ = ["describe_event", "job_label", "measured_units"]


def _fmt(value: Any) -> str:
    return "—" if value is None else rounded(value)


def job_label(job_key: str, labels: Mapping[str, str]) -> str:
    """A job key (``campaign/candidate[/retryN]``, or an imported row's key) named by its candidate's label.

    Example:
        >>> job_label("c1/LFQSCWFLJHTTHZ-UHFFFAOYSA-N/retry2", {"LFQSCWFLJHTTHZ-UHFFFAOYSA-N": "CCO"})
        'CCO (retry 2)'
        >>> job_label("c1/unknown", {})
        'c1/unknown'
    """
    parts = job_key.split("/")
    for index, part in enumerate(parts):
        if part in labels:
            retry = parts[index + 1] if index + 1 < len(parts) and parts[index + 1].startswith("retry") else ""
            return labels[part] + (f" (retry {retry.removeprefix('retry')})" if retry else "")
    return job_key


def measured_units(spec: Any) -> dict[str, str]:
    """Every property a campaign's lab measures (``spec.measured_properties``, the first objective first) -> its unit,
    for ``describe_event``'s ``units``."""
    units = {**{c.property: c.unit for c in spec.constraints}, **{o.property: o.unit for o in spec.objective_list}}
    return {prop: units.get(prop, "") for prop in spec.measured_properties}


def _result(p: dict[str, Any], units: Mapping[str, str] | None) -> str:
    """A result's measured values: `` = value ± sd`` for the first objective alone (as ever); with other measured
    properties (``values``) every one by name, ``units`` naming the first objective (`` = value, b 2.1`` without)."""
    value = plus_minus(p["value"], p.get("uncertainty")) if p["value"] is not None else "—"
    others = p.get("values") or {}
    if not others:
        return f" = {value}"
    shown = [f"{prop} {rounded(v)}{' ' + units[prop] if units and units.get(prop) else ''}"
             for prop, v in others.items()]
    if not units:
        return f" = {', '.join([value, *shown])}"
    first, unit = next(iter(units.items()))
    value = plus_minus(p["value"], p.get("uncertainty"), unit=unit or None) if p["value"] is not None else "—"
    return f": {', '.join([f'{first} {value}', *shown])}"


def campaign_units(ledger: Any, campaign_id: str) -> dict[str, str] | None:
    """``measured_units`` of the spec a campaign in ``ledger`` runs under; None where that spec cannot be read back
    (the lines then name the values without the first objective's name and unit)."""
    from orchestrator.loop.resume_policy import recorded_spec
    from vocabulary.domain import SetupError

    try:
        return measured_units(recorded_spec(ledger, campaign_id))
    except SetupError:
        return None


def describe_event(kind: str, p: dict[str, Any], labels: Mapping[str, str] | None = None,
                   units: Mapping[str, str] | None = None) -> str:
    """One line for an event of type ``kind`` with payload ``p``; ``labels`` maps candidate id -> label, ``units``
    each measured property -> its unit, the first objective first (``measured_units``; used only for a result that
    measured several properties)."""
    names = labels or {}

    def name(candidate_id: str | None) -> str:
        return "—" if candidate_id is None else names.get(candidate_id, candidate_id)

    def job(key: str) -> str:
        return job_label(key, names)

    it = f"it{p['iteration']} " if "iteration" in p else ""
    match kind:
        case "Proposed":
            return f"{it}{p['arm']} → {_proposed_label(p, names)}"
        case "Rejected":
            about = f" {name(p['candidate_id'])}" if p.get("candidate_id") else ""
            return f"{it}{p['stage']}{about}: {p['reason']}"
        case "FailureHandled":
            return f"{it}{job(p['job_key'])} {p['action']}: {p['reason']}"
        case "Simulated":
            obs = p["observation"]
            shown = ", ".join(f"{k}={rounded(v, digits=3)}" for k, v in list(obs["properties"].items())[:4])
            return f"{it}{p['rung']} {name(p['candidate_id'])}: {obs['status']} {shown}"
        case "Promoted":
            return f"{it}{name(p['candidate_id'])} {p['from_rung']}→{p['to_rung']}: {p['decision']}"
        case "Screened":
            steps = p["steps"]
            n_run = sum(s["kind"] == "simulated" for s in steps)
            to_lab = [name(s["candidate_id"]) for s in steps if s["kind"] == "promoted" and s["to_rung"] == "lab"
                      and s["decision"] == "promote"]
            return (f"{it}{n_run} rung result(s), {len(steps) - n_run} decision(s); "
                    f"to the lab: {', '.join(to_lab) or '—'}")
        case "ApprovalRequested":
            return f"{it}{p['policy']}: {', '.join(job(k) for k in p['job_keys']) or '—'}"
        case "Approved":
            denied = p.get("denied_keys") or []
            shown = f"{it}{p['approved_by']} approved {', '.join(job(k) for k in p['job_keys']) or 'none'}"
            return shown + (f"; denied {', '.join(job(k) for k in denied)}" if denied else "")
        case "Dispatched":
            return f"{it}{job(p['job_key'])} at {p['sim_time_s'] / 3600:.1f} h"
        case "JobStatus":
            reason = f": {p['reason']}" if p.get("reason") else ""
            return f"{job(p['job_key'])} {p['status']}{reason} at {p['sim_time_s'] / 3600:.1f} h"
        case "Observed":
            infeasible = ", infeasible" if p.get("infeasible") else ""
            return (f"{it}{name(p['candidate_id'])}{_result(p, units)} ({p['status']}{infeasible}) "
                    f"at {p['sim_time_s'] / 3600:.1f} h")
        case "ResultEntered":
            why = f": {p['reason']}" if p.get("reason") else ""
            why += ", infeasible" if p.get("infeasible") else ""
            return (f"{p['by']} entered {job(p['job_key'])}{_result(p, units)} ({p['status']}{why}) "
                    f"at {p['sim_time_s'] / 3600:.1f} h")
        case "ResultsAwaited":
            return f"{it}waiting for results of {', '.join(job(k) for k in p['job_keys'])}"
        case "Scored":
            return f"{it}{p['stage']} {p['criterion_id']} = {p['value']:+.2f}"
        case "SurrogateUpdated":
            return f"{it}{p['model']} on {p['n_train']} results, incumbent {_fmt(p['incumbent'])}"
        case "ArmsCompared":
            paired = f" over {p['paired_experiments']} pairs" if p.get("paired_experiments") is not None else ""
            return (f"{it}{p['main']} vs {p['control']}: best {_fmt(p['best_utility'].get(p['main']))} vs "
                    f"{_fmt(p['best_utility'].get(p['control']))}, acceleration {_fmt(p['acceleration'])}{paired}")
        case "RewardFinalised" | "RewardEstimated":
            parts = ", ".join(f"{k} {rounded(v, digits=3)}" for k, v in p.get("components", {}).items())
            about = name(p["candidate_id"]) if p.get("candidate_id") else p["subject"]
            return f"{it}{p.get('arm') or '—'} {about}: reward {rounded(p['reward'], digits=3)} ({parts})"
        case "CampaignStopped":
            return f"{p['reason']}; best {name(p.get('best_candidate_id'))} = {_fmt(p['best_value'])}"
        case _:
            shown = ", ".join(f"{k}={_named(v, names)}" for k, v in p.items() if k not in {"spec", "iteration"})
            return it + shown[:100]


def _proposed_label(p: dict[str, Any], names: Mapping[str, str]) -> str:
    if p["candidate_id"] in names:
        return names[p["candidate_id"]]
    candidate = p.get("candidate")
    if isinstance(candidate, dict):  # the event carries its candidate: name it without the ledger's table
        from orchestrator.space.pool import describe
        from vocabulary.domain import candidate_from_dict

        try:
            return describe(candidate_from_dict(candidate))
        except (KeyError, ValueError):  # a hand-made or future payload: the id is still a name
            pass
    return p["candidate_id"]


def _named(value: Any, names: Mapping[str, str]) -> str:
    """A payload value for the generic line: ids and job keys named, floats rounded, inside lists and dicts too."""
    if isinstance(value, str):
        return names.get(value) or (job_label(value, names) if "/" in value else value)
    if isinstance(value, float):
        return rounded(value, digits=3)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_named(item, names) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_named(v, names)}" for k, v in value.items()) + "}"
    return str(value)
