"""The model-prior lever of the llm arm (issue 51): its ceiling, and the embedded model's share of it.

The lever is a chat model's estimate of every candidate's lab value, read by the ladder as a proxy rung
(``orchestrator/policy/planners/llm_prior.py``: cold start by its ranking, a prior mean calibrated on the lab pairs,
dropped when they rule it out). Per data set, three bo campaigns on the same pool, seeds and budget:

- ``bo alone``: no prior (the lever off);
- ``oracle prior``: the rung holds the lab's truth (the ceiling: what a model that knew every answer would give);
- ``model prior`` (``--model-prior NAME``): the rung holds the embedded model's estimates, written by
  ``LLMPriorSimulator`` once per candidate (the survey a campaign would run, computed once here since it is the same
  for every seed and costs about half a CPU-second a candidate).

Every run is ``closedloop bench`` on a copy of the pool with the prior as a column (one row per candidate, replicates
averaged as the bench does), the rung charged ``SECONDS_PER_CANDIDATE`` a candidate. The table:

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.llm_lever --only crossed_barrel p3ht agnp perovskite \
        --model-prior crossed_barrel

writes ``benchmarks/results/llm_lever.json`` and ``benchmarks/RESULTS.llm_lever.md``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.discovery import BATCH, BUDGET, DATASETS, LAB_COST_S, ROOT
from orchestrator.bench import BenchConfig, load_problem, paired_geomean_ratio, parse_rung, run_bench
from orchestrator.bench.bracket import contribution
from orchestrator.policy.planners.llm_prior import SECONDS_PER_CANDIDATE, LLMPriorSimulator

RESULTS = ROOT / "results" / "llm_lever.json"
TABLE = ROOT / "RESULTS.llm_lever.md"


def _config(name: str, pool: Path, seeds: int, rung: str | None, workers: int) -> BenchConfig:
    cell = DATASETS[name]
    return BenchConfig(pool=str(pool), id_cols=tuple(cell["id_cols"]), objective=cell["objective"],
                       rungs=(parse_rung(rung),) if rung else (), lab_budget=BUDGET, seeds=seeds, arms=("bo",),
                       batch=BATCH, lab_cost_s=LAB_COST_S, workers=workers)


def prior_pool(name: str, workdir: Path, with_model: bool) -> Path:
    """The data set's pool, one row per candidate, with ``prior_oracle`` (the truth) and, ``with_model``,
    ``prior_model`` (the embedded model's estimate; empty where it gave none)."""
    cell = DATASETS[name]
    problem = load_problem(_config(name, cell["pool"], 1, None, 1), workdir / "load")
    pool = problem.pool
    frame = pd.DataFrame({c: pool.columns[c] for c in cell["id_cols"]})
    column = problem.spec.lab.oracle_column
    frame[column] = problem.values
    frame["prior_oracle"] = problem.values
    if with_model:
        objective = problem.spec.objective
        simulator = LLMPriorSimulator(target=objective.property, unit=objective.unit or "")
        observations = simulator.evaluate(list(pool.candidates))
        frame["prior_model"] = [o.properties.get("expected", np.nan) for o in observations]
    path = workdir / f"{name}.csv"
    frame.to_csv(path, index=False)
    return path


def measure(name: str, seeds: int, with_model: bool, workers: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        pool = prior_pool(name, workdir, with_model)
        variants = {"bo alone": None, "oracle prior": f"prior=prior_oracle:{SECONDS_PER_CANDIDATE}"}
        if with_model:
            variants["model prior"] = f"prior=prior_model:{SECONDS_PER_CANDIDATE}"
        out = {}
        for label, rung in variants.items():
            report = run_bench(_config(name, pool, seeds, rung, workers), show_progress=False)
            arm = report["arms"]["bo"]
            out[label] = {"experiments_to_top1": arm["experiments_to_top1"],
                          "per_seed": arm["per_seed"]["experiments_to_top1"], "seeds": arm["per_seed"]["seeds"],
                          "rung_cost_s": arm["rung_cost_s"]}
            if label == "model prior":
                out[label]["n_distinct_estimates"] = int(pd.read_csv(pool)["prior_model"].nunique())
    alone, oracle = out["bo alone"]["per_seed"], out["oracle prior"]["per_seed"]
    result = {"variants": out, "ceiling_paired_geomean": paired_geomean_ratio(oracle, alone)}
    if with_model:
        result["model_share"] = contribution(out["model prior"]["per_seed"], alone, oracle)
    return result


def render(results: dict) -> str:
    lines = ["# The model-prior lever: ceiling and the embedded model's share", "",
             "Made by `benchmarks/llm_lever.py` (its docstring has the command). bo campaigns on the public sets, "
             f"budget {BUDGET}, batch {BATCH}, one proposal per slot, lab noise 0 (the discovery tables' settings), "
             f"the prior rung charged {SECONDS_PER_CANDIDATE} CPU-s a candidate. Lab experiments to a top-1 % "
             "candidate: median (IQR) over seeds; the ceiling is the paired geometric mean of oracle prior over bo "
             "alone (below 1: fewer).", "",
             "| data set | seeds | bo alone | oracle prior | ceiling | model prior | model's share (interval) |",
             "|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        v = r["variants"]

        def cell(label):
            if label not in v:
                return "not run"
            s = v[label]["experiments_to_top1"]
            return f"{s['median']:g} ({s['iqr'][0]:g}–{s['iqr'][1]:g})"

        share = r.get("model_share")
        share_text = "not run" if share is None else (
            "no headroom" if share["point"] is None else
            f"{share['point']:.2f} ({share['interval'][0]:.2f} to {share['interval'][1]:.2f})")
        lines.append(f"| {name} | {len(v['bo alone']['seeds'])} | {cell('bo alone')} | {cell('oracle prior')} | "
                     f"{r['ceiling_paired_geomean']:.2f} | {cell('model prior')} | {share_text} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", required=True)
    parser.add_argument("--model-prior", nargs="*", default=[], help="data sets to score with the embedded model")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--render", action="store_true", help="only re-render the table")
    args = parser.parse_args(argv)
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    if not args.render:
        for name in args.only:
            results[name] = measure(name, args.seeds, name in args.model_prior, args.workers)
            RESULTS.write_text(json.dumps(results, indent=1))
            print(f"{name}: ceiling {results[name]['ceiling_paired_geomean']:.2f}", flush=True)
    TABLE.write_text(render(results))
    print(TABLE.read_text())


if __name__ == "__main__":
    main()
