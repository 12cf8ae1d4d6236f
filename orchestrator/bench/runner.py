"""Run every (arm, seed) of a benchmark as a real campaign, across worker processes, and summarise the runs.

An arm is a campaign planner (``orchestrator.policy.planners``): each run is ``Campaign.start`` on the benchmark's spec
with that arm as the main planner, no control, the seed and the lab budget (``arm_spec``, the same overrides as
``closedloop run SPEC --planner ARM --control-share 0 --seed S``), on an in-memory ledger, through the same graph,
screen, learn node and simulated lab as any campaign. The bench itself decides nothing: what it measures is what
``closedloop run`` does, and a parity test keeps it so.

Each worker process validates the spec and loads the pool once. A rich progress bar per arm goes to stderr. The
report is a plain dict (``pool_size``, ``objective``, ``seeds``, ``lab_budget``, ``arms``, ``af_vs_random``,
``vs_botorch``: every arm against the better of the BoTorch arms that ran; per arm ``per_seed.seeds`` and
``per_seed.measured``, the candidate ids in dispatch order), plus every run under ``runs``.
"""

from __future__ import annotations

import os
import platform
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from orchestrator.bench.config import BenchConfig
from orchestrator.bench.metrics import (
    acceleration,
    best_at_budget,
    botorch_reference,
    experiments_to_hit,
    paired_geomean_ratio,
    reference_label,
    summarise,
)
from orchestrator.bench.problem import BenchProblem, load_problem
from orchestrator.loop.upcast import records
from orchestrator.policy.planners.bo import campaign_kernel
from orchestrator.spec import CampaignSpec, validate_spec

__all__ = ["RunRecord", "arm_spec", "run_arm", "run_bench", "summarise_runs", "versus_botorch"]

_WORKER: dict[str, Any] = {}


@dataclass
class RunRecord:
    """One campaign of one arm: candidate ids in dispatch order, their pool rows, the ladder's compute, wall s."""

    arm: str
    seed: int
    measured: list[str]
    order: list[int]
    n_rung_evaluations: int = 0
    rung_cost_s: float = 0.0
    wall_s: float = 0.0
    notes: dict = field(default_factory=dict)


def arm_spec(spec: CampaignSpec, arm: str, seed: int, lab_budget: int | None = None) -> CampaignSpec:
    """The spec one run uses: ``arm`` as the main planner, no control, this seed and budget."""
    return spec.with_overrides(seed=seed, lab_budget=lab_budget, planner=arm, control_share=0.0)


def _ladder_compute(ledger, campaign_id: str) -> tuple[int, float]:
    """Rung evaluations and their compute seconds: surveys over the pool plus the screen's evaluations."""
    n, cost = 0, 0.0
    for event in ledger.events(campaign_id, types=["RungSurveyed", "Simulated", "Screened"]):
        if event.type == "RungSurveyed":
            n, cost = n + event.payload["n_candidates"], cost + event.payload["cost_s"]
            continue
        for kind, p in records(event):
            if kind == "Simulated":
                n, cost = n + 1, cost + p["observation"].get("cost_s", 0.0)
    return n, cost


def run_arm(problem: BenchProblem, arm: str, seed: int) -> RunRecord:
    """One campaign of ``arm`` with ``seed`` on an in-memory ledger, until its lab budget is spent."""
    from orchestrator.loop.campaign import Campaign

    spec = arm_spec(problem.spec, arm, seed, problem.config.lab_budget)
    start = time.perf_counter()
    with Campaign.start(spec, db=":memory:", campaign_id=f"bench-{arm}-s{seed}") as campaign:
        summary = campaign.run()
        measured = summary["measured"]
        n_rung, rung_cost = _ladder_compute(campaign.ledger, campaign.campaign_id)
    index = problem.pool.index
    return RunRecord(arm=arm, seed=seed, measured=measured, order=[index[cid] for cid in measured],
                     n_rung_evaluations=n_rung, rung_cost_s=rung_cost, wall_s=time.perf_counter() - start,
                     notes={"status": summary["status"], "stop_reason": summary.get("stop_reason"),
                            **({"planner_stats": summary["planner_stats"]} if summary.get("planner_stats") else {})})


