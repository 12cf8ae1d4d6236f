"""One line of text per ledger event, for ``closedloop ledger events`` and the MCP server's event listing.

Example:
    >>> describe_event("Proposed", {"iteration": 2, "arm": "bo", "candidate_id": "mol-7"})
    'it2 bo → mol-7'
"""

from __future__ import annotations

from typing import Any

__all__ = ["describe_event"]


def _fmt(value: Any) -> str:
    return "—" if value is None else (f"{value:.4g}" if isinstance(value, float) else str(value))


def describe_event(kind: str, p: dict[str, Any]) -> str:
    it = f"it{p['iteration']} " if "iteration" in p else ""
    match kind:
        case "Proposed":
            return f"{it}{p['arm']} → {p['candidate_id']}"
        case "Rejected":
            return f"{it}{p['stage']}: {p['reason']}"
        case "Simulated":
            obs = p["observation"]
            shown = ", ".join(f"{k}={v:.3g}" for k, v in list(obs["properties"].items())[:4])
            return f"{it}{p['rung']} {p['candidate_id']}: {obs['status']} {shown}"
        case "Promoted":
            return f"{it}{p['candidate_id']} {p['from_rung']}→{p['to_rung']}: {p['decision']}"
        case "Screened":
            steps = p["steps"]
            n_run = sum(s["kind"] == "simulated" for s in steps)
            to_lab = [s["candidate_id"] for s in steps if s["kind"] == "promoted" and s["to_rung"] == "lab"
                      and s["decision"] == "promote"]
            return (f"{it}{n_run} rung result(s), {len(steps) - n_run} decision(s); "
                    f"to the lab: {', '.join(to_lab) or '—'}")
        case "Dispatched":
            return f"{it}{p['job_key']} at {p['sim_time_s'] / 3600:.1f} h"
        case "Observed":
            return f"{it}{p['candidate_id']} = {_fmt(p['value'])} ({p['status']}) at {p['sim_time_s'] / 3600:.1f} h"
        case "Scored":
            return f"{it}{p['stage']} {p['criterion_id']} = {p['value']:+.2f}"
        case "SurrogateUpdated":
            return f"{it}{p['model']} on {p['n_train']} results, incumbent {_fmt(p['incumbent'])}"
        case "ArmsCompared":
            paired = f" over {p['paired_experiments']} pairs" if p.get("paired_experiments") is not None else ""
            return (f"{it}{p['main']} vs {p['control']}: best {_fmt(p['best_utility'].get(p['main']))} vs "
                    f"{_fmt(p['best_utility'].get(p['control']))}, acceleration {_fmt(p['acceleration'])}{paired}")
        case "CampaignStopped":
            return f"{p['reason']}; best {p['best_candidate_id']} = {_fmt(p['best_value'])}"
        case _:
            return it + ", ".join(f"{k}={v}" for k, v in p.items() if k not in {"spec", "iteration"})[:100]
