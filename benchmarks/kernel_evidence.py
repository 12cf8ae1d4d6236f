"""The kernel default by leave-one-data-set-out: ``bo`` with ``[planner] kernel = "auto"`` (the default, a rule by
the pool's columns) against ``bo`` with ``kernel = "evidence"`` (chosen at each refit by cross-fitted leave-one-out
predictive density on the campaign's lab data, ``orchestrator/policy/planners/kernel_evidence.py``).

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.kernel_evidence                        # every cell, 20 seeds
    .venv/bin/python -m benchmarks.kernel_evidence --only esol perovskite --seeds 2 --lab-budget 15 --workers 1

Each cell of ``benchmarks/discovery.py`` (``DATASETS``) is loaded by the bench's own ``load_problem`` and each run
is the bench's own ``run_arm`` (in worker processes: its ``_init_worker`` / ``_run_task``), on the bench's spec with
only ``[planner] kernel`` changed, so both arms share the initial designs seed for seed. Reported per cell: lab
experiments to a top-1 % candidate (median per arm; a run that never hits counts budget + 1), the paired geometric
mean of evidence over auto (below 1: evidence needs fewer), and seeds won, tied and lost.

The leave-one-data-set-out decision: for each held-out cell, the rule is chosen on the other cells alone
(``adopts``: evidence's geometric mean of the per-cell ratios is below 1 and it is behind on fewer than half of
those cells), and the held-out cell says whether that choice generalised. ``evidence`` becomes the default only if
every fold adopts it and the held-out ratios' geometric mean is below 1 (``verdict``).

Writes the runs and the tables' numbers to ``--json`` (default ``benchmarks/results/kernel_evidence.json``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.discovery import BATCH, BUDGET, DATASETS, LAB_COST_S, SEEDS

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results" / "kernel_evidence.json"
KERNELS = {"auto": "auto", "evidence": "evidence"}
"""Arm label -> ``[planner] kernel``; ``auto`` is the reference."""


def _config(name: str, seeds: int, budget: int, workers: int):
    from orchestrator.bench import BenchConfig, parse_rung

    d = DATASETS[name]
    return BenchConfig(pool=str(d["pool"]), id_cols=tuple(d["id_cols"]), objective=d["objective"],
                       rungs=tuple(parse_rung(r) for r in d["rungs"]), lab_budget=budget, seeds=seeds, arms=("bo",),
                       batch=BATCH, lab_cost_s=LAB_COST_S, workers=workers)


def _with_kernel(spec, kernel: str):
    return spec.model_copy(update={"planner": spec.planner.model_copy(update={"kernel": kernel})})


def _runs(problem, seeds: list[int], workers: int) -> list:
    """The bench's ``run_arm`` of ``bo`` on ``problem`` for each seed, serially or over ``workers`` processes."""
    from orchestrator.bench import runner

    if workers <= 1 or len(seeds) == 1:
        return [runner.run_arm(problem, "bo", seed) for seed in seeds]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("spawn")  # as run_bench: torch does not survive fork safely
    with ProcessPoolExecutor(max_workers=min(workers, len(seeds)), mp_context=context,
                             initializer=runner._init_worker,
                             initargs=(problem.config.model_dump_json(), problem.spec.model_dump_json())) as pool:
        return list(pool.map(runner._run_task, ["bo"] * len(seeds), seeds))


def run_cell(name: str, seeds: int, budget: int, workers: int) -> dict:
    """Both arms on one cell: per arm the seeds and lab experiments to a top-1 % candidate, and the paired ratio."""
    from orchestrator.bench import load_problem
    from orchestrator.bench.metrics import experiments_to_hit, paired_geomean_ratio

    config = _config(name, seeds, budget, workers)
    seed_list = [config.first_seed + k for k in range(seeds)]
    cell: dict = {"name": name, "title": DATASETS[name]["title"], "arms": {}}
    with tempfile.TemporaryDirectory(prefix="closedloop-kernel-evidence-") as workdir:
        problem = load_problem(config, Path(workdir))
        top1 = set(problem.top(1).tolist())
        cell["pool_size"] = len(problem)
        for label, kernel in KERNELS.items():
            arm_problem = dataclasses.replace(problem, spec=_with_kernel(problem.spec, kernel))
            start = time.perf_counter()
            records = sorted(_runs(arm_problem, seed_list, workers), key=lambda r: r.seed)
            cell["arms"][label] = {"kernel": kernel, "seeds": [r.seed for r in records],
                                   "experiments_to_top1": [experiments_to_hit(r.order, top1, budget) for r in records],
                                   "measured": [r.measured for r in records],
                                   "wall_s": time.perf_counter() - start}
    auto, evidence = (cell["arms"][k]["experiments_to_top1"] for k in KERNELS)
    cell["ratio"] = paired_geomean_ratio(evidence, auto)
    cell["wins"] = int(sum(e < a for e, a in zip(evidence, auto, strict=True)))
    cell["ties"] = int(sum(e == a for e, a in zip(evidence, auto, strict=True)))
    cell["losses"] = int(sum(e > a for e, a in zip(evidence, auto, strict=True)))
    return cell