def _init_worker(config_json: str, spec_json: str) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:  # the random and cheap-first arms need no torch
        pass
    from orchestrator.space.pool import load_pool

    config = BenchConfig.model_validate_json(config_json)
    spec = validate_spec(CampaignSpec.model_validate_json(spec_json).model_dump(), source="bench worker")
    problem = BenchProblem(config=config, spec=spec, pool=load_pool(spec), values=np.zeros(0), n_rows=0)
    _WORKER["problem"] = problem


def _run_task(arm: str, seed: int) -> RunRecord:
    return run_arm(_WORKER["problem"], arm, seed)


def summarise_runs(problem: BenchProblem, records: list[RunRecord]) -> dict[str, Any]:
    """The benchmark report from the runs: per-arm medians and IQRs, costs, and acceleration over random."""
    c = problem.config
    budget = problem.lab_budget
    top1, top5 = set(problem.top(1).tolist()), set(problem.top(5).tolist())
    window = set(problem.in_window().tolist()) if problem.direction == "target" else None
    arms: dict[str, Any] = {}
    lab_cost_s = c.lab_cost_s
    for arm in c.arms:
        runs = sorted((r for r in records if r.arm == arm), key=lambda r: r.seed)
        if not runs:
            continue
        to1 = [experiments_to_hit(r.order, top1, budget) for r in runs]
        to5 = [experiments_to_hit(r.order, top5, budget) for r in runs]
        best = [best_at_budget(r.order, problem.values, problem.direction, problem.target) for r in runs]
        arms[arm] = {
            "experiments_to_top1": summarise(to1),
            "experiments_to_top5": summarise(to5),
            "best_at_budget": summarise(best),
            "total_cost_s": float(np.median([len(r.order) * lab_cost_s + r.rung_cost_s for r in runs])),
            "wall_s": float(np.median([r.wall_s for r in runs])),
            "lab_experiments": float(np.median([len(r.order) for r in runs])),
            "rung_cost_s": float(np.median([r.rung_cost_s for r in runs])),
            "n_rung_evaluations": float(np.median([r.n_rung_evaluations for r in runs])),
            "hit_rate_top1": float(np.mean([t <= budget for t in to1])),
            "hit_rate_top5": float(np.mean([t <= budget for t in to5])),
            "per_seed": {"seeds": [r.seed for r in runs], "experiments_to_top1": to1, "experiments_to_top5": to5,
                         "best_at_budget": best, "measured": [r.measured for r in runs]},
        }
        if window is not None:  # a target's own success: a lab value inside target ± tolerance
            to_window = [experiments_to_hit(r.order, window, budget) for r in runs]
            arms[arm]["experiments_to_window"] = summarise(to_window)
            arms[arm]["hit_rate_window"] = float(np.mean([t <= budget for t in to_window]))
            arms[arm]["per_seed"]["experiments_to_window"] = to_window
    af = {}
    if "random" in arms:
        random_median = arms["random"]["experiments_to_top5"]["median"]
        af = {arm: acceleration(random_median, s["experiments_to_top5"]["median"]) for arm, s in arms.items()}
    objective = problem.spec.objective
    return {
        "pool_size": len(problem),
        "objective": c.objective or f"{objective.direction}:{objective.property}"
                                    + (f":{objective.target}:{objective.tolerance}" if objective.target is not None else ""),
        "spec": c.spec,
        "seeds": c.seeds,
        "lab_budget": budget,
        "batch": problem.spec.planner.batch_size,
        "arms": arms,
        "af_vs_random": af,
        "vs_botorch": versus_botorch(arms),
        "n_top1": len(top1),
        "n_top5": len(top5),
        **({"n_in_window": len(window)} if window is not None else {}),
        "best_in_pool": best_at_budget(list(np.flatnonzero(np.isfinite(problem.values))), problem.values,
                                       problem.direction, problem.target),
        "best_at_budget_unit": "distance |value - target|" if problem.direction == "target" else "objective value",
        "lab_cost_s": lab_cost_s,
        "rungs": [{"name": r.name, "column": r.column, "cost_s": r.cost_s, "simulator": r.simulator}
                  for r in problem.spec.ladder if r.proxy],
        "n_csv_rows": problem.n_rows,
        "n_rows_without_value": problem.n_dropped,
        "n_replicate_groups_averaged": problem.n_averaged,
        "kernel": campaign_kernel(problem.spec, problem.pool),
        "n_features": int(problem.pool.features.shape[1]),
        "config": c.model_dump(mode="json"),
        "machine": {"cpu": platform.processor() or platform.machine(), "n_cpu": os.cpu_count(),
                    "python": platform.python_version(), "load_avg_1m": os.getloadavg()[0]},
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "runs": [{"arm": r.arm, "seed": r.seed, "order": r.order, "measured": r.measured, "wall_s": r.wall_s,
                  "rung_cost_s": r.rung_cost_s, "n_rung_evaluations": r.n_rung_evaluations, "notes": r.notes}
                 for r in records],
    }


