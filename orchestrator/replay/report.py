"""A campaign report from its ledger alone: ``index.html`` with a summary table and four PNG plots.

The plots: best so far against lab experiments and against lab time (main arm against control), the ladder funnel,
a Gantt of the lab stations, and rewards over steps. Each figure is computed by a small function here (ledger ->
plain data) and drawn by ``report_plots`` (plain data -> PNG). Times are lab-clock hours since the first dispatch.

Example:
    >>> from vocabulary.events import CampaignStarted
    >>> ledger = Ledger.open(":memory:")
    >>> _ = ledger.append("c1", CampaignStarted(name="demo", seed=0, spec={}), key="started")
    >>> ladder_funnel(ledger, "c1", [])
    [('proposed', {}), ('lab', {})]
"""

from __future__ import annotations

import html
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from sqlalchemy.engine import make_url

from orchestrator.ledger import Ledger, LedgerError
from orchestrator.ledger.outputs import check_output_path, output_dir, output_file
from orchestrator.loop.resume_policy import recorded_spec
from orchestrator.loop.upcast import records
from orchestrator.spec import CampaignSpec
from vocabulary.events import (
    CampaignStarted,
    Dispatched,
    Observed,
    Proposed,
    Screened,
    Simulated,
)

__all__ = [
    "REPORT_FIGURES",
    "GanttData",
    "best_so_far",
    "format_value",
    "ladder_funnel",
    "lab_origin_s",
    "rewards_by_step",
    "station_gantt",
    "write_report",
]

REPORT_FIGURES = {
    "best_so_far": "best_so_far.png",
    "funnel": "funnel.png",
    "gantt": "gantt.png",
    "rewards": "rewards.png",
}
"""Figure name -> file name, as written next to ``index.html``."""


@dataclass(frozen=True)
class GanttData:
    """Busy intervals to draw: ``rows`` are (job key, station, start h, end h); ``job_arms`` maps job key -> arm.

    ``source`` is ``"simlab"`` when the stations were rebuilt by replaying the simulated lab, ``"jobs"`` for one bar
    per lab job from dispatch to result; ``note`` says why, for the report.
    """

    rows: list[tuple[str, str, float, float]]
    job_arms: dict[str, str]
    source: Literal["simlab", "jobs"]
    note: str


def _spec(ledger: Ledger, campaign_id: str) -> CampaignSpec:
    if not ledger.events(campaign_id, types=[CampaignStarted.type]):
        known = ledger.campaign_ids_with_events()
        raise LedgerError(f"campaign {campaign_id!r} is not in {ledger.url}; campaigns there: {known}")
    return recorded_spec(ledger, campaign_id)


def lab_origin_s(ledger: Ledger, campaign_id: str) -> float:
    """Lab clock of the first dispatch (s), the origin of the report's time axes (as ``context.lab_time_s``)."""
    starts = [e.payload["sim_time_s"] for e in ledger.events(campaign_id, types=[Dispatched.type])]
    return min(starts) if starts else 0.0


def best_so_far(
    ledger: Ledger, campaign_id: str, spec: CampaignSpec
) -> dict[str, list[tuple[int, float, float | None]]]:
    """Per arm, after each of its lab results: (its experiment count, lab hours, best value so far).

    "Best" is by the objective's utility (so a target objective tracks the value closest to the target); failed
    runs count as experiments and leave the best unchanged (None until the first success). Imported results are
    history, not this campaign's experiments, and are left out.
    """
    origin = lab_origin_s(ledger, campaign_id)
    curves: dict[str, list[tuple[int, float, float | None]]] = defaultdict(list)
    best: dict[str, tuple[float, float]] = {}
    for event in ledger.events(campaign_id, types=[Observed.type]):
        observed = event.typed()
        if observed.provenance != "lab":
            continue
        if observed.status == "ok" and observed.value is not None:
            utility = spec.objective.utility(observed.value)
            if observed.arm not in best or utility > best[observed.arm][0]:
                best[observed.arm] = (utility, observed.value)
        n = len(curves[observed.arm]) + 1
        value = best[observed.arm][1] if observed.arm in best else None
        curves[observed.arm].append((n, (observed.sim_time_s - origin) / 3600.0, value))
    return dict(curves)


