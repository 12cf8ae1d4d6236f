"""A campaign report from its ledger alone: ``index.html``, ``results.csv`` and four PNG plots (six for several
objectives: the Pareto front's, ``report_front``).

The page (``report_html``) opens with the target and the best so far with its uncertainty, then the best candidates
(drawn, for molecules), every lab result (``report_results``; also ``results.csv``), the summary and the arms, the
plots, and last an "RL" section with the rewards. Candidates are named by SMILES, formula or conditions, never by
their ids, and numbers are rounded to their precision (``vocabulary.numbers``).

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
from orchestrator.replay.report_front import FRONT_FIGURES
from orchestrator.replay.report_html import format_value
from orchestrator.spec import CampaignSpec
from vocabulary.events import (
    CampaignStarted,
    Dispatched,
    Observed,
    Proposed,
    Screened,
    Simulated,
)
from vocabulary.numbers import rounded

__all__ = [
    "N_BEST",
    "REPORT_FIGURES",
    "RESULTS_CSV",
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

RESULTS_CSV = "results.csv"
"""Every lab result, written next to ``index.html`` (``report_results.results_rows``)."""

N_BEST = 6
"""Distinct candidates shown, drawn, under "Best candidates"."""


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


def write_report(ledger: Ledger, campaign_id: str, out_dir: str | Path, *, force: bool = False) -> Path:
    """Write ``index.html``, ``results.csv`` and the PNGs of ``REPORT_FIGURES`` into ``out_dir`` (created if needed).

    Each file is written whole beside its place and then published there (``ledger.outputs``): files of an earlier
    report are replaced only with ``force``, and a link, FIFO or device in their place, or an ``out_dir`` that is a
    file or a link, is refused before anything is written.

    Returns:
        The path of ``index.html``; the other files sit next to it and the HTML links them by relative path.

    Raises:
        OutputPathError: something at ``out_dir`` or at one of the report's files may not be replaced.
    """
    from orchestrator.loop.summary import summarise
    from orchestrator.replay import report_html as page
    from orchestrator.replay.report_results import (
        best_results,
        lab_results,
        results_columns,
        results_rows,
    )
    from orchestrator.replay.report_rewards import rewards_section

    spec = _spec(ledger, campaign_id)
    out = output_dir(out_dir)
    front_files = list(FRONT_FIGURES.values()) if spec.is_multi_objective else []
    for name in (*REPORT_FIGURES.values(), *front_files, RESULTS_CSV, "index.html"):
        check_output_path(out / name, force=force)  # all of them first: a refusal writes nothing
    summary = summarise(ledger, campaign_id)
    results = lab_results(ledger, campaign_id)
    best = best_results(results, spec, n=N_BEST)
    with output_file(out / RESULTS_CSV, force=force) as tmp:
        _write_csv(tmp, results_columns(spec), results_rows(results, spec))
    captions = _draw_figures(ledger, campaign_id, spec, out, force=force)
    front = _front_section(ledger, campaign_id, spec, out, force=force) if spec.is_multi_objective else None
    meta = (f"{len(ledger.events(campaign_id))} events from "
            f"{make_url(summary['db']).render_as_string(hide_password=True)}; "
            f"generated {datetime.now(UTC).isoformat(timespec='seconds')}")
    figures = "\n".join(page.figure_html(REPORT_FIGURES[key], key, text) for key, text in captions.items()
                        if key != "rewards")
    rl = ("<p>For the people training the planner: rubric rewards and each rung's calibration against the lab. "
          "Nothing here is needed to read the campaign's results.</p>"
          + page.figure_html(REPORT_FIGURES["rewards"], "rewards", captions["rewards"])
          + rewards_section(ledger, campaign_id))
    sections = [
        ("", page.headline_html(spec, best[0] if best else None, len(results))),
        ("Summary", page.summary_table_html(summary)),
        *([("Pareto front", front)] if front is not None else []),
        ("Best candidates", page.best_candidates_html(best, spec)),
        ("Results", f'<p class="meta">Every lab result, in the order recorded; also in '
                    f'<a href="{RESULTS_CSV}">{RESULTS_CSV}</a>. Click a column to sort.</p>'
                    + page.results_table_html(results, spec)),
        ("Main arm against control", page.arm_table_html(summary, results)),
        ("Plots", figures),
        ("RL", rl),
    ]
    index = out / "index.html"
    with output_file(index, force=force) as tmp:
        tmp.write_text(page.page(f"{summary['name']} — {campaign_id}", meta, sections), encoding="utf-8")
    return index


def _front_section(ledger: Ledger, campaign_id: str, spec: CampaignSpec, out: Path, *, force: bool) -> str:
    """Draw the PNGs of ``FRONT_FIGURES`` into ``out`` and return the "Pareto front" section (several objectives)."""
    from orchestrator.replay.report_front import (
        draw_front_figures,
        front_data,
        front_section_html,
    )

    data = front_data(ledger, campaign_id, spec)
    if data is None:
        return "<p>No lab result has every objective measured yet.</p>"
    with (output_file(out / FRONT_FIGURES["pareto"], force=force) as pareto,
          output_file(out / FRONT_FIGURES["hypervolume"], force=force) as curve):
        draw_front_figures(data, spec, {"pareto": pareto, "hypervolume": curve})
    return front_section_html(data, spec)


def _write_csv(path: Path, columns: list[str], rows: list[dict[str, Any]]) -> None:
    import csv

    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows({k: "" if v is None else v for k, v in row.items()} for row in rows)


def _draw_figures(ledger: Ledger, campaign_id: str, spec: CampaignSpec, out: Path, *, force: bool) -> dict[str, str]:
    """Draw the PNGs of ``REPORT_FIGURES`` into ``out``; returns their captions."""
    from orchestrator.replay import report_plots as plots

    arms = [spec.planner.main] + ([spec.planner.control] if spec.planner.control else [])
    objective = spec.objective
    unit = f" ({objective.unit})" if objective.unit else ""
    lines: dict[str, float] = {}
    band = None
    if objective.direction == "target":
        lines = {f"target ± {rounded(objective.tolerance)}": objective.target}
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
    return {
        "best_so_far": f"Best {objective.property} found so far by each arm, against that arm's lab experiments "
                       "and against simulated lab time since the first dispatch.",
        "funnel": "Distinct candidates reaching each stage, by arm: "
                  + " → ".join(f"{name} {sum(counts.values())}" for name, counts in funnel) + ".",
        "gantt": f"Lab timeline: {gantt.note}.",
        "rewards": "Rubric rewards per iteration and stage: the weighted criterion scores of each subject (current "
                   "scores only), averaged over the subjects of that step.",
    }