def _geomean(values: list[float]) -> float:
    return float(math.exp(np.mean(np.log(values)))) if values else float("nan")


def adopts(ratios: list[float]) -> bool:
    """Whether the cells a rule is chosen on adopt ``evidence``: the geometric mean of its ratios over ``auto`` is
    below 1 and it is behind (ratio above 1) on fewer than half of them.

    Example:
        >>> adopts([0.8, 0.9, 1.05]), adopts([0.5, 1.1, 1.2]), adopts([1.0, 1.0])
        (True, False, False)
    """
    return bool(ratios) and _geomean(ratios) < 1 and sum(r > 1 for r in ratios) < len(ratios) / 2


def decision_table(cells: list[dict]) -> dict:
    """The leave-one-data-set-out folds and the verdict on changing the default."""
    ratios = {c["name"]: c["ratio"] for c in cells}
    folds = []
    for held_out in ratios:
        others = [r for name, r in ratios.items() if name != held_out]
        adopted = adopts(others)
        held = ratios[held_out]
        generalised = (held <= 1) if adopted else (held >= 1)
        folds.append({"held_out": held_out, "others_geomean": _geomean(others), "adopted": adopted,
                      "held_out_ratio": held, "generalised": generalised})
    held_geomean = _geomean([f["held_out_ratio"] for f in folds])
    change = bool(folds) and all(f["adopted"] for f in folds) and held_geomean < 1
    return {"folds": folds, "held_out_geomean": held_geomean, "change_default": change,
            "verdict": "adopt evidence as the default" if change else "keep auto as the default"}


def print_tables(report: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    cells = report["cells"]
    per_cell = Table(title=f"Lab experiments to a top-1 % candidate: bo, kernel auto vs evidence "
                           f"({report['seeds']} seeds, budget {report['lab_budget']}, batch {BATCH})")
    for column in ("cell", "pool", "auto (median)", "evidence (median)", "evidence / auto (paired geomean)",
                   "won / tied / lost"):
        per_cell.add_column(column, justify="left" if column == "cell" else "right")
    for c in cells:
        auto, evidence = (c["arms"][k]["experiments_to_top1"] for k in KERNELS)
        per_cell.add_row(c["name"], str(c["pool_size"]), f"{np.median(auto):g}", f"{np.median(evidence):g}",
                         f"{c['ratio']:.3f}", f"{c['wins']} / {c['ties']} / {c['losses']}")
    console.print(per_cell)
    decision = report["decision"]
    folds = Table(title="Leave one data set out: the rule chosen on the other cells, judged on the held-out one")
    for column in ("held out", "others' geomean", "others adopt evidence?", "held-out ratio", "generalised?"):
        folds.add_column(column, justify="left" if column == "held out" else "right")
    for f in decision["folds"]:
        folds.add_row(f["held_out"], f"{f['others_geomean']:.3f}", "yes" if f["adopted"] else "no",
                      f"{f['held_out_ratio']:.3f}", "yes" if f["generalised"] else "no")
    console.print(folds)
    console.print(f"held-out geometric mean {decision['held_out_geomean']:.3f}: {decision['verdict']}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", default=None, help="cells of benchmarks/discovery.py (default: all)")
    parser.add_argument("--seeds", type=int, default=SEEDS)
    parser.add_argument("--lab-budget", type=int, default=BUDGET)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", type=Path, default=RESULTS, help="where the runs and tables go")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.only or []) - set(DATASETS))
    if unknown:
        parser.error(f"--only: unknown data set(s) {unknown}; choose from {', '.join(DATASETS)}")
    if args.seeds < 1 or args.lab_budget < 1:
        parser.error("--seeds and --lab-budget must be at least 1")
    cells = [run_cell(name, args.seeds, args.lab_budget, args.workers) for name in args.only or list(DATASETS)]
    report = {"seeds": args.seeds, "lab_budget": args.lab_budget, "batch": BATCH, "cells": cells,
              "decision": decision_table(cells)}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1) + "\n")
    print_tables(report)


if __name__ == "__main__":
    main()