def ladder_funnel(ledger: Ledger, campaign_id: str, rungs: list[str]) -> list[tuple[str, dict[str, int]]]:
    """How many distinct candidates reached each stage, per arm: ``proposed``, each rung in ladder order, ``lab``."""
    arm_of: dict[str, str] = {}
    for event in ledger.events(campaign_id, types=[Proposed.type]):
        arm_of.setdefault(event.payload["candidate_id"], event.payload["arm"])
    reached: dict[str, set[str]] = {rung: set() for rung in rungs}
    for event in ledger.events(campaign_id, types=[Simulated.type, Screened.type]):
        for kind, p in records(event):
            if kind == Simulated.type:
                reached.setdefault(p["rung"], set()).add(p["candidate_id"])
    dispatched = {
        e.payload["candidate_id"]: e.payload["arm"] for e in ledger.events(campaign_id, types=[Dispatched.type])
    }

    def count(candidates: dict[str, str]) -> dict[str, int]:
        counts: dict[str, int] = {}
        for arm in candidates.values():
            counts[arm] = counts.get(arm, 0) + 1
        return counts

    stages = [("proposed", count(arm_of))]
    stages += [(rung, count({c: arm_of.get(c, "?") for c in ids})) for rung, ids in reached.items()]
    stages.append(("lab", count(dispatched)))
    return stages


def _job_bars(ledger: Ledger, campaign_id: str, origin: float) -> list[tuple[str, str, float, float]]:
    jobs = ledger.lab_jobs(campaign_id)
    now = max([j.submitted_s if j.completed_s is None else j.completed_s for j in jobs], default=origin)
    return [
        (j.job_key, "lab jobs", (j.submitted_s - origin) / 3600.0,
         ((j.completed_s if j.completed_s is not None else now) - origin) / 3600.0)
        for j in sorted(jobs, key=lambda j: j.dispatched_seq)
    ]


def station_gantt(ledger: Ledger, campaign_id: str, spec: CampaignSpec) -> GanttData:
    """Station busy intervals, rebuilt by replaying the simulated lab; one bar per job when that is impossible.

    A remote or real lab keeps its own timeline, so only the dispatch and result times in the ledger are known;
    a simulated lab is deterministic and ``build_context`` replays it to the recorded state.
    """
    origin = lab_origin_s(ledger, campaign_id)
    job_arms = {j.job_key: j.arm for j in ledger.lab_jobs(campaign_id)}
    if spec.lab.driver != "simlab":
        note = f"one bar per lab job, dispatch to result: the {spec.lab.driver!r} lab keeps its own station timeline"
        return GanttData(_job_bars(ledger, campaign_id, origin), job_arms, "jobs", note)
    from orchestrator.loop.context import build_context

    try:
        ctx = build_context(spec, ledger, campaign_id)
    except Exception as exc:  # noqa: BLE001 - any failure to rebuild the lab falls back to the recorded job times
        note = ("one bar per lab job, dispatch to result: the simulated lab could not be rebuilt "
                f"({type(exc).__name__}: {exc})")
        return GanttData(_job_bars(ledger, campaign_id, origin), job_arms, "jobs", note)
    try:
        gantt = ctx.driver.metrics().gantt
    finally:
        ctx.close()
    rows = [(key, station, (start - origin) / 3600.0, (end - origin) / 3600.0) for key, station, start, end in gantt]
    return GanttData(rows, job_arms, "simlab", "station intervals from a replay of the simulated lab")


