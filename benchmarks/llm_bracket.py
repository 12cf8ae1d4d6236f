"""The embedded model's bracket: the default llm arm between a coin (``llm-random``) and an oracle (``llm-oracle``)
in its own slots and with its own lever, beside bo, on public discovery sets (issue 51).

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.llm_bracket --only crossed_barrel p3ht agnp perovskite
    .venv/bin/python -m benchmarks.llm_bracket --render        # only re-render RESULTS.llm_bracket.md

Each set is ``closedloop bench --arms llm-random,llm-oracle,llm,bo`` with the discovery table's flags
(``benchmarks.discovery.DATASETS``: budget 50, batch 5, one proposal per slot, lab noise 0), 20 seeds; the reports
go to ``benchmarks/results/llm_bracket/discovery_<name>.json`` and the table to ``benchmarks/RESULTS.llm_bracket.md``.
These pools have no proxy rung, so ``planner.model_prior = "auto"`` gives every llm arm its prior over the pool
(``orchestrator/spec_model_prior.py``): the model's estimates for ``llm``, a seeded coin's for ``llm-random``, the
truth for ``llm-oracle``; bo has none. The reports of the arm before the prior was on (the model's choice slots
alone) stay in ``benchmarks/results/llm_bracket_slots/``, rendered below the new table.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from benchmarks import discovery
from benchmarks.discovery import ROOT
from orchestrator.bench import paired_geomean_ratio
from orchestrator.bench.runner import bracket

RESULTS = ROOT / "results" / "llm_bracket"
SLOTS_ONLY = ROOT / "results" / "llm_bracket_slots"
TABLE = ROOT / "RESULTS.llm_bracket.md"
ARMS = "llm-random,llm-oracle,llm,bo"


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


def _ratio(report: dict, arm: str, other: str) -> str:
    arms = report["arms"]
    if arm not in arms or other not in arms:
        return "–"
    return f"{paired_geomean_ratio(arms[arm]['per_seed']['experiments_to_top1'], arms[other]['per_seed']['experiments_to_top1']):.2f}"


def _rows(reports: dict[str, dict], with_bo: bool) -> list[str]:
    lines = []
    for name, report in reports.items():
        arms = report["arms"]
        c = bracket(arms, "experiments_to_top1")  # today's rule over the stored runs
        differs = (f"{_share(_stat(report, 'llm', 'differs_from_bo_share'))} "
                   f"({_share(_stat(report, 'llm-random', 'differs_from_bo_share'))})")  # the coin in the same slots
        bo = [_median(arms["bo"]), _ratio(report, "llm-oracle", "bo"), _ratio(report, "llm", "bo")] if with_bo else []
        cells = [name, str(c.get("n_seeds", 0)), _median(arms["llm"]), _median(arms["llm-random"]),
                 _median(arms["llm-oracle"]), *bo, f"{c.get('ceiling_experiments', float('nan')):.2f}",
                 contribution_text(c), _share(_stat(report, "llm", "n_model_picks")), differs]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _verdict(reports: dict[str, dict]) -> str:
    """The embedded model's place in its bracket, in words: where its share of the ceiling is above or below zero
    (interval excluding it), and where the arm needs more lab experiments than bo alone (losses said as such)."""
    above, below, behind_bo = [], [], []
    for name, report in reports.items():
        c = bracket(report["arms"], "experiments_to_top1")
        if c.get("interval") and c["interval"][0] > 0:
            above.append(name)
        if c.get("interval") and c["interval"][1] < 0:
            below.append(name)
        if "bo" in report["arms"] and paired_geomean_ratio(
                report["arms"]["llm"]["per_seed"]["experiments_to_top1"],
                report["arms"]["bo"]["per_seed"]["experiments_to_top1"]) > 1:
            behind_bo.append(name)
    return (f"The embedded model's share of that ceiling is above zero (its interval excluding zero) on "
            f"{len(above)} of {len(reports)} sets ({', '.join(above) or 'none'}) and below zero, worse than the coin, "
            f"on {len(below)} ({', '.join(below) or 'none'}). The default llm arm needs more lab experiments than bo "
            f"alone on {len(behind_bo)} of {len(reports)} sets ({', '.join(behind_bo) or 'none'}): where the model's "
            "guess misleads, the prior's hedge does not yet keep its cost small.")


def render(reports: dict[str, dict], slots_only: dict[str, dict] | None = None) -> str:
    lines = ["# The embedded model's bracket: llm between a coin and an oracle, in its slots and with its prior", "",
             "Made by `benchmarks/llm_bracket.py` (its docstring has the command). `closedloop bench --arms "
             "llm-random,llm-oracle,llm,bo` with the discovery table's settings (budget 50, batch 5, one proposal per "
             "slot, lab noise 0), the spec's defaults otherwise: `planner.model_prior = \"auto\"` gives each llm arm "
             "its prior over the pool, surveyed before the first batch (the model's estimates, a seeded coin's, the "
             "truth) and charged 0.5 CPU-s a candidate; bo has none. Lab experiments to a top-1 % candidate, median "
             "(IQR) over seeds. `contribution` = (coin − llm) / (coin − oracle) on mean lab experiments over paired "
             "seeds, with a 95 % bootstrap interval over seeds (`orchestrator/bench/bracket.py`); `headroom` = mean "
             "lab experiments the oracle saves over the coin; `oracle / bo` and `llm / bo` = paired geometric means "
             "of lab experiments (below 1: fewer than bo). `model slots` = the model's own picks per campaign (of 50 "
             "lab experiments); `differs from bo` = the share of them bo, planning the same state, would not have "
             "made, beside the coin's in the same slots.", "",
             "| data set | seeds | llm | llm-random | llm-oracle | bo | oracle / bo | llm / bo | headroom | "
             "contribution (interval) | model slots | differs from bo: llm (llm-random) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|", *_rows(reports, with_bo=True)]
    ceiling = [n for n, r in reports.items() if "bo" in r["arms"] and paired_geomean_ratio(
        r["arms"]["llm-oracle"]["per_seed"]["experiments_to_top1"],
        r["arms"]["bo"]["per_seed"]["experiments_to_top1"]) <= 0.75]
    capped = [n for n, r in reports.items() if bracket(r["arms"], "experiments_to_top1").get("capped")]
    lines += ["", f"With its prior on, the default llm arm's oracle needs at least 25 % fewer lab experiments than bo "
              f"on {len(ceiling)} of {len(reports)} sets ({', '.join(ceiling) or 'none'}); the bracket is capped "
              f"(the oracle not measurably better than the coin) on {len(capped)} ({', '.join(capped) or 'none'})."]
    lines += ["", _verdict(reports)]
    if slots_only:
        lines += ["", "## Before the prior: the model's choice slots alone", "",
                  "The same bench on the llm arm as it was before `planner.model_prior` (commit ac8a4ad): the model "
                  "chooses between bo's next two candidates in one exploration slot per batch, and nothing else.", "",
                  "| data set | seeds | llm | llm-random | llm-oracle | headroom | contribution (interval) | "
                  "model slots | differs from bo: llm (llm-random) |",
                  "|---|---|---|---|---|---|---|---|---|", *_rows(slots_only, with_bo=False)]
        capped = [n for n, r in slots_only.items() if bracket(r["arms"], "experiments_to_top1").get("capped")]
        lines += ["", f"On {len(capped)} of {len(slots_only)} sets ({', '.join(capped) or 'none'}) an oracle in those "
                  "slots alone is not measurably better than a coin: no model can move the number there, which is "
                  "why the prior over the pool is on by default."]
    return "\n".join(lines) + "\n"


def reports(folder=RESULTS) -> dict[str, dict]:
    return {path.stem.removeprefix("discovery_"): json.loads(path.read_text())
            for path in sorted(folder.glob("discovery_*.json"))}


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
    TABLE.write_text(render(reports(), reports(SLOTS_ONLY)))
    print(TABLE.read_text())


if __name__ == "__main__":
    main()
