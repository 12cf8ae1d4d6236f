"""Render benchmarks/RESULTS.md from benchmarks/results/discovery_*.json (numbers only; prose lives in the template).

Every ratio against BoTorch is against the better of ``botorch`` and ``botorch-onehot`` where both ran (the column
says which arms and, in the goal table, which one was better); each arm's own numbers stay in its row.
"""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path

from orchestrator.bench.metrics import BOTORCH_ARMS, botorch_reference, reference_label
from orchestrator.planner_registry import planner_names

SCALE_HEADING = "## Orchestration speed and scale"
SCALE_PLACEHOLDER = "(filled by benchmarks/scale.py)"
_SHOWN_FIRST = ("bo", "llm", "llm-shuffled", "bo-sf", "botorch", "botorch-onehot", "cheap-first")
ARM_ORDER = tuple(sorted(planner_names(), key=lambda arm: (_SHOWN_FIRST.index(arm) if arm in _SHOWN_FIRST
                                                           else len(_SHOWN_FIRST), arm == "random", arm)))
"""The registered arms (``planner_names()``) in the tables' order: the campaign arms, their ablations and
yardsticks first, any other arm by name, and the random control last. Arms a report holds but the registry does
not know are shown after them all."""
CAMPAIGN_BENCH = "ac3ecfc"
"""The commit from which ``closedloop bench`` runs every arm as a campaign; arms measured before it ran in the old
bench's own loop, which ``closedloop run`` does not have, and are shown marked, never as the campaign's numbers."""


@functools.cache
def is_campaign_bench(commit: str | None) -> bool:
    """Whether ``commit`` (``+dirty`` allowed) contains ``CAMPAIGN_BENCH``; unknown commits count as old."""
    if not commit or commit == "unknown":
        return False
    done = subprocess.run(["git", "merge-base", "--is-ancestor", CAMPAIGN_BENCH, commit.removesuffix("+dirty")],
                          cwd=Path(__file__).parent, capture_output=True)
    return done.returncode == 0


def arm_commit(report: dict, arm: str) -> str | None:
    """The code commit an arm of a report was measured at."""
    return report.get("arm_sources", {}).get(arm, {}).get("code_commit") or report.get("code_commit")


def _q(summary: dict, digits: str = ".3g") -> str:
    q1, q3 = summary["iqr"]
    return f"{summary['median']:{digits}} ({q1:{digits}}–{q3:{digits}})"


def _when(date: str | None) -> str:
    """An ISO timestamp to the minute, for a table caption."""
    return str(date or "?")[:16].replace("T", " ")


def reference_column(arms) -> str:
    """The heading of the ratio column: every ratio is against the better of the BoTorch arms that ran
    (``orchestrator.bench.metrics.botorch_reference``: fewer median lab experiments to a top-1 % candidate).

    Example:
        >>> reference_column(["bo", "botorch"]), reference_column(["botorch", "botorch-onehot"])
        ('vs botorch, top-1 %', 'vs best of botorch, botorch-onehot, top-1 %')
    """
    return f"vs {reference_label(arms)}, top-1 %"


def dataset_table(report: dict) -> list[str]:
    budget = report["lab_budget"]
    window = "n_in_window" in report  # a target objective: lab experiments to a value inside its window too
    arms = report["arms"]
    lines = ["| arm | lab exps to top-1 % | to top-5 % | " + ("to the window | " if window else "")
             + f"hits top-1 % | best at budget | AF vs random (top-5 %) | {reference_column(arms)} | total cost "
             "(lab-days) | wall s / run |",
             "| --- | ---: | ---: | " + ("---: | " if window else "") + "---: | ---: | ---: | ---: | ---: | ---: |"]
    best = botorch_reference({arm: s["experiments_to_top1"]["median"] for arm, s in arms.items()})
    reference = None if best is None else arms[best]["experiments_to_top1"]["median"]
    for arm in sorted(arms, key=lambda a: ARM_ORDER.index(a) if a in ARM_ORDER else 99):
        s = arms[arm]
        af = report["af_vs_random"].get(arm)
        ratio = ("reference" if arm == best and len([a for a in BOTORCH_ARMS if a in arms]) > 1 else
                 "" if reference is None or arm == best else f"{s['experiments_to_top1']['median'] / reference:.2f}×")
        cost_days = s["total_cost_s"] / 86400.0
        label = arm if is_campaign_bench(arm_commit(report, arm)) else f"{arm} (old bench, {arm_commit(report, arm) or '?'})"
        to_window = f"{_q(s['experiments_to_window'])} | " if window else ""
        lines.append(f"| {label} | {_q(s['experiments_to_top1'])} | {_q(s['experiments_to_top5'])} | {to_window}"
                     f"{s['hit_rate_top1'] * 100:.0f} % | {_q(s['best_at_budget'])} | "
                     f"{'' if af is None else f'{af:.2f}'} | {ratio} | {cost_days:.4g} | {s['wall_s']:.1f} |")
    lines.append("")
    lines.append(f"Pool {report['pool_size']} candidates ({report['n_csv_rows']} CSV rows), top-1 % = "
                 f"{report['n_top1']} candidates, top-5 % = {report['n_top5']}"
                 + (f", inside the window {report['n_in_window']}" if window else "")
                 + f"; {seeds_caption(report)}, budget "
                 f"{budget} lab experiments in batches of {report['batch']} (a run that never hits counts {budget + 1}); "
                 f"best in pool {report['best_in_pool']:.4g} ({report['best_at_budget_unit']}); "
                 f"features: {report['n_features']}, kernel {report['kernel']}.")
    sources = report.get("arm_sources", {})
    if sources:
        lines.append("")
        others = [arm for arm in report["arms"] if arm not in sources]
        commits = {src.get("code_commit", "?") for src in sources.values()}
        if not others and len(commits) == 1:
            first = min(_when(src.get("date")) for src in sources.values())
            lines.append(f"Every arm at commit {commits.pop()} (from {first} UTC).")
        else:
            lines.append("Run separately and merged: " + "; ".join(
                f"{arm} at commit {src.get('code_commit', '?')} ({_when(src.get('date'))} UTC)"
                for arm, src in sorted(sources.items())) + "."
                + (f" The other arms ran together ({_when(report.get('date'))} UTC)." if others else ""))
    return lines


