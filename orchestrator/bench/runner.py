"""Run every (arm, seed) of a benchmark as a real campaign, across worker processes, and summarise the runs.

An arm is a campaign planner (``orchestrator.policy.planners``): each run is ``Campaign.start`` on the benchmark's spec
with that arm as the main planner, no control, the seed and the lab budget (``arm_spec``, the same overrides as
``closedloop run SPEC --planner ARM --control-share 0 --seed S``), on an in-memory ledger, through the same graph,
screen, learn node and simulated lab as any campaign. The bench itself decides nothing: what it measures is what
``closedloop run`` does, and a parity test keeps it so.

Each worker process validates the spec and loads the pool once. A rich progress bar per arm goes to stderr. The
report is a plain dict (``pool_size``, ``objective``, ``seeds``, ``lab_budget``, ``arms``, ``af_vs_random``,
``vs_botorch``: every arm against the better of the BoTorch arms that ran; per arm ``per_seed.seeds`` and
``per_seed.measured``, the candidate ids in dispatch order), plus every run under ``runs``. With several objectives
it adds ``objectives``, ``reference_point`` (objective units), ``true_hypervolume`` and per arm
``experiments_to_hv90``, ``experiments_to_hv95`` and ``hypervolume_at_budget`` (``vs_botorch`` then compares
``experiments_to_hv90``); where runs fail, per arm ``failed_runs``.
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

from orchestrator.bench.bracket import (
    BRACKET_ARMS,
    contribution,
    give_oracle_its_truth,
    register_bench_arms,
)
from orchestrator.bench.config import BenchConfig
from orchestrator.bench.metrics import (
    NO_RESULT,
    acceleration,
    best_at_budget,
    botorch_reference,
    experiments_to_hit,
    experiments_to_hv,
    hypervolume_at_budget,
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
    """One campaign of one arm: candidate ids in dispatch order, their pool rows, the ladder's compute, wall s.

    ``lab_order`` is the pool row of every lab experiment in dispatch order (a retry repeats its row), ``NO_RESULT``
    where the run failed; without failures it equals ``order``.
    """

    arm: str
    seed: int
    measured: list[str]
    order: list[int]
    lab_order: list[int] = field(default_factory=list)
    n_failed: int = 0
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
    give_oracle_its_truth(spec, problem.pool)
    start = time.perf_counter()
    with Campaign.start(spec, db=":memory:", campaign_id=f"bench-{arm}-s{seed}") as campaign:
        summary = campaign.run()
        measured = summary["measured"]
        n_rung, rung_cost = _ladder_compute(campaign.ledger, campaign.campaign_id)
        jobs = sorted(campaign.ledger.lab_jobs(campaign.campaign_id), key=lambda job: job.dispatched_seq)
    index = problem.pool.index
    lab_order = [NO_RESULT if job.status == "failed" else index[job.candidate_id] for job in jobs]
    return RunRecord(arm=arm, seed=seed, measured=measured, order=[index[cid] for cid in measured],
                     lab_order=lab_order, n_failed=sum(job.status == "failed" for job in jobs),
                     n_rung_evaluations=n_rung, rung_cost_s=rung_cost, wall_s=time.perf_counter() - start,
                     notes={"status": summary["status"], "stop_reason": summary.get("stop_reason"),
                            **({"planner_stats": summary["planner_stats"]} if summary.get("planner_stats") else {})})


def _init_worker(config_json: str, spec_json: str) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    register_bench_arms()
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:  # the random and cheap-first arms need no torch
        pass
    from orchestrator.space.pool import load_pool

    config = BenchConfig.model_validate_json(config_json)
    spec = validate_spec(CampaignSpec.model_validate_json(spec_json).model_dump(), source="bench worker")
    problem = BenchProblem(config=config, spec=spec, pool=load_pool(spec), values=np.zeros(0), n_rows=0)
    # the workers only run campaigns: the truth and the hypervolume stay with the parent, which scores
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
    has_failures = any(r.n_failed for r in records) or c.fail_at_or_below is not None
    for arm in c.arms:
        runs = sorted((r for r in records if r.arm == arm), key=lambda r: r.seed)
        if not runs:
            continue
        orders = [_lab_sequence(r) for r in runs]
        to1 = [experiments_to_hit(o, top1, budget) for o in orders]
        to5 = [experiments_to_hit(o, top5, budget) for o in orders]
        best = [best_at_budget(o, problem.values, problem.direction, problem.target) for o in orders]
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
        if problem.is_multi_objective:
            hv = _hypervolume_metrics(problem, orders, budget)
            arms[arm]["per_seed"].update(hv.pop("per_seed"))
            arms[arm].update(hv)
        if has_failures:  # lab experiments spent on runs that failed (retries included)
            arms[arm]["failed_runs"] = summarise([r.n_failed for r in runs])
            arms[arm]["per_seed"]["failed_runs"] = [r.n_failed for r in runs]
        if window is not None:  # a target's own success: a lab value inside target ± tolerance
            to_window = [experiments_to_hit(r.order, window, budget) for r in runs]
            arms[arm]["experiments_to_window"] = summarise(to_window)
            arms[arm]["hit_rate_window"] = float(np.mean([t <= budget for t in to_window]))
            arms[arm]["per_seed"]["experiments_to_window"] = to_window
    if all(arm in arms for arm in BRACKET_ARMS):
        arms["llm"]["contribution"] = bracket(arms, "experiments_to_hv90" if problem.is_multi_objective
                                              else "experiments_to_top1")
    af = {}
    af_metric = "experiments_to_hv90" if problem.is_multi_objective else "experiments_to_top5"
    if "random" in arms:
        random_median = arms["random"][af_metric]["median"]
        af = {arm: acceleration(random_median, s[af_metric]["median"]) for arm, s in arms.items()}
    objectives = [_written(o) for o in (problem.spec.objective_list if problem.is_multi_objective
                                        else [problem.spec.objective])]
    multi = {}
    if problem.is_multi_objective:
        multi = {"objectives": objectives, "reference_point": problem.reference_point,
                 "reference_point_rule": "nadir of the pool's truth minus 10 % of its range, per objective "
                                         "(BoTorch's infer_reference_point), objective units",
                 "true_hypervolume": problem.true_hypervolume, "af_metric": af_metric,
                 "vs_botorch_hv95": versus_botorch(arms, "experiments_to_hv95"),
                 "vs_botorch_top1": versus_botorch(arms)}
    return {
        "pool_size": len(problem),
        "objective": c.objective or objectives[0],
        **multi,
        "spec": c.spec,
        "seeds": c.seeds,
        "lab_budget": budget,
        "batch": problem.spec.planner.batch_size,
        "arms": arms,
        "af_vs_random": af,
        "vs_botorch": versus_botorch(arms, "experiments_to_hv90" if problem.is_multi_objective
                                      else "experiments_to_top1"),
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
        **({"fail_at_or_below": c.fail_at_or_below, "failure_policy": problem.spec.lab.failure_policy}
           if has_failures else {}),
        "runs": [{"arm": r.arm, "seed": r.seed, "order": r.order, "lab_order": r.lab_order or r.order, "n_failed": r.n_failed,
                  "measured": r.measured, "wall_s": r.wall_s,
                  "rung_cost_s": r.rung_cost_s, "n_rung_evaluations": r.n_rung_evaluations, "notes": r.notes}
                 for r in records],
    }


def versus_botorch(arms: dict[str, Any], metric: str = "experiments_to_top1") -> dict[str, Any]:
    """Every other arm against the better BoTorch arm (``metrics.botorch_reference``, by median lab experiments of
    ``metric``: to a top-1 % candidate, or to 90 % of the true hypervolume): the ratio of medians and, on the seeds
    both ran, the paired geometric mean; {} without one.

    The per-arm numbers stay under ``arms``; this only says which reference the ratios use (``reference``, ``label``).
    """
    reference = botorch_reference({arm: s[metric]["median"] for arm, s in arms.items()})
    if reference is None:
        return {}
    ref = arms[reference]
    ref_by_seed = dict(zip(ref["per_seed"]["seeds"], ref["per_seed"][metric], strict=True))
    median_ratio, paired = {}, {}
    for arm, s in arms.items():
        if arm == reference:
            continue
        median_ratio[arm] = s[metric]["median"] / ref[metric]["median"]
        pairs = [(n, ref_by_seed[seed]) for seed, n in zip(s["per_seed"]["seeds"], s["per_seed"][metric],
                                                          strict=True) if seed in ref_by_seed]
        if pairs:
            paired[arm] = paired_geomean_ratio(*zip(*pairs, strict=True))
    return {"reference": reference, "label": reference_label(arms), "metric": metric,
            "median_ratio": median_ratio, "paired_geomean_ratio": paired}


def bracket(arms: dict[str, Any], metric: str) -> dict[str, Any]:
    """The llm arm's ``contribution`` between ``llm-random`` and ``llm-oracle`` on ``metric``, on the seeds all
    three ran (``bracket.contribution``), with the metric named."""
    by_seed = [dict(zip(arms[a]["per_seed"]["seeds"], arms[a]["per_seed"][metric], strict=True)) for a in BRACKET_ARMS]
    seeds = sorted(set.intersection(*(set(s) for s in by_seed)))
    if not seeds:
        return {"metric": metric, "n_seeds": 0}
    model, floor, ceiling = ([s[seed] for seed in seeds] for s in by_seed)
    return {"metric": metric, **contribution(model, floor, ceiling)}


def _lab_sequence(record: RunRecord) -> list[int]:
    """The pool row per lab experiment (``NO_RESULT`` for a failed run); the dispatch order for a record without it."""
    return record.lab_order or record.order


def _written(objective) -> str:
    """An objective as the bench flag writes it: ``maximize:COL`` or ``target:COL:VALUE:TOL``."""
    text = f"{objective.direction}:{objective.property}"
    return text + (f":{objective.target}:{objective.tolerance}" if objective.direction == "target" else "")


def _hypervolume_metrics(problem: BenchProblem, orders: list[list[int]], budget: int) -> dict[str, Any]:
    """Per arm, several objectives: lab experiments to 90 % and 95 % of the pool's true hypervolume and the
    hypervolume at the budget (the product of the objectives' units), each summarised, with their per-seed lists."""
    Y, reference, true_hv = problem.objective_utilities, problem.reference_utility, problem.true_hypervolume
    to90 = [experiments_to_hv(o, Y, reference, 0.90, true_hypervolume=true_hv, budget=budget) for o in orders]
    to95 = [experiments_to_hv(o, Y, reference, 0.95, true_hypervolume=true_hv, budget=budget) for o in orders]
    at_budget = [hypervolume_at_budget(o, Y, reference, budget) for o in orders]
    return {"experiments_to_hv90": summarise(to90), "experiments_to_hv95": summarise(to95),
            "hypervolume_at_budget": summarise(at_budget),
            "hypervolume_fraction_at_budget": summarise([hv / true_hv for hv in at_budget]),
            "hit_rate_hv90": float(np.mean([t <= budget for t in to90])),
            "hit_rate_hv95": float(np.mean([t <= budget for t in to95])),
            "per_seed": {"experiments_to_hv90": to90, "experiments_to_hv95": to95,
                            "hypervolume_at_budget": at_budget}}


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
