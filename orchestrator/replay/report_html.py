"""The report's HTML, written for the people at the bench: the target and the best so far first, the best candidates
drawn, every lab result in a table, then the campaign's figures and, last, the RL section.

Candidates are named by ``pool.describe`` (SMILES, formula, ``name=value``) and drawn by ``space.depiction``; every
number goes through ``vocabulary.numbers``, rounded to the precision its uncertainty gives it. Each function returns
an HTML fragment; ``page`` assembles them.

Example:
    >>> format_value(2.2894284851066633), format_value(None), format_value(-5.0912, 0.1)
    ('2.289', '–', '-5.09')
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from orchestrator.replay.report_results import LabResult
from orchestrator.space.depiction import candidate_svg
from orchestrator.spec import CampaignSpec
from vocabulary.domain import Conditions
from vocabulary.numbers import plus_minus, rounded

__all__ = ["MAX_DRAWN_RESULTS", "best_candidates_html", "format_value", "headline_html", "page", "results_table_html",
           "summary_table_html"]

MAX_DRAWN_RESULTS = 200
"""The results table draws a structure per row up to this many rows (a drawing is ~5 kB of SVG); past it, none."""

_STAT_DIGITS = 3
"""Significant digits of the derived statistics (geometric means, accelerations): estimates, not measurements."""


def format_value(value: Any, sd: float | None = None) -> str:
    """A table cell: "–" for none, a float rounded to the precision ``sd`` gives it (else 4 significant digits)."""
    if isinstance(value, float | int) and not isinstance(value, bool):
        return rounded(value, sd)
    return "–" if value is None else str(value)


def _e(value: Any) -> str:
    return html.escape(str(value))


def _unit(spec: CampaignSpec) -> str:
    return spec.objective.unit or ""


def _goal(spec: CampaignSpec) -> str:
    objective, unit = spec.objective, _unit(spec)
    if objective.direction == "target":
        return (f"target {plus_minus(objective.target, objective.tolerance, unit=unit)} "
                f"(a hit lies within the window)")
    goal = f"{objective.direction} {objective.property}"
    if spec.stop.threshold is not None:
        sign = "≥" if objective.direction == "maximize" else "≤"
        goal += f" (a hit: {sign} {rounded(spec.stop.threshold)}{' ' + unit if unit else ''})"
    return goal


def _drawing(result: LabResult, width: int, height: int) -> str:
    """The candidate's structure; a set of conditions (a grid of its molecules) gets twice the width and height."""
    if result.candidate is None:
        return ""
    scale = 2 if isinstance(result.candidate, Conditions) else 1
    svg = candidate_svg(result.candidate, width=width * scale, height=height * scale)
    return f'<div class="structure">{svg}</div>' if svg else ""


def _label_html(result: LabResult) -> str:
    """The candidate's label; a set of conditions one ``name=value`` a line."""
    if isinstance(result.candidate, Conditions):
        return "<br>".join(_e(part) for part in result.label.split("; "))
    return _e(result.label)


def headline_html(spec: CampaignSpec, best: LabResult | None, n_results: int) -> str:
    """The top of the report: what the campaign looks for, and the best it found so far with its uncertainty."""
    objective, unit = spec.objective, _unit(spec)
    name = f"{objective.property}{f' ({unit})' if unit else ''}"
    if best is None:
        found = "<p class=\"best\">No successful lab result yet.</p>"
    else:
        hit = " <span class=\"hit\">hit</span>" if objective.is_hit(best.value, spec.stop.threshold) else ""
        off = ""
        if objective.direction == "target" and not hit:
            off = (f'<p class="meta">{_e(rounded(abs(best.value - objective.target), best.sd))}'
                   f'{_e(" " + unit if unit else "")} from the target</p>')
        found = (f'<div class="best">{_drawing(best, 260, 190)}<div><p class="label">best so far</p>'
                 f'<p class="value">{_e(plus_minus(best.value, best.sd, unit=unit))}{hit}</p>{off}'
                 f'<p class="smiles">{_label_html(best)}</p>'
                 f'<p class="meta">{_e(best.arm)} arm, iteration {best.iteration}, result {best.n} of {n_results} recorded</p>'
                 "</div></div>")
    return (f'<section class="headline"><p class="goal"><b>{_e(name)}</b>: {_e(_goal(spec))}</p>{found}</section>')


