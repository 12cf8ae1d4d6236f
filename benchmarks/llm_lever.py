"""The model-prior lever of the llm arm (issue 51): its ceiling, and the embedded model's share of it.

The lever is a chat model's estimate of every candidate's lab value, read by the ladder as a proxy rung
(``orchestrator/policy/planners/llm_prior.py``: cold start by its ranking, a prior mean calibrated on the lab pairs,
dropped when they rule it out). Per data set, three bo campaigns on the same pool, seeds and budget:

- ``bo alone``: no prior (the lever off);
- ``oracle prior``: the rung holds the lab's truth (the ceiling: what a model that knew every answer would give);
- ``coin prior``: the rung holds random numbers, a new draw for every seed (the lever's floor: a prior that knows
  nothing; one draw for all seeds would make every seed the same campaign);
- ``constant prior``: the rung holds one value for every candidate (a control: it knows nothing, and shows what
  the ladder makes of ties, which keep the pool's order);
- ``model prior`` (``--model-prior NAME``): the rung holds the embedded model's estimates, written by
  ``LLMPriorSimulator`` once per candidate (the survey a campaign would run, computed once here since it is the same
  for every seed and costs about a CPU-second a candidate; the estimates are kept in
  ``benchmarks/results/llm_lever_estimates/``).

Every run is ``closedloop bench`` on a copy of the pool with the prior as a column (one row per candidate, replicates
averaged as the bench does), the rung charged ``SECONDS_PER_CANDIDATE`` a candidate. The table:

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.llm_lever --only crossed_barrel p3ht agnp perovskite \
        --model-prior crossed_barrel p3ht agnp perovskite [--variants "coin prior"]

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
from benchmarks.llm_bracket import contribution_text
from orchestrator.bench import (
    BenchConfig,
    load_problem,
    paired_geomean_ratio,
    parse_rung,
    run_bench,
    summarise,
)
from orchestrator.bench.bracket import contribution
from orchestrator.policy.planners.llm_prior import (
    SECONDS_PER_CANDIDATE,
    LLMPriorSimulator,
)

RESULTS = ROOT / "results" / "llm_lever.json"
TABLE = ROOT / "RESULTS.llm_lever.md"
ESTIMATES = ROOT / "results" / "llm_lever_estimates"
COIN_SEEDS = 20
"""Coin priors drawn per data set: one per campaign seed (``--seeds`` at most this)."""


def _config(name: str, pool: Path, seeds: int, rung: str | None, workers: int, first_seed: int = 0) -> BenchConfig:
    cell = DATASETS[name]
    return BenchConfig(pool=str(pool), id_cols=tuple(cell["id_cols"]), objective=cell["objective"],
                       rungs=(parse_rung(rung),) if rung else (), lab_budget=BUDGET, seeds=seeds, arms=("bo",),
                       batch=BATCH, lab_cost_s=LAB_COST_S, workers=workers, first_seed=first_seed)


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
    frame["prior_constant"] = 0.0
    for seed in range(COIN_SEEDS):  # a prior that knows nothing, with spread: drawn anew for every campaign seed
        frame[f"prior_coin_{seed}"] = np.random.default_rng(seed).random(len(frame))
    if with_model:
        frame["prior_model"] = model_estimates(name, problem)
    path = workdir / f"{name}.csv"
    frame.to_csv(path, index=False)
    return path


def model_estimates(name: str, problem) -> np.ndarray:
    """The embedded model's estimate per pool row, from ``ESTIMATES/<name>.csv`` when it was written before (the
    model is deterministic at temperature 0, so one survey serves every seed and every re-run), else computed by
    ``LLMPriorSimulator`` and written there."""
    path = ESTIMATES / f"{name}.csv"
    ids = list(problem.pool.ids)
    if path.exists():
        stored = pd.read_csv(path).set_index("candidate_id")["expected"]
        if set(ids) <= set(stored.index):
            return stored.loc[ids].to_numpy(dtype=float)
    objective = problem.spec.objective
    simulator = LLMPriorSimulator(target=objective.property, unit=objective.unit or "")
    observations = simulator.evaluate(list(problem.pool.candidates))
    values = np.asarray([o.properties.get("expected", np.nan) for o in observations], dtype=float)
    ESTIMATES.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"candidate_id": ids, "expected": values}).to_csv(path, index=False)
    return values


VARIANTS = {"bo alone": None, "coin prior": "prior_coin", "constant prior": "prior_constant",
            "oracle prior": "prior_oracle", "model prior": "prior_model"}
"""Each variant's prior column (None: no rung)."""