def rewards_by_step(ledger: Ledger, campaign_id: str) -> dict[str, list[tuple[int, float]]]:
    """Per stage, (iteration, mean over subjects of the summed weight x value of their current scores).

    Superseded (provisional) scores are replaced by the scores that superseded them, never counted twice.
    """
    per_subject: dict[tuple[str, int, str], float] = defaultdict(float)
    for score in ledger.scores(campaign_id):
        if score.superseded_by_seq is None:
            per_subject[(score.stage, score.iteration, score.subject)] += score.weight * score.value
    grouped: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for (stage, iteration, _), reward in per_subject.items():
        grouped[stage][iteration].append(reward)
    return {
        stage: [(iteration, sum(values) / len(values)) for iteration, values in sorted(by_iteration.items())]
        for stage, by_iteration in grouped.items()
    }


# ------------------------------------------------------------------------------------------------------- html
def format_value(value: Any) -> str:
    """A table cell: "–" for none, four significant digits for a float, else ``str``."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _rows(pairs: list[tuple[str, Any]]) -> str:
    return "\n".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(format_value(v))}</td></tr>" for k, v in pairs)


def _summary_pairs(summary: dict[str, Any]) -> list[tuple[str, Any]]:
    objective = summary["objective"]
    unit = f" {objective['unit']}" if objective.get("unit") else ""
    goal = (f"target {objective['target']:g} ± {objective['tolerance']:g}" if objective["direction"] == "target"
            else objective["direction"])
    best = summary["best"]
    return [
        ("status", f"{summary['status']} ({summary['stop_reason']})" if summary["stop_reason"] else summary["status"]),
        ("objective", f"{objective['property']}{unit}: {goal}"),
        ("best found", None if best is None else f"{format_value(best['value'])}{unit} ({best['arm']}): {best['label']}"),
        ("lab experiments", f"{summary['n_lab']} of {summary['lab_budget']} ({summary['n_lab_failed']} failed)"),
        ("hits", summary["n_hits"]),
        ("simulated lab time (h)", summary["lab_hours"]),
        ("simulator compute (s)", summary["compute_s"]),
        ("results per arm paired by iteration", summary.get("paired_experiments")),
        ("best level (utility either arm reached, paired)", summary.get("best_level")),
        ("experiments to the best level (main, control; n + 1: never)", _main_and_control(summary, "experiments_to_best_level")),
        ("acceleration of the main arm over the control", summary.get("acceleration")),
    ]


def _main_and_control(summary: dict[str, Any], key: str) -> str | None:
    """A per-arm count of the comparison as "main, control"; None without a comparison."""
    counts = summary.get(key) or {}
    arms = (summary["main_arm"], summary["control_arm"])
    return ", ".join(str(counts[a]) for a in arms) if all(a in counts for a in arms) else None


def _arm_table(summary: dict[str, Any]) -> str:
    rows = []
    for arm, entry in summary["arms"].items():
        role = " (main)" if arm == summary["main_arm"] else " (control)" if arm == summary["control_arm"] else ""
        cells = [f"{arm}{role}", entry["n_lab"], entry["best_value"], entry["experiments_to_best"]]
        rows.append("<tr>" + "".join(f"<td>{html.escape(format_value(c))}</td>" for c in cells) + "</tr>")
    head = "<tr><th>arm</th><th>lab results (ok)</th><th>best value</th><th>experiments to its best</th></tr>"
    return f"<table>{head}{''.join(rows)}</table>"


_CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left}
th{background:#f4f4f4}figure{margin:2em 0}img{max-width:100%}figcaption{color:#555;font-size:.9em}
.meta{color:#666;font-size:.9em}"""


def _html(summary: dict[str, Any], n_events: int, captions: dict[str, str]) -> str:
    name = html.escape(f"{summary['name']} — {summary['campaign_id']}")
    figures = "\n".join(
        f'<figure><img src="{REPORT_FIGURES[key]}" alt="{html.escape(key)}">'
        f"<figcaption>{html.escape(text)}</figcaption></figure>"
        for key, text in captions.items()
    )
    meta = (f"{n_events} events from {make_url(summary['db']).render_as_string(hide_password=True)}; "
            f"generated {datetime.now(UTC).isoformat(timespec='seconds')}")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{name}</title><style>{_CSS}</style></head>