def versus_botorch(arms: dict[str, Any]) -> dict[str, Any]:
    """Every other arm against the better BoTorch arm (``metrics.botorch_reference``, by median lab experiments to a
    top-1 % candidate): the ratio of medians and, on the seeds both ran, the paired geometric mean; {} without one.

    The per-arm numbers stay under ``arms``; this only says which reference the ratios use (``reference``, ``label``).
    """
    reference = botorch_reference({arm: s["experiments_to_top1"]["median"] for arm, s in arms.items()})
    if reference is None:
        return {}
    ref = arms[reference]
    ref_by_seed = dict(zip(ref["per_seed"]["seeds"], ref["per_seed"]["experiments_to_top1"], strict=True))
    median_ratio, paired = {}, {}
    for arm, s in arms.items():
        if arm == reference:
            continue
        median_ratio[arm] = s["experiments_to_top1"]["median"] / ref["experiments_to_top1"]["median"]
        pairs = [(n, ref_by_seed[seed]) for seed, n in zip(s["per_seed"]["seeds"], s["per_seed"]["experiments_to_top1"],
                                                          strict=True) if seed in ref_by_seed]
        if pairs:
            paired[arm] = paired_geomean_ratio(*zip(*pairs, strict=True))
    return {"reference": reference, "label": reference_label(arms), "metric": "experiments_to_top1",
            "median_ratio": median_ratio, "paired_geomean_ratio": paired}


def run_bench(config: BenchConfig, *, show_progress: bool = True) -> dict[str, Any]:
    """Run ``config.seeds`` seeds of every arm (seeds in parallel over ``config.workers`` processes)."""
    with tempfile.TemporaryDirectory(prefix="closedloop-bench-") as workdir:
        problem = load_problem(config, Path(workdir))  # validates everything before any worker starts
        for arm in config.arms:
            arm_spec(problem.spec, arm, config.first_seed, config.lab_budget)  # an arm the spec cannot run fails here
        tasks = [(arm, config.first_seed + k) for arm in config.arms for k in range(config.seeds)]
        start = time.perf_counter()
        records: list[RunRecord] = []
        progress = _progress(show_progress)
        with progress:
            bars = {arm: progress.add_task(f"{arm:<12}", total=config.seeds) for arm in config.arms}
            if config.workers == 1 or len(tasks) == 1:
                _WORKER["problem"] = problem
                for arm, seed in tasks:
                    records.append(_run_task(arm, seed))
                    progress.advance(bars[arm])
            else:
                import multiprocessing

                context = multiprocessing.get_context("spawn")  # torch and llama.cpp do not survive fork safely
                with ProcessPoolExecutor(max_workers=min(config.workers, len(tasks)), mp_context=context,
                                         initializer=_init_worker,
                                         initargs=(config.model_dump_json(), problem.spec.model_dump_json())) as pool:
                    futures = {pool.submit(_run_task, arm, seed): arm for arm, seed in tasks}
                    for future in as_completed(futures):
                        records.append(future.result())
                        progress.advance(bars[futures[future]])
        report = summarise_runs(problem, records)
    report["wall_s_total"] = time.perf_counter() - start
    return report


def _progress(enabled: bool):
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=Console(stderr=True), disable=not enabled, transient=False)