def best_candidates_html(best: Sequence[LabResult], spec: CampaignSpec) -> str:
    """Cards of the best distinct candidates, each drawn (molecules) and named, with its value and uncertainty."""
    if not best:
        return "<p>No successful lab result yet.</p>"
    unit = _unit(spec)
    cards = []
    for rank, result in enumerate(best, start=1):
        hit = ' <span class="hit">hit</span>' if spec.objective.is_hit(result.value, spec.stop.threshold) else ""
        wide = " wide" if isinstance(result.candidate, Conditions) else ""
        cards.append(f'<div class="card{wide}">{_drawing(result, 220, 160)}'
                     f'<p class="value">#{rank}: {_e(plus_minus(result.value, result.sd, unit=unit))}{hit}</p>'
                     f'<p class="smiles">{_label_html(result)}</p>'
                     f'<p class="meta">{_e(result.arm)}, iteration {result.iteration}</p></div>')
    return f'<div class="cards">{"".join(cards)}</div>'


def results_table_html(results: Sequence[LabResult], spec: CampaignSpec) -> str:
    """Every result in recording order; click a column head to sort. Molecules are drawn up to
    ``MAX_DRAWN_RESULTS`` rows."""
    if not results:
        return "<p>No lab results yet.</p>"
    objective, unit = spec.objective, _unit(spec)
    draw = spec.campaign.kind == "molecule" and len(results) <= MAX_DRAWN_RESULTS
    others = _other_properties(spec)
    heads = ["#", *(["structure"] if draw else []), "candidate", f"{objective.property}{f' ({unit})' if unit else ''}",
             "±", *(f"{p}{f' ({u})' if u else ''}" for p, u in others.items()), "arm", "iteration", "lab time (h)",
             "status"]
    rows = []
    for r in results:
        status = r.status if r.status == "ok" else f"{r.status}: {r.reason or 'no reason given'}"
        if r.provenance != "lab":
            status += f" ({r.provenance})"
        hit = ' <span class="hit">hit</span>' if r.status == "ok" and objective.is_hit(r.value, spec.stop.threshold) \
            else ""
        cells = [
            f'<td data-v="{r.n}">{r.n}</td>',
            *([f"<td>{_drawing(r, 120, 90)}</td>"] if draw else []),
            f'<td class="smiles">{_e(r.label)}</td>',
            f'<td data-v="{_sort_key(r.value)}">{_e(format_value(r.value, r.sd))}</td>',
            f"<td>{_e(format_value(r.sd, r.sd))}</td>",
            *(f'<td data-v="{_sort_key(r.values.get(p))}">{_e(format_value(r.values.get(p)))}</td>' for p in others),
            f"<td>{_e(r.arm)}</td>",
            f'<td data-v="{r.iteration}">{r.iteration}</td>',
            f'<td data-v="{_sort_key(r.lab_hours)}">{_e(_hours(r.lab_hours))}</td>',
            f"<td>{_e(status)}{hit}</td>",
        ]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    head = "".join(f"<th>{_e(h)}</th>" for h in heads)
    note = "" if draw or spec.campaign.kind != "molecule" else (
        f'<p class="meta">Structures are drawn for up to {MAX_DRAWN_RESULTS} results; this campaign has '
        f"{len(results)}.</p>")
    return (f'{note}<table class="results sortable"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


def _other_properties(spec: CampaignSpec) -> dict[str, str]:
    """The measured properties besides the first objective, each with its unit (none for one objective)."""
    units = {**{c.property: c.unit for c in spec.constraints}, **{o.property: o.unit for o in spec.objective_list}}
    return {p: units.get(p, "") for p in spec.measured_properties if p != spec.objective.property}


def _hours(hours: float | None) -> str:
    """Lab-clock hours to a tenth (six minutes), as ``closedloop show`` prints them."""
    return "–" if hours is None else f"{hours:.1f}"


def _sort_key(value: float | None) -> str:
    """A cell's sort value: the number to 6 significant digits (enough to order, and no float's repr in the page)."""
    return "" if value is None else rounded(float(value), digits=6)


def _main_and_control(summary: dict[str, Any], key: str) -> str | None:
    """A per-arm count of the comparison as "main, control"; None without a comparison."""
    counts = summary.get(key) or {}
    arms = (summary["main_arm"], summary["control_arm"])
    if not all(a in counts for a in arms):
        return None
    return ", ".join(rounded(counts[a], digits=_STAT_DIGITS) for a in arms)


def summary_table_html(summary: dict[str, Any]) -> str:
    """The campaign's figures in one table (status, lab use, compute, the arms' comparison); the objective and the
    best found are the headline's."""
    status = summary["status"].replace("_", " ")
    stat = {"digits": _STAT_DIGITS}
    pairs: list[tuple[str, Any]] = [
        ("status", f"{status} ({summary['stop_reason']})" if summary["stop_reason"] else status),
        ("lab experiments", f"{summary['n_lab']} of {summary['lab_budget']} ({summary['n_lab_failed']} failed)"),
        ("hits", summary["n_hits"]),
        ("simulated lab time (h)", rounded(summary["lab_hours"], **stat)),
        ("simulator compute (s)", rounded(summary["compute_s"], **stat)),
        ("results per arm paired by iteration", summary.get("paired_experiments")),
        ("best level (utility either arm reached, paired)", _stat(summary.get("best_level"))),
        ("experiments to the best level (main, control; n + 1: never)",
         _main_and_control(summary, "experiments_to_best_level")),
        ("acceleration of the main arm over the control", _stat(summary.get("acceleration"))),
    ]
    if summary.get("n_imported"):
        pairs.insert(4, ("past results imported", summary["n_imported"]))
    rows = "\n".join(f"<tr><th>{_e(k)}</th><td>{_e(format_value(v))}</td></tr>" for k, v in pairs if v is not None)
    return f"<table>{rows}</table>"


def _stat(value: float | None) -> str | None:
    return None if value is None else rounded(value, digits=_STAT_DIGITS)


def arm_table_html(summary: dict[str, Any], results: Sequence[LabResult]) -> str:
    """Per arm: its lab results, its best value and candidate, and the experiments it took to reach it."""
    by_candidate = {(r.arm, r.candidate_id): r for r in results if r.status == "ok"}
    rows = []
    for arm, entry in summary["arms"].items():
        role = " (main)" if arm == summary["main_arm"] else " (control)" if arm == summary["control_arm"] else ""
        best = by_candidate.get((arm, entry.get("best_candidate_id")))
        value = format_value(entry["best_value"], best.sd if best else None)
        cells = [f"{arm}{role}", entry["n_lab"], value, best.label if best else entry.get("best_candidate_id"),
                 entry["experiments_to_best"]]
        rows.append("<tr>" + "".join(f"<td>{_e(format_value(c))}</td>" for c in cells) + "</tr>")
    head = ("<tr><th>arm</th><th>lab results (ok)</th><th>best value</th><th>best candidate</th>"
            "<th>experiments to its best</th></tr>")
    return f"<table>{head}{''.join(rows)}</table>"


def figure_html(file_name: str, alt: str, caption: str) -> str:
    return (f'<figure><img src="{_e(file_name)}" alt="{_e(alt)}">'
            f"<figcaption>{_e(caption)}</figcaption></figure>")


CSS = """body{font-family:system-ui,sans-serif;max-width:1180px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left;
vertical-align:middle}th{background:#f4f4f4}figure{margin:2em 0}img{max-width:100%}
figcaption{color:#555;font-size:.9em}.meta{color:#666;font-size:.9em}
.smiles{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.9em;word-break:break-all}
.headline{border:1px solid #ccc;border-radius:6px;padding:.8em 1.2em;background:#fafafa}
.headline .goal{font-size:1.15em;margin:.2em 0 .6em}.best{display:flex;gap:1.5em;align-items:center}
.best .label{margin:0;color:#666;text-transform:uppercase;font-size:.8em;letter-spacing:.05em}
.best .value{font-size:1.6em;font-weight:600;margin:.1em 0}.best p{margin:.2em 0}
.cards{display:flex;flex-wrap:wrap;gap:1em}.card{border:1px solid #ddd;border-radius:6px;padding:.5em;width:236px}
.card.wide{width:456px}.card p{margin:.25em 0}.card .value{font-weight:600}.structure svg{display:block;max-width:100%;height:auto}
.hit{background:#2ca02c;color:#fff;border-radius:3px;padding:0 .35em;font-size:.75em;font-weight:600}
table.results td .structure svg{width:120px}table.sortable th{cursor:pointer}
table.sortable th:hover{background:#e8e8e8}"""

_SORT_SCRIPT = """<script>
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("th").forEach(function (th, column) {
    th.addEventListener("click", function () {
      var body = table.tBodies[0], rows = Array.from(body.rows);
      var up = th.dataset.order !== "up"; th.dataset.order = up ? "up" : "down";
      function key(row) { var c = row.cells[column], v = c.dataset.v;
        return v !== undefined ? (v === "" ? Infinity : parseFloat(v)) : c.textContent; }
      rows.sort(function (a, b) { var x = key(a), y = key(b);
        var d = (typeof x === "number" && typeof y === "number") ? x - y : String(x).localeCompare(String(y));
        return up ? d : -d; });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
</script>"""


def page(title: str, meta: str, sections: Sequence[tuple[str, str]]) -> str:
    """The whole document: a title, a meta line, then each (heading, HTML) section; an empty heading adds none."""
    body = "\n".join((f"<h2>{_e(heading)}</h2>\n" if heading else "") + fragment for heading, fragment in sections)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title><style>{CSS}</style></head>
<body>
<h1>{_e(title)}</h1>
<p class="meta">{_e(meta)}</p>
{body}
{_SORT_SCRIPT}
</body></html>
"""
