"""Run every (arm, seed) of a benchmark across worker processes and summarise the runs into the report.

Each worker loads the problem once (reading and featurising the pool), then runs the (arm, seed) tasks it is given.
A rich progress bar per arm goes to stderr. The report is a plain dict with the shape documented in
``closedloop bench --help`` (``pool_size``, ``objective``, ``seeds``, ``lab_budget``, ``arms``, ``af_vs_random``),
plus the per-run records under ``runs``.
"""

from __future__ import annotations

import os
import platform
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from datetime import datetime, timezone
from typing import Any

import numpy as np

from .arms import RunRecord, run_arm
from .config import BenchConfig
from .metrics import acceleration, best_at_budget, experiments_to_hit, summarise
from .problem import BenchProblem, load_problem

__all__ = ["run_bench", "summarise_runs"]

_WORKER: dict[str, Any] = {}


def _init_worker(config_json: str) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:  # the random and cheap-first arms need no torch
        pass
    _WORKER["problem"] = load_problem(BenchConfig.model_validate_json(config_json))


def _run_task(arm: str, seed: int) -> RunRecord:
    return run_arm(_WORKER["problem"], arm, seed)


def summarise_runs(problem: BenchProblem, records: list[RunRecord]) -> dict[str, Any]:
    """The benchmark report from the runs: per-arm medians and IQRs, costs, and acceleration over random."""
    c = problem.config
    top1, top5 = set(problem.top(1).tolist()), set(problem.top(5).tolist())
    arms: dict[str, Any] = {}
    for arm in c.arms:
        runs = sorted((r for r in records if r.arm == arm), key=lambda r: r.seed)
        if not runs:
            continue
        to1 = [experiments_to_hit(r.order, top1, c.lab_budget) for r in runs]
        to5 = [experiments_to_hit(r.order, top5, c.lab_budget) for r in runs]
        best = [best_at_budget(r.order, problem.values, c.direction, c.target) for r in runs]
        lab_cost = [len(r.order) * c.lab_cost_s for r in runs]
        arms[arm] = {
            "experiments_to_top1": summarise(to1),
            "experiments_to_top5": summarise(to5),
            "best_at_budget": summarise(best),
            "total_cost_s": float(np.median([lc + r.rung_cost_s for lc, r in zip(lab_cost, runs, strict=True)])),
            "wall_s": float(np.median([r.wall_s for r in runs])),
            "lab_experiments": float(np.median([len(r.order) for r in runs])),
            "rung_cost_s": float(np.median([r.rung_cost_s for r in runs])),
            "n_rung_evaluations": float(np.median([r.n_rung_evaluations for r in runs])),
            "hit_rate_top1": float(np.mean([t <= c.lab_budget for t in to1])),
            "hit_rate_top5": float(np.mean([t <= c.lab_budget for t in to5])),
            "per_seed": {"seeds": [r.seed for r in runs], "experiments_to_top1": to1, "experiments_to_top5": to5,
                         "best_at_budget": best},
        }
    af = {}
    if "random" in arms:
        random_median = arms["random"]["experiments_to_top5"]["median"]
        af = {arm: acceleration(random_median, s["experiments_to_top5"]["median"]) for arm, s in arms.items()}
    return {
        "pool_size": len(problem),
        "objective": c.objective,
        "seeds": c.seeds,
        "lab_budget": c.lab_budget,
        "batch": c.batch,
        "arms": arms,
        "af_vs_random": af,
        "n_top1": len(top1),
        "n_top5": len(top5),
        "best_in_pool": best_at_budget(list(range(len(problem))), problem.values, c.direction, c.target),
        "best_at_budget_unit": "distance |value - target|" if c.direction == "target" else "objective value",
        "lab_cost_s": c.lab_cost_s,
        "rungs": [r.model_dump() for r in c.rungs],
        "n_csv_rows": problem.n_rows,
        "kernel": problem.kernel,
        "n_features": int(problem.pool.features.shape[1]),
        "config": c.model_dump(mode="json"),
        "machine": {"cpu": platform.processor() or platform.machine(), "n_cpu": os.cpu_count(),
                    "python": platform.python_version(), "load_avg_1m": os.getloadavg()[0]},
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "runs": [{"arm": r.arm, "seed": r.seed, "order": r.order, "wall_s": r.wall_s, "rung_cost_s": r.rung_cost_s,
                  "n_rung_evaluations": r.n_rung_evaluations, "notes": r.notes} for r in records],
    }


def run_bench(config: BenchConfig, *, show_progress: bool = True) -> dict[str, Any]:
    """Run ``config.seeds`` seeds of every arm (seeds in parallel over ``config.workers`` processes)."""
    problem = load_problem(config)  # validates everything before any worker starts
    tasks = [(arm, config.first_seed + k) for arm in config.arms for k in range(config.seeds)]
    start = time.perf_counter()
    records: list[RunRecord] = []
    progress = _progress(show_progress)
    with progress:
        bars = {arm: progress.add_task(f"{arm:<12}", total=config.seeds) for arm in config.arms}
        if config.workers == 1:
            _WORKER["problem"] = problem
            for arm, seed in tasks:
                records.append(_run_task(arm, seed))
                progress.advance(bars[arm])
        else:
            import multiprocessing

            context = multiprocessing.get_context("spawn")  # torch and llama.cpp do not survive fork safely
            with ProcessPoolExecutor(max_workers=min(config.workers, len(tasks)), mp_context=context,
                                     initializer=_init_worker, initargs=(config.model_dump_json(),)) as pool:
                futures = {pool.submit(_run_task, arm, seed): arm for arm, seed in tasks}
                for future in as_completed(futures):
                    records.append(future.result())
                    progress.advance(bars[futures[future]])
    report = summarise_runs(problem, records)
    report["wall_s_total"] = time.perf_counter() - start
    return report


def _progress(enabled: bool):
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=Console(stderr=True), disable=not enabled, transient=False)
