"""The report's "Pareto front" section, for a campaign with several objectives: every measured lab result in objective
space (the non-dominated ones highlighted, the ones that break an outcome constraint crossed), the hypervolume after
each result, and the non-dominated candidates as a table.

The data come from the lab history as the loop sees it (``LabJobs``: imported past results first) and the front from
``loop.front.campaign_front`` on that same history, so the points the plot highlights are exactly the table's rows
and ``closedloop run``'s front. Candidates are named by ``pool.describe``; numbers are rounded (``vocabulary.numbers``).

Example:
    >>> from orchestrator.ledger import Ledger
    >>> from orchestrator.spec import load_spec
    >>> spec = load_spec("campaigns/buchwald-hartwig/campaign.toml")
    >>> front_data(Ledger.open(":memory:"), "c1", spec) is None  # one objective: no front
    True
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from html import escape as e
from typing import TYPE_CHECKING

from orchestrator.loop.front import Front, campaign_front, hypervolume_unit
from vocabulary.numbers import rounded

if TYPE_CHECKING:
    from orchestrator.ledger import Ledger
    from orchestrator.spec import CampaignSpec

__all__ = ["FRONT_FIGURES", "FrontData", "MeasuredPoint", "front_axes", "front_data", "front_section_html",
           "front_table_rows"]

FRONT_FIGURES = {
    "pareto": "pareto.png",
    "hypervolume": "hypervolume.png",
}
"""Figure name -> file name of the front section, written next to ``index.html`` for several objectives only."""


@dataclass(frozen=True)
class MeasuredPoint:
    """One lab result with every objective measured: its candidate, arm, values by property (objective units),
    whether it is on the front and whether it meets every outcome constraint."""

    candidate_id: str
    label: str
    arm: str
    values: dict[str, float]
    is_on_front: bool
    meets_constraints: bool


@dataclass(frozen=True)
class FrontData:
    """The front of a campaign and every measured result behind it, in recording order (imported history first)."""

    front: Front
    points: list[MeasuredPoint]
    n_imported: int


def _key(candidate_id: str, values: dict[str, float]) -> tuple:
    return candidate_id, tuple(sorted(values.items()))


def front_data(ledger: Ledger, campaign_id: str, spec: CampaignSpec) -> FrontData | None:
    """The campaign's front and its measured points (None for one objective, or before any result has every
    objective)."""
    if not spec.is_multi_objective:
        return None
    from orchestrator.loop.view.lab_jobs import LabJobs
    from orchestrator.space.pool import describe
    from vocabulary.domain import candidate_from_dict

    jobs = LabJobs(spec.objective.utility, property=spec.objective.property,
                   learns_failures=spec.lab.failure_policy == "learn")
    for event in ledger.events(campaign_id, types=sorted(LabJobs.types)):
        jobs.on(event)
    history = jobs.history()
    labels = {row.candidate_id: describe(candidate_from_dict(json.loads(row.canonical)))
              for row in ledger.candidates(campaign_id)}
    front = campaign_front(spec, history, describe=lambda cid: labels.get(cid, cid))
    if front is None:
        return None
    on_front = {_key(p.candidate_id, p.values) for p in front.points}
    points = []
    for (candidate_id, arm, *_), values in zip(history.results, history.measured, strict=True):
        if any(values.get(prop) is None for prop in front.properties):
            continue
        points.append(MeasuredPoint(
            candidate_id=candidate_id, label=labels.get(candidate_id, candidate_id), arm=arm, values=dict(values),
            is_on_front=_key(candidate_id, values) in on_front,
            meets_constraints=all(c.is_met(values.get(c.property)) for c in spec.constraints)))
    return FrontData(front=front, points=points, n_imported=sum(i < 0 for i in history.iterations))


def front_axes(spec: CampaignSpec) -> list[str]:
    """Axis labels, one per objective in ``objective_list`` order: property, unit and direction."""
    return [f"{o.property}{f' ({o.unit})' if o.unit else ''}, {_direction(o)}" for o in spec.objective_list]


def _direction(objective) -> str:
    if objective.direction == "target":
        return f"target {rounded(objective.target)}"
    return "higher is better" if objective.direction == "maximize" else "lower is better"


def front_table_rows(data: FrontData, spec: CampaignSpec) -> list[dict[str, str]]:
    """The non-dominated candidates, best first by the first objective: label, arm and every measured property
    (objectives, then constraint properties) as rounded text."""
    first = spec.objective
    by_arm = {_key(p.candidate_id, p.values): p.arm for p in data.points}
    ordered = sorted(data.front.points, key=lambda p: -first.utility(p.values[first.property]))
    return [{"candidate": p.label, "arm": by_arm.get(_key(p.candidate_id, p.values), ""),
             **{prop: rounded(p.values.get(prop)) for prop in spec.measured_properties}}
            for p in ordered]


def front_section_html(data: FrontData, spec: CampaignSpec) -> str:
    """The section's HTML: what the front is, its two figures, and the table of non-dominated candidates."""
    from orchestrator.replay.report_html import figure_html

    front = data.front
    unit = hypervolume_unit(front.units)
    reference = ", ".join(f"{prop} {rounded(v)}" for prop, v in zip(front.properties, front.reference_point,
                                                                      strict=True))
    broken = (f"; {front.n_breaking_constraints} break an outcome constraint and are never on it"
              if front.n_breaking_constraints else "")
    imported = f" (the first {data.n_imported} imported past results)" if data.n_imported else ""
    intro = (f"<p>{len(front.points)} of {front.n_results} measured results{e(imported)} are non-dominated: no other "
             f"result is at least as good on every objective and better on one{e(broken)}. Hypervolume "
             f"<b>{e(rounded(front.hypervolume))}{e(' ' + unit if unit else '')}</b> above the reference point "
             f"({e(reference)}; {'inferred from the results' if front.reference_inferred else 'from the spec'}).</p>")
    figures = (figure_html(FRONT_FIGURES["pareto"], "pareto",
                           "Every measured result for each pair of objectives: the non-dominated ones highlighted"
                           + (" and joined by the front's steps" if len(front.properties) == 2 else "")
                           + ("; an x breaks an outcome constraint" if spec.constraints else "") + ".")
               + figure_html(FRONT_FIGURES["hypervolume"], "hypervolume",
                             "Hypervolume of the measured front after each lab result, above the final reference "
                             "point" + (", imported past results first" if data.n_imported else "") + "."))
    constraint_props = [p for p in spec.measured_properties if p not in front.properties]
    units = {**{c.property: c.unit for c in spec.constraints}, **{o.property: o.unit for o in spec.objective_list}}
    heads = ["candidate", "arm", *(f"{p}{f' ({units[p]})' if units.get(p) else ''}" for p in front.properties),
             *(f"{p}{f' ({units[p]})' if units.get(p) else ''} (constraint)" for p in constraint_props)]
    rows = []
    for row in front_table_rows(data, spec):
        label = "<br>".join(e(part) for part in row["candidate"].split("; "))  # name=value pairs, one a line
        cells = [f'<td class="smiles">{label}</td>', f"<td>{e(row['arm'])}</td>",
                 *(f"<td>{e(row[p])}</td>" for p in [*front.properties, *constraint_props])]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    head = "".join(f"<th>{e(h)}</th>" for h in heads)
    table = (f'<table class="front"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>')
    return intro + table + figures
