"""The embedded model's bracket: the llm arm between a coin (``llm-random``) and an oracle (``llm-oracle``) in its
own slots, on public discovery sets (issue 51).

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.llm_bracket --only crossed_barrel p3ht agnp perovskite
    .venv/bin/python -m benchmarks.llm_bracket --render        # only re-render RESULTS.llm_bracket.md

Each set is ``closedloop bench --arms llm-random,llm-oracle,llm`` with the discovery table's flags
(``benchmarks.discovery.DATASETS``: budget 50, batch 5, one proposal per slot, lab noise 0), 20 seeds; the reports
go to ``benchmarks/results/llm_bracket/discovery_<name>.json`` and the table to ``benchmarks/RESULTS.llm_bracket.md``.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from benchmarks import discovery
from benchmarks.discovery import ROOT
from orchestrator.bench.runner import bracket

RESULTS = ROOT / "results" / "llm_bracket"
TABLE = ROOT / "RESULTS.llm_bracket.md"
ARMS = "llm-random,llm-oracle,llm"


def _median(arm: dict) -> str:
    s = arm["experiments_to_top1"]
    return f"{s['median']:g} ({s['iqr'][0]:g}–{s['iqr'][1]:g})"


def _stat(report: dict, arm: str, key: str) -> float | None:
    values = [r["notes"].get("planner_stats", {}).get(arm, {}).get(key) for r in report["runs"] if r["arm"] == arm]
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def contribution_text(c: dict | None) -> str:
    """A ``bracket.contribution`` as a table cell: the share with its interval, or why there is none."""
    if c is None:
        return "not run"
    if c.get("capped"):
        return f"capped (headroom {c['ceiling_interval'][0]:.1f} to {c['ceiling_interval'][1]:.1f})"
    if c.get("point") is None:
        return "no headroom"
    return f"{c['point']:.2f} ({c['interval'][0]:.2f} to {c['interval'][1]:.2f})"


def render(reports: dict[str, dict]) -> str:
    lines = ["# The embedded model's bracket: llm between a coin and an oracle in its own slots", "",
             "Made by `benchmarks/llm_bracket.py` (its docstring has the command). `closedloop bench` with the "
             "discovery table's settings (budget 50, batch 5, one proposal per slot, lab noise 0). Lab experiments "
             "to a top-1 % candidate, median (IQR) over seeds. `contribution` = (coin − llm) / (coin − oracle) on "
             "mean lab experiments over paired seeds, with a 95 % bootstrap interval over seeds "
             "(`orchestrator/bench/bracket.py`); `headroom` = mean lab experiments the oracle saves over the coin. "
             "`model slots` = the model's own picks per campaign (of 50 lab experiments); `differs from bo` = the share "
             "of them bo, planning the same state, would not have made, beside the coin's in the same slots.", "",
             "| data set | seeds | llm | llm-random | llm-oracle | headroom | contribution (interval) | model slots |"
             " differs from bo: llm (llm-random) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, report in reports.items():
        arms = report["arms"]
        c = bracket(arms, "experiments_to_top1")  # today's rule over the stored runs
        text = contribution_text(c)
        differs = (f"{_share(_stat(report, 'llm', 'differs_from_bo_share'))} "
                   f"({_share(_stat(report, 'llm-random', 'differs_from_bo_share'))})")  # the coin in the same slots
        lines.append(f"| {name} | {c.get('n_seeds', 0)} | {_median(arms['llm'])} | {_median(arms['llm-random'])} | "
                     f"{_median(arms['llm-oracle'])} | {c.get('ceiling_experiments', float('nan')):.2f} | {text} | "
                     f"{_share(_stat(report, 'llm', 'n_model_picks'))} | {differs} |")
    capped = [name for name, report in reports.items() if bracket(report["arms"], "experiments_to_top1").get("capped")]
    lines += ["", f"On {len(capped)} of {len(reports)} sets ({', '.join(capped) or 'none'}) an oracle in the model's "
              "slots is not measurably better than a coin: in one exploration slot per batch, choosing between bo's "
              "next two candidates, no model can move the number, so the embedded model's share there is not "
              "defined. The lever with room is in RESULTS.llm_lever.md."]
    return "\n".join(lines) + "\n"


def reports() -> dict[str, dict]:
    return {path.stem.removeprefix("discovery_"): json.loads(path.read_text())
            for path in sorted(RESULTS.glob("discovery_*.json"))}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", default=[])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--render", action="store_true")
    args = parser.parse_args(argv)
    if not args.render and args.only:
        RESULTS.mkdir(parents=True, exist_ok=True)
        discovery.main(["--only", *args.only, "--arms", ARMS, "--seeds", str(args.seeds), "--workers",
                        str(args.workers), "--results", str(RESULTS)])
    TABLE.write_text(render(reports()))
    print(TABLE.read_text())


if __name__ == "__main__":
    main()
