"""Lab utilisation: pending-aware batched dispatch against one-at-a-time dispatch on a 4-station SimLab.

The lab (``LAB``): synthesis (2 slots, 4 h median), work-up (1 slot, 1 h), purification (1 slot, 2.5 h) and
characterisation (1 slot, 0.5 h), lognormal durations, a transfer robot (2 min per move) between consecutive
stations, every job walking all four. Purification has the largest work per slot (2.5 h against synthesis' 4 h / 2),
so it is the bottleneck: no dispatch can finish N experiments faster than about N x 2.5 h.

N experiments (default 40) run two ways on a fresh, seeded lab with the same job keys, so each job has the same
station durations in both (SimLab draws them per job key):

- **pending-aware**: keep ``max_pending`` jobs in the lab (default: its parallel capacity, the sum of the station
  slots) and submit the next one as soon as one finishes (``submit``, ``run_until_any_complete``, refill);
- **one at a time**: submit one job, ``run_until_complete`` it, then submit the next.

For each, the bottleneck station's utilisation (busy time / (slots x elapsed)) and the simulated time to finish all N,
and their ratios. A sweep over ``max_pending`` shows where adding more jobs stops paying. Every number is simulated
time, so the results are deterministic for a given ``--seeds``.

``--campaigns`` also runs two real campaigns on the Buchwald–Hartwig pool through the orchestrator (random planner,
no control arm): ``lab.wait = "any"`` with ``max_pending`` = the lab's capacity against ``lab.wait = "all"`` with
``batch_size = 1``. The orchestrator builds every ``LabJob`` with the default steps (synthesis, work-up,
characterisation), and a spec cannot name others, so the campaign lab is the three-station default route with the
same durations (synthesis is then the bottleneck).

Run from the repository root::

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.lab_utilisation [--n 40] [--seeds 5] [--campaigns]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: python benchmarks/lab_utilisation.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import statistics  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from typing import Any  # noqa: E402

from benchmarks import common  # noqa: E402  (pins the thread variables before numpy loads)

NAME = "lab_utilisation"
HOUR = 3600.0
#: The 4-station lab: slots per station, and (median s, log sd) of each station's lognormal duration.
LAB: dict[str, Any] = {
    "stations": {"synthesis": 2, "workup": 1, "purification": 1, "characterisation": 1},
    "durations_s": {
        "synthesis": (4 * HOUR, 0.3),
        "workup": (1 * HOUR, 0.25),
        "purification": (2.5 * HOUR, 0.3),
        "characterisation": (0.5 * HOUR, 0.2),
    },
    "transfer_s": 120.0,
}
STEPS = ("synthesis", "workup", "purification", "characterisation")
CAMPAIGN_SPEC = common.BENCHMARKS_DIR.parent / "campaigns" / "buchwald_hartwig" / "campaign.toml"


def design_bottleneck(stations: dict[str, int], durations_s: dict[str, tuple[float, float]]) -> str:
    """The station with the most median work per slot."""
    return max(stations, key=lambda name: durations_s[name][0] / stations[name])


def make_lab(seed: int, lab: dict[str, Any] = LAB):
    from instruments import FunctionOracle, SimLabDriver

    return SimLabDriver(oracle=FunctionOracle(lambda c: c.values["x"], property="x"), seed=seed, **lab)


def make_jobs(n: int, steps: Sequence[str] = STEPS):
    from instruments import LabJob
    from vocabulary.domain import Conditions

    return [
        LabJob(job_key=f"exp-{i:03d}", candidate=Conditions(values={"x": float(i)}, id=f"c{i:03d}"), steps=tuple(steps))
        for i in range(n)
    ]


def run_pending_aware(lab, jobs, max_pending: int) -> None:
    """Keep ``max_pending`` jobs in the lab; refill as each finishes."""
    queue, open_handles = list(jobs), []
    while queue or open_handles:
        while queue and len(open_handles) < max_pending:
            open_handles.append(asyncio.run(lab.submit(queue.pop(0))))
        lab.run_until_any_complete(open_handles)
        open_handles = [h for h in open_handles if asyncio.run(lab.status(h)) not in ("done", "failed", "cancelled")]


def run_one_at_a_time(lab, jobs) -> None:
    """Submit one job, wait for it, then the next."""
    for job in jobs:
        handle = asyncio.run(lab.submit(job))
        lab.run_until_complete([handle])


def measure(lab, jobs, bottleneck: str) -> dict[str, Any]:
    """Makespan, utilisation per station, queue waits and outcomes of a finished run."""
    from instruments import JobHandle

    metrics = lab.metrics()
    results = [asyncio.run(lab.result(JobHandle(job_key=job.job_key, driver=lab.name))) for job in jobs]
    return {
        "makespan_h": metrics.elapsed_s / HOUR,
        "bottleneck_utilisation": metrics.utilisation[bottleneck],
        "utilisation": {name: value for name, value in metrics.utilisation.items()},
        "mean_queue_wait_h": metrics.mean_queue_wait_s / HOUR,
        "n_ok": sum(r.status == "ok" for r in results),
        "n_failed": sum(r.status == "failed" for r in results),
        "experiments_per_day": len(jobs) / (metrics.elapsed_s / (24 * HOUR)),
    }


def direct_comparison(n: int, seeds: Sequence[int], max_pending: int, bottleneck: str) -> dict[str, Any]:
    per_seed = []
    for seed in seeds:
        jobs = make_jobs(n)
        batched_lab, single_lab, check_lab = make_lab(seed), make_lab(seed), make_lab(seed)
        run_pending_aware(batched_lab, jobs, max_pending)
        run_one_at_a_time(single_lab, jobs)
        run_pending_aware(check_lab, jobs, 1)  # the refill loop at max_pending=1 must be one-at-a-time exactly
        batched, single = measure(batched_lab, jobs, bottleneck), measure(single_lab, jobs, bottleneck)
        if abs(measure(check_lab, jobs, bottleneck)["makespan_h"] - single["makespan_h"]) > 1e-9:
            raise SystemExit(f"seed {seed}: pending-aware dispatch with max_pending=1 differs from one-at-a-time")
        per_seed.append({
            "seed": seed,
            "pending_aware": batched,
            "one_at_a_time": single,
            "makespan_ratio": single["makespan_h"] / batched["makespan_h"],
            "bottleneck_utilisation_ratio": batched["bottleneck_utilisation"] / single["bottleneck_utilisation"],
        })

    def summary(key: str, field: str) -> dict[str, float]:
        values = [row[key][field] if key else row[field] for row in per_seed]
        return {"mean": statistics.fmean(values), "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
                "min": min(values), "max": max(values)}

    return {
        "per_seed": per_seed,
        "pending_aware": {f: summary("pending_aware", f) for f in ("makespan_h", "bottleneck_utilisation",
                                                                     "mean_queue_wait_h", "experiments_per_day")},
        "one_at_a_time": {f: summary("one_at_a_time", f) for f in ("makespan_h", "bottleneck_utilisation",
                                                                     "mean_queue_wait_h", "experiments_per_day")},
        "makespan_ratio": summary("", "makespan_ratio"),
        "bottleneck_utilisation_ratio": summary("", "bottleneck_utilisation_ratio"),
    }


def sweep(n: int, seeds: Sequence[int], levels: Sequence[int], bottleneck: str) -> list[dict[str, Any]]:
    rows = []
    for max_pending in levels:
        runs = []
        for seed in seeds:
            jobs = make_jobs(n)
            lab = make_lab(seed)
            run_pending_aware(lab, jobs, max_pending)
            runs.append(measure(lab, jobs, bottleneck))
        rows.append({
            "max_pending": max_pending,
            "makespan_h": statistics.fmean(r["makespan_h"] for r in runs),
            "bottleneck_utilisation": statistics.fmean(r["bottleneck_utilisation"] for r in runs),
            "mean_queue_wait_h": statistics.fmean(r["mean_queue_wait_h"] for r in runs),
        })
    return rows


# ----------------------------------------------------------------------------------------------------- campaigns
def run_campaign(n: int, seed: int, wait: str, max_pending: int, batch_size: int, planner: str) -> dict[str, Any]:
    from orchestrator.loop.campaign import Campaign
    from orchestrator.spec import load_spec, validate_spec

    data = load_spec(CAMPAIGN_SPEC).model_dump(mode="json")
    default_route = ("synthesis", "workup", "characterisation")
    data["campaign"]["seed"] = seed
    data["lab"].update(
        wait=wait,
        max_pending=max_pending,
        noise_sd=2.0,
        parameters={
            "stations": {name: LAB["stations"][name] for name in default_route},
            "durations_s": {name: list(LAB["durations_s"][name]) for name in default_route},
            "transfer_s": LAB["transfer_s"],
        },
    )
    data["budget"] = {"lab_experiments": n}
    data["planner"].update(main=planner, control=None, control_share=0.0, batch_size=batch_size, n_initial=batch_size)
    data["stop"]["on_target"] = False
    spec = validate_spec(data, source=f"{CAMPAIGN_SPEC} (benchmark overrides)")
    bottleneck = design_bottleneck(spec.lab.parameters["stations"],
                                   {k: tuple(v) for k, v in spec.lab.parameters["durations_s"].items()})
    with common.Stopwatch.run() as watch, Campaign.start(spec, db=":memory:", campaign_id=f"util-{wait}") as campaign:
        summary = campaign.run()
        metrics = campaign.ctx.driver.metrics()
        max_pending_used = campaign.ctx.max_pending
    return {
        "wait": wait,
        "max_pending": max_pending_used,
        "batch_size": batch_size,
        "bottleneck": bottleneck,
        "n_lab": summary["n_lab"],
        "n_lab_failed": summary["n_lab_failed"],
        "stop_reason": summary["stop_reason"],
        "makespan_h": metrics.elapsed_s / HOUR,
        "campaign_lab_hours": summary["lab_hours"],
        "bottleneck_utilisation": metrics.utilisation[bottleneck],
        "utilisation": dict(metrics.utilisation),
        "wall_s": watch.wall_s,
    }


# ----------------------------------------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=40, help="experiments per run (default 40)")
    parser.add_argument("--seeds", type=int, default=5, help="lab seeds 0..S-1 (default 5)")
    parser.add_argument("--max-pending", type=int, default=None,
                        help="jobs kept in the lab by pending-aware dispatch (default: the lab's capacity)")
    parser.add_argument("--campaigns", action="store_true", help="also run the two Buchwald–Hartwig campaigns")
    parser.add_argument("--planner", choices=["random", "bo"], default="random",
                        help="campaign planner (default random)")
    args = parser.parse_args(argv)

    stations, durations = LAB["stations"], LAB["durations_s"]
    capacity = sum(stations.values())
    max_pending = args.max_pending or capacity
    bottleneck = design_bottleneck(stations, durations)
    seeds = list(range(args.seeds))

    with common.Stopwatch.run() as total:
        direct = direct_comparison(args.n, seeds, max_pending, bottleneck)
        levels = sorted({1, 2, 3, 4, capacity, capacity + 1, 2 * capacity, args.n} | {max_pending})
        curve = sweep(args.n, seeds, [m for m in levels if m <= args.n], bottleneck)
        campaigns = None
        if args.campaigns:
            route_capacity = sum(stations[name] for name in ("synthesis", "workup", "characterisation"))
            campaigns = {
                "pending_aware": run_campaign(args.n, 0, "any", route_capacity, route_capacity, args.planner),
                "one_at_a_time": run_campaign(args.n, 0, "all", 1, 1, args.planner),
            }
            campaigns["makespan_ratio"] = (campaigns["one_at_a_time"]["makespan_h"]
                                           / campaigns["pending_aware"]["makespan_h"])
            campaigns["bottleneck_utilisation_ratio"] = (campaigns["pending_aware"]["bottleneck_utilisation"]
                                                         / campaigns["one_at_a_time"]["bottleneck_utilisation"])

    lower_bound_h = args.n * durations[bottleneck][0] / stations[bottleneck] / HOUR
    pa, one = direct["pending_aware"], direct["one_at_a_time"]

    def pm(entry: dict[str, float], digits: int = 3) -> str:
        return f"{entry['mean']:.{digits}f} ± {entry['sd']:.{digits}f}"

    common.print_table(
        f"{args.n} experiments on a 4-station SimLab: pending-aware (max_pending={max_pending}) vs one at a time "
        f"(mean ± sd over {len(seeds)} seeds)",
        ["dispatch", f"{bottleneck} (bottleneck) utilisation", "time to finish N (h)", "experiments / day",
         "mean queue wait (h)"],
        [
            [f"pending-aware, max_pending={max_pending}", pm(pa["bottleneck_utilisation"]), pm(pa["makespan_h"], 1),
             pm(pa["experiments_per_day"], 2), pm(pa["mean_queue_wait_h"], 2)],
            ["one at a time", pm(one["bottleneck_utilisation"]), pm(one["makespan_h"], 1),
             pm(one["experiments_per_day"], 2), pm(one["mean_queue_wait_h"], 2)],
            ["ratio", f"{pm(direct['bottleneck_utilisation_ratio'], 2)} x",
             f"{pm(direct['makespan_ratio'], 2)} x faster", "", ""],
        ],
        caption=(f"stations {stations}; medians " + ", ".join(f"{k} {v[0] / HOUR:g} h" for k, v in durations.items())
                 + f"; transfer {LAB['transfer_s']:g} s. Bottleneck bound: N x {durations[bottleneck][0] / HOUR:g} h "
                 f"/ {stations[bottleneck]} slot = {lower_bound_h:.0f} h (medians)."),
    )
    common.print_table(
        "Utilisation per station, seed 0",
        ["station", "pending-aware", "one at a time"],
        [[name, direct["per_seed"][0]["pending_aware"]["utilisation"][name],
          direct["per_seed"][0]["one_at_a_time"]["utilisation"][name]]
         for name in [*stations, "transfer_robot"]],
    )
    common.print_table(
        f"Sweep of max_pending (mean over {len(seeds)} seeds)",
        ["max_pending", "time to finish N (h)", f"{bottleneck} utilisation", "mean queue wait (h)"],
        [[str(r["max_pending"]), r["makespan_h"], r["bottleneck_utilisation"], r["mean_queue_wait_h"]] for r in curve],
        caption=f"max_pending=1 is one at a time; {capacity} is the lab's capacity (the sum of the station slots).",
    )
    if campaigns:
        pac, onec = campaigns["pending_aware"], campaigns["one_at_a_time"]
        common.print_table(
            f"Through the orchestrator: {args.n}-experiment Buchwald–Hartwig campaigns "
            f"({args.planner} planner, seed 0)",
            ["campaign", f"{pac['bottleneck']} (bottleneck) utilisation", "time to finish N (h)", "lab results",
             "wall s"],
            [
                [f"lab.wait='any', max_pending={pac['max_pending']}", pac["bottleneck_utilisation"], pac["makespan_h"],
                 f"{pac['n_lab']} ({pac['n_lab_failed']} failed)", pac["wall_s"]],
                ["lab.wait='all', batch_size=1", onec["bottleneck_utilisation"], onec["makespan_h"],
                 f"{onec['n_lab']} ({onec['n_lab_failed']} failed)", onec["wall_s"]],
                ["ratio", f"{campaigns['bottleneck_utilisation_ratio']:.2f} x",
                 f"{campaigns['makespan_ratio']:.2f} x faster", "", ""],
            ],
            caption="The orchestrator's jobs use the default steps (synthesis, workup, characterisation): the "
                    "campaign lab is that 3-station route with the same durations, so synthesis (2 slots x 4 h) is "
                    "its bottleneck.",
        )
    common.console.print(f"total {total.wall_s:.1f} s wall")
    common.write_results(NAME, {
        "parameters": vars(args),
        "lab": {"stations": stations, "durations_s": {k: list(v) for k, v in durations.items()},
                "transfer_s": LAB["transfer_s"], "steps": list(STEPS), "capacity": capacity},
        "bottleneck": bottleneck,
        "bottleneck_bound_h": lower_bound_h,
        "max_pending": max_pending,
        "direct": direct,
        "sweep": curve,
        "campaigns": campaigns,
        "wall_s": total.wall_s,
    })


if __name__ == "__main__":
    main()
