"""The report's "Pareto front" section, for a campaign with several objectives: every measured lab result in objective
space (the non-dominated ones highlighted, the ones that break an outcome constraint crossed), the hypervolume after
each result, and the non-dominated candidates as a table.

The data come from the lab history as the loop sees it (``LabJobs``: imported past results first) and the front from
``loop.front.campaign_front`` on that same history, so the points the plot highlights are exactly the table's rows
and ``closedloop run``'s front. Candidates are named by ``pool.describe``; numbers are rounded (``vocabulary.numbers``).

Example:
    >>> from orchestrator.ledger import Ledger
    >>> from orchestrator.spec import CampaignSpec
    >>> spec = CampaignSpec.model_validate({
    ...     "campaign": {"name": "d", "kind": "conditions"}, "objective": {"property": "a", "direction": "max"},
    ...     "space": {"inline": [{"x": 1.0, "a": 1.0}], "columns": ["x"]},
    ...     "lab": {"driver": "simlab", "oracle_column": "a"}, "budget": {"lab_experiments": 1}})
    >>> front_data(Ledger.open(":memory:"), "c1", spec) is None  # one objective: no front
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape as e
from typing import TYPE_CHECKING

from orchestrator.loop.front import (
    Front,
    campaign_front,
    hypervolume_unit,
    ledger_history,
)
from vocabulary.numbers import rounded

if TYPE_CHECKING:
    from orchestrator.ledger import Ledger
    from orchestrator.spec import CampaignSpec

__all__ = ["FRONT_FIGURES", "FrontData", "MeasuredPoint", "draw_front_figures", "front_axes", "front_data",
           "front_section_html", "front_steps", "front_table_rows"]

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
    history, labels = ledger_history(ledger, campaign_id, spec)
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


def front_steps(data: FrontData, spec: CampaignSpec) -> list[tuple[float, float]] | None:
    """For two objectives, the front's staircase in objective units: the non-dominated points from the best on the
    second objective to the best on the first, each pair joined through the corner both of them dominate, i.e. the
    edge of the region the front dominates. None for three or more objectives.

    Example:
        >>> from orchestrator.spec_objectives import ObjectiveSpec
        >>> from types import SimpleNamespace
        >>> objectives = [ObjectiveSpec(property="a", direction="max"), ObjectiveSpec(property="b", direction="min")]
        >>> points = [SimpleNamespace(values={"a": 3.0, "b": 5.0}), SimpleNamespace(values={"a": 1.0, "b": 2.0})]
        >>> data = SimpleNamespace(front=SimpleNamespace(properties=["a", "b"], points=points))
        >>> front_steps(data, SimpleNamespace(objective_list=objectives))
        [(1.0, 2.0), (1.0, 5.0), (3.0, 5.0)]
    """
    if len(data.front.properties) != 2:
        return None
    (x_name, y_name), (x_objective, _) = data.front.properties, spec.objective_list[:2]
    ordered = sorted(data.front.points, key=lambda p: x_objective.utility(p.values[x_name]))
    steps: list[tuple[float, float]] = []
    for k, point in enumerate(ordered):
        x, y = float(point.values[x_name]), float(point.values[y_name])
        steps.append((x, y))
        if k + 1 < len(ordered):
            steps.append((x, float(ordered[k + 1].values[y_name])))
    return steps


def draw_front_figures(data: FrontData, spec: CampaignSpec, targets: dict[str, object]) -> None:
    """Draw the Pareto plot and the hypervolume curve; ``targets`` maps each ``FRONT_FIGURES`` name to a path or a
    binary file object (``report_plots.PlotTarget``)."""
    from orchestrator.replay import report_plots as plots

    props = data.front.properties
    if "pareto" in targets:
        plots.plot_pareto([[p.values[prop] for prop in props] for p in data.points], targets["pareto"],
                          axis_labels=front_axes(spec), on_front=[p.is_on_front for p in data.points],
                          meets_constraints=[p.meets_constraints for p in data.points],
                          steps=front_steps(data, spec))
    if "hypervolume" in targets:
        plots.plot_hypervolume(data.front.hypervolume_by_experiment, targets["hypervolume"],
                               unit=hypervolume_unit(data.front.units), n_imported=data.n_imported)


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