def _median(report: dict, arm: str, key: str = "experiments_to_top1") -> float | None:
    summary = report["arms"].get(arm)
    if summary is None or not is_campaign_bench(arm_commit(report, arm)):
        return None
    return summary[key]["median"]


def goal_table(reports: dict[str, dict], datasets: dict) -> list[str]:
    """One row per data set: median lab experiments to top-1 % per arm, and bo against the better BoTorch arm.

    The goal: bo needs at most 0.75× the better BoTorch arm's experiments (botorch or botorch-onehot, whichever ran
    and needed fewer; the column says which), and at most 0.5× where a rung is informative.
    """
    lines = ["| data set | rung | bo | llm | bo-sf | botorch | botorch-onehot | cheap-first | random | bo / bo-sf "
             "| bo / cheap-first | bo / best BoTorch arm | goal | met? |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for name, report in reports.items():
        has_rung = bool(datasets[name]["rungs"])
        cells = []
        for arm in ("bo", "llm", "bo-sf", "botorch", "botorch-onehot", "cheap-first", "random"):
            value = _median(report, arm)
            cells.append("" if value is None else f"{value:g}")
        best = botorch_reference({arm: _median(report, arm) for arm in BOTORCH_ARMS})
        bo, ref = _median(report, "bo"), None if best is None else _median(report, best)
        goal = 0.5 if has_rung else 0.75
        sf = _median(report, "bo-sf")
        own = "" if bo is None or sf is None or not has_rung else f"{bo / sf:.2f}"
        cheap = _median(report, "cheap-first")
        by_rung = "" if bo is None or cheap is None or not has_rung else f"{bo / cheap:.2f}"
        if bo is None or ref is None:
            ratio = ""
            met = ("old bench; not re-run as campaigns yet" if {"bo", *BOTORCH_ARMS} & set(report["arms"])
                   else "botorch not run")
        else:
            ratio, met = f"{bo / ref:.2f} ({best})", ("yes" if bo / ref <= goal else "no")
        rung = datasets[name]["rungs"][0].split("=")[0] if has_rung else "—"
        lines.append(f"| {name} | {rung} | {' | '.join(cells)} | {own} | {by_rung} | {ratio} | ≤ {goal:g} | {met} |")
    return lines



def arms_by_seed_count(report: dict) -> dict[int, list[str]]:
    """The cell's arms grouped by how many seeds each ran (arms re-run with fewer seeds are merged into a cell),
    most seeds first."""
    groups: dict[int, list[str]] = {}
    for arm in report["config"]["arms"]:
        n = len(report["arms"][arm]["per_seed"]["seeds"]) if arm in report["arms"] else report["seeds"]
        groups.setdefault(n, []).append(arm)
    return dict(sorted(groups.items(), reverse=True))


def seeds_caption(report: dict) -> str:
    """"20 seeds", or "20 seeds (llm, llm-shuffled: 5)" when some arms ran fewer."""
    (most, _), *others = arms_by_seed_count(report).items()
    extra = "; ".join(f"{', '.join(arms)}: {n}" for n, arms in others)
    return f"{most} seeds" + (f" ({extra})" if extra else "")

def render(results_dir: Path, out: Path, datasets: dict, command_line) -> None:
    template = (Path(__file__).parent / "RESULTS.template.md").read_text()
    reports = {name: json.loads((results_dir / f"discovery_{name}.json").read_text())
               for name in datasets if (results_dir / f"discovery_{name}.json").exists()}
    sections = []
    for name, d in datasets.items():
        path = results_dir / f"discovery_{name}.json"
        if not path.exists():
            sections += [f"### {d['title']}", "", "(not run yet)", ""]
            continue
        report = json.loads(path.read_text())
        sections += [f"### {d['title']}", "", *dataset_table(report), ""]
        for n_seeds, arms in arms_by_seed_count(report).items():
            sections += [f"`{command_line(name, arms, n_seeds)}`", ""]
    text = template.replace("{{DISCOVERY_TABLES}}", "\n".join(sections).rstrip() + "\n")
    text = text.replace("{{GOAL_TABLE}}", "\n".join(goal_table(reports, datasets)))
    analysis = Path(__file__).parent / "RESULTS.analysis.md"
    text = text.replace("{{ANALYSIS}}", analysis.read_text().strip() if analysis.exists() else "")
    # The sections after the discovery tables belong to other benchmarks (orchestration, environment throughput,
    # scale): keep whatever they wrote, from the first top-level heading the template does not have.
    previous = out.read_text() if out.exists() else ""
    kept = _sections_not_in(previous, template) or f"{SCALE_HEADING}\n\n{SCALE_PLACEHOLDER}\n"
    out.write_text(text.rstrip() + "\n\n" + kept.rstrip() + "\n")


def _sections_not_in(previous: str, template: str) -> str:
    """``previous`` from its first ``## `` heading that ``template`` lacks to the end; "" when there is none."""
    headings = {line for line in template.splitlines() if line.startswith("## ")}
    offset = 0
    for line in previous.splitlines(keepends=True):
        if line.startswith("## ") and line.rstrip("\n") not in headings:
            return previous[offset:]
        offset += len(line)
    return ""