<body>
<h1>{name}</h1>
<p class="meta">{html.escape(meta)}</p>
<h2>Summary</h2>
<table>{_rows(_summary_pairs(summary))}</table>
<h2>Main arm against control</h2>
{_arm_table(summary)}
<h2>Plots</h2>
{figures}
</body></html>
"""


def write_report(ledger: Ledger, campaign_id: str, out_dir: str | Path, *, force: bool = False) -> Path:
    """Write ``index.html`` and the PNGs of ``REPORT_FIGURES`` into ``out_dir`` (created if needed).

    Each file is written whole beside its place and then published there (``ledger.outputs``): files of an earlier
    report are replaced only with ``force``, and a link, FIFO or device in their place, or an ``out_dir`` that is a
    file or a link, is refused before anything is written.

    Returns:
        The path of ``index.html``; the PNGs sit next to it and the HTML links them by relative path.

    Raises:
        OutputPathError: something at ``out_dir`` or at one of the report's files may not be replaced.
    """
    from orchestrator.loop.summary import summarise
    from orchestrator.replay import report_plots as plots

    spec = _spec(ledger, campaign_id)
    out = output_dir(out_dir)
    for name in (*REPORT_FIGURES.values(), "index.html"):
        check_output_path(out / name, force=force)  # all of them first: a refusal writes nothing
    summary = summarise(ledger, campaign_id)
    arms = [spec.planner.main] + ([spec.planner.control] if spec.planner.control else [])
    objective = spec.objective
    unit = f" ({objective.unit})" if objective.unit else ""
    lines: dict[str, float] = {}
    band = None
    if objective.direction == "target":
        lines = {f"target ± {objective.tolerance:g}": objective.target}
        band = (objective.target - objective.tolerance, objective.target + objective.tolerance)
    elif spec.stop.threshold is not None:
        lines = {"hit threshold": spec.stop.threshold}
    curves = best_so_far(ledger, campaign_id, spec)
    with output_file(out / REPORT_FIGURES["best_so_far"], force=force) as tmp:
        plots.plot_best_so_far(curves, tmp, arms=arms, value_label=f"best {objective.property}{unit}",
                               reference_lines=lines, band=band)
    funnel = ladder_funnel(ledger, campaign_id, [rung.name for rung in spec.ladder])
    with output_file(out / REPORT_FIGURES["funnel"], force=force) as tmp:
        plots.plot_funnel(funnel, tmp)
    gantt = station_gantt(ledger, campaign_id, spec)
    with output_file(out / REPORT_FIGURES["gantt"], force=force) as tmp:
        plots.plot_gantt(gantt.rows, gantt.job_arms, tmp, arms=arms,
                         title="lab stations" if gantt.source == "simlab" else "lab jobs")
    with output_file(out / REPORT_FIGURES["rewards"], force=force) as tmp:
        plots.plot_rewards(rewards_by_step(ledger, campaign_id), tmp)
    captions = {
        "best_so_far": f"Best {objective.property} found so far by each arm, against that arm's lab experiments "
                       "and against simulated lab time since the first dispatch.",
        "funnel": "Distinct candidates reaching each stage, by arm: "
                  + " → ".join(f"{name} {sum(counts.values())}" for name, counts in funnel) + ".",
        "gantt": f"Lab timeline: {gantt.note}.",
        "rewards": "Rubric rewards per iteration and stage: the weighted criterion scores of each subject (current "
                   "scores only), averaged over the subjects of that step.",
    }
    index = out / "index.html"
    from orchestrator.replay.report_rewards import insert_rewards_section

    with output_file(index, force=force) as tmp:
        tmp.write_text(insert_rewards_section(_html(summary, len(ledger.events(campaign_id)), captions), ledger,
                                              campaign_id), encoding="utf-8")
    return index