def measure(name: str, seeds: int, with_model: bool, workers: int, only: list[str] | None = None,
            previous: dict | None = None) -> dict:
    """Run the variants ``only`` names (default: all; the model prior only ``with_model``) and merge them into
    ``previous``'s variants; the ceiling and the model's shares are recomputed over what there is."""
    out = dict((previous or {}).get("variants", {}))
    correlation = dict((previous or {}).get("spearman_with_truth", {}))
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        pool = prior_pool(name, workdir, with_model)
        for label, column in VARIANTS.items():
            if (only and label not in only) or (label == "model prior" and not with_model):
                continue
            if label == "coin prior":  # one bench per seed, each with its own draw
                per_seed = [run_bench(_config(name, pool, 1, f"prior={column}_{seed}:{SECONDS_PER_CANDIDATE}",
                                              1, first_seed=seed), show_progress=False)["arms"]["bo"]
                            for seed in range(seeds)]
                to1 = [a["per_seed"]["experiments_to_top1"][0] for a in per_seed]
                out[label] = {"experiments_to_top1": summarise(to1), "per_seed": to1, "seeds": list(range(seeds)),
                              "rung_cost_s": per_seed[0]["rung_cost_s"]}
                continue
            rung = f"prior={column}:{SECONDS_PER_CANDIDATE}" if column else None
            report = run_bench(_config(name, pool, seeds, rung, workers), show_progress=False)
            arm = report["arms"]["bo"]
            out[label] = {"experiments_to_top1": arm["experiments_to_top1"],
                          "per_seed": arm["per_seed"]["experiments_to_top1"], "seeds": arm["per_seed"]["seeds"],
                          "rung_cost_s": arm["rung_cost_s"]}
        frame = pd.read_csv(pool)
        truth = frame["prior_oracle"]
        correlation["pool_order"] = float(pd.Series(np.arange(len(frame))).corr(truth, method="spearman"))
        if with_model:
            out.setdefault("model prior", {})["n_distinct_estimates"] = int(frame["prior_model"].nunique())
            correlation["model"] = float(frame["prior_model"].corr(truth, method="spearman"))
    alone, oracle = out["bo alone"]["per_seed"], out["oracle prior"]["per_seed"]
    result = {"variants": out, "ceiling_paired_geomean": paired_geomean_ratio(oracle, alone),
              "spearman_with_truth": correlation}
    model = out.get("model prior", {}).get("per_seed")
    if model:
        result["model_share"] = contribution(model, alone, oracle)  # against the lever off
        if "coin prior" in out:  # against a prior that knows nothing, in the same rung
            result["model_bracket"] = contribution(model, out["coin prior"]["per_seed"], oracle)
    return result


def render(results: dict) -> str:
    lines = ["# The model-prior lever: ceiling and the embedded model's share", "",
             "Made by `benchmarks/llm_lever.py` (its docstring has the command). bo campaigns on the public sets, "
             f"budget {BUDGET}, batch {BATCH}, one proposal per slot, lab noise 0 (the discovery tables' settings), "
             f"the prior rung charged {SECONDS_PER_CANDIDATE} CPU-s a candidate. Lab experiments to a top-1 % "
             "candidate: median (IQR) over seeds; the ceiling is the paired geometric mean of oracle prior over bo "
             "alone (below 1: fewer). The model's share is (floor − model) / (floor − oracle) over paired seeds with "
             "a 95 % bootstrap interval (`orchestrator/bench/bracket.py`), the floor being bo alone (the lever off) "
             "or the coin prior (the lever on, knowing nothing).", "",
             "| data set | seeds | bo alone | coin prior | constant prior | oracle prior | ceiling | model prior | "
             "model's ρ with truth (file order's) | model's share vs bo alone | model's share vs coin prior |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        v = r["variants"]

        def cell(label):
            if label not in v:
                return "not run"
            s = v[label]["experiments_to_top1"]
            return f"{s['median']:g} ({s['iqr'][0]:g}–{s['iqr'][1]:g})"

        share_text = contribution_text(r.get("model_share"))
        rho = r.get("spearman_with_truth", {})
        rho_text = (f"{rho['model']:.2f} ({rho['pool_order']:.2f})" if "model" in rho else
                    f"– ({rho['pool_order']:.2f})" if "pool_order" in rho else "–")
        lines.append(f"| {name} | {len(v['bo alone']['seeds'])} | {cell('bo alone')} | {cell('coin prior')} | "
                     f"{cell('constant prior')} | {cell('oracle prior')} | {r['ceiling_paired_geomean']:.2f} | "
                     f"{cell('model prior')} | {rho_text} | {share_text} | "
                     f"{contribution_text(r.get('model_bracket'))} |")
    met = [n for n, r in results.items() if r["ceiling_paired_geomean"] <= 0.75]
    bracket = {n: r.get("model_bracket") for n, r in results.items() if r.get("model_bracket")}
    above = [n for n, c in bracket.items() if c.get("interval") and c["interval"][0] > 0]
    below = [n for n, c in bracket.items() if c.get("interval") and c["interval"][1] < 0]
    lines += ["", f"The lever's ceiling is at least 25 % fewer lab experiments than bo alone on {len(met)} of "
              f"{len(results)} sets ({', '.join(met) or 'none'}). Against the coin prior (the lever on, knowing "
              f"nothing), the embedded model's share is above 0 at 95 % on {len(above)} of {len(bracket)} "
              f"({', '.join(above) or 'none'}) and below 0 on {len(below)} ({', '.join(below) or 'none'}); "
              "elsewhere its interval spans 0. The constant prior shows what a rung of one value costs (the ladder "
              "cannot rule out a rung without spread, whose evidence stays even). The lever is not on by default: "
              "orchestrator/policy/planners/DECISIONS.md says why."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", required=True)
    parser.add_argument("--model-prior", nargs="*", default=[], help="data sets to score with the embedded model")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--variants", nargs="*", default=None, help=f"run only these of {list(VARIANTS)}; "
                                                                     "the others' stored runs are kept")
    parser.add_argument("--render", action="store_true", help="only re-render the table")
    args = parser.parse_args(argv)
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    if not args.render:
        for name in args.only:
            results[name] = measure(name, args.seeds, name in args.model_prior, args.workers, args.variants,
                                    results.get(name))
            RESULTS.write_text(json.dumps(results, indent=1))
            print(f"{name}: ceiling {results[name]['ceiling_paired_geomean']:.2f}", flush=True)
    TABLE.write_text(render(results))
    print(TABLE.read_text())


if __name__ == "__main__":
    main()
