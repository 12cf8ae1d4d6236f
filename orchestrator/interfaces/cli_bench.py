"""``closedloop bench``: discovery efficiency of campaign arms, on a campaign spec as it stands or on any CSV pool."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from orchestrator.interfaces.cli_common import console, fail, out

__all__ = ["bench"]

_FLAGS = {"spec": "--spec", "pool": "--pool", "id_cols": "--id-cols", "objective": "--objective", "rungs": "--rung",
          "feature_cols": "--feature-cols", "lab_budget": "--lab-budget", "seeds": "--seeds", "arms": "--arms",
          "batch": "--batch", "lab_cost_s": "--lab-cost-s", "workers": "--workers", "first_seed": "--first-seed", "objectives": "--objective",
          "fail_at_or_below": "--fail-at-or-below", "failure_policy": "--failure-policy"}


def _split(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _config(**values):
    from pydantic import ValidationError

    from orchestrator.bench import BenchConfig, BenchError, parse_rung

    try:
        values["rungs"] = tuple(parse_rung(r) for r in values["rungs"])
        return BenchConfig(**values)
    except BenchError as exc:
        fail(str(exc))
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            message = error["msg"].removeprefix("Value error, ")
            if not error["loc"]:  # a check across flags: its message starts with the flag to fix
                problems.append(message)
                continue
            field = str(error["loc"][0])
            problems.append(f"{_FLAGS.get(field, '--' + field.replace('_', '-'))}: {message}")
        fail("; ".join(problems))


def bench(
    arms: Annotated[str, typer.Option("--arms", help="comma-separated: llm,llm-shuffled,llm-random,llm-oracle,bo,bo-sf,random,cheap-first,botorch,botorch-onehot (llm with llm-random and llm-oracle: the model's contribution)")],
    seeds: Annotated[int, typer.Option("--seeds", help="runs per arm (seeds FIRST..FIRST+K-1)")],
    spec: Annotated[Path | None, typer.Option("--spec", help="a campaign TOML, benchmarked as it stands")] = None,
    pool: Annotated[Path | None, typer.Option("--pool", help="CSV file: one row per candidate (replicates are averaged; an empty id value means none)")] = None,
    id_cols: Annotated[str | None, typer.Option("--id-cols", help="--pool: COL[,COL...], the columns that identify a candidate")] = None,
    objective: Annotated[list[str] | None, typer.Option("--objective", help="--pool: maximize:COL | minimize:COL | target:COL:VALUE:TOL; repeat it for several objectives (scored by hypervolume)")] = None,
    lab_budget: Annotated[int | None, typer.Option("--lab-budget", help="lab experiments per run (default with --spec: the spec's)")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="write the report here")] = None,
    rung: Annotated[list[str] | None, typer.Option("--rung", help="--pool: NAME=COL[:COST_S], a cheaper fidelity; repeatable")] = None,
    feature_cols: Annotated[str, typer.Option("--feature-cols", help="--pool: auto (the id columns, by what they hold)")] = "auto",
    batch: Annotated[int, typer.Option("--batch", help="--pool: lab experiments per iteration")] = 5,
    lab_cost_s: Annotated[float, typer.Option("--lab-cost-s", help="cost of one lab experiment, seconds")] = 3600.0,
    workers: Annotated[int, typer.Option("--workers", help="processes running seeds in parallel")] = 2,
    first_seed: Annotated[int, typer.Option("--first-seed", help="first seed")] = 0,
    fail_at_or_below: Annotated[float | None, typer.Option("--fail-at-or-below", help="--pool: the simulated lab fails a run whose true (first) objective value is at or below this")] = None,
    failure_policy: Annotated[str | None, typer.Option("--failure-policy", help="--pool: retry | skip | learn: what a failed run means (default retry); learn = infeasible here, never retried, and learned")] = None,
) -> None:
    """Benchmark discovery efficiency: lab experiments to a top-1 % and top-5 % candidate, per arm, over seeds.

    Every arm runs as a real campaign (the spec's main planner, no control) through the same graph, screen, ledger
    and simulated lab as `closedloop run`, the lab answering from the ground-truth column. With --spec the campaign
    is benchmarked as it stands; with --pool a spec is built (each --rung column a table rung at its cost). A run
    that never hits counts as lab-budget + 1. The JSON holds pool_size, objective, seeds, lab_budget, per-arm medians
    and IQRs (experiments_to_top1, experiments_to_top5, best_at_budget), total_cost_s, wall_s, af_vs_random, and
    per_seed (seeds, and measured: the candidate ids of each run in dispatch order). For a target objective also
    experiments_to_window: lab experiments to a value inside target ± tolerance (n_in_window candidates are).

    With --objective repeated (several objectives, traded off by Pareto hypervolume) the JSON also holds the
    reference_point (objective units: the pool's nadir minus 10 % of its range, BoTorch's rule, which every arm
    plans with) and true_hypervolume (the whole pool's), and per arm experiments_to_hv90, experiments_to_hv95 (lab
    experiments until the measured set dominates 90 % / 95 % of it) and hypervolume_at_budget; the ratios against
    BoTorch (vs_botorch) are on experiments_to_hv90. With --fail-at-or-below every arm also reports failed_runs (lab
    experiments spent on runs that failed).
    """
    from orchestrator.bench import run_bench
    from vocabulary.domain import ClosedLoopError

    config = _config(spec=None if spec is None else str(spec), pool=None if pool is None else str(pool),
                     id_cols=_split(id_cols or ""), objective=objective[0] if objective else None,
                     objectives=tuple(objective) if objective and len(objective) > 1 else (), rungs=rung or [],
                     feature_cols="auto" if feature_cols.strip() == "auto" else _split(feature_cols),
                     lab_budget=lab_budget, seeds=seeds, arms=_split(arms), batch=batch, lab_cost_s=lab_cost_s,
                     workers=workers, first_seed=first_seed, fail_at_or_below=fail_at_or_below,
                     failure_policy=failure_policy)
    try:
        report = run_bench(config)
    except ClosedLoopError as exc:
        fail(str(exc))
    _print_table(report)
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(report, indent=2) + "\n")
        console.print(f"report written to {json_out}", highlight=False)


def _print_table(report: dict) -> None:
    multi = "true_hypervolume" in report  # several objectives: scored by hypervolume
    failures = "fail_at_or_below" in report
    title = " · ".join(report.get("objectives") or [report["objective"]])
    table = Table(title=f"{title} · pool {report['pool_size']} · {report['seeds']} seeds · "
                        f"budget {report['lab_budget']}"
                        + (f" · reference point {[float(f'{v:.4g}') for v in report['reference_point']]}, true HV "
                           f"{report['true_hypervolume']:.4g}" if multi else ""))
    window = "n_in_window" in report  # a target objective: its own success, a value inside the window
    # several objectives: the hypervolume columns replace the first objective's top-k ones (still in the JSON)
    keys = ([("to HV90 (IQR)", "experiments_to_hv90"), ("to HV95 (IQR)", "experiments_to_hv95"),
             ("HV at budget (IQR)", "hypervolume_at_budget")] if multi else
            [("to top-1 % (IQR)", "experiments_to_top1"), ("to top-5 % (IQR)", "experiments_to_top5")])
    keys += [("to window (IQR)", "experiments_to_window")] if window else []
    keys += [] if multi else [("best at budget", "best_at_budget")]
    keys += [("failed runs (IQR)", "failed_runs")] if failures else []
    for name in ("arm", *(name for name, _ in keys), "AF vs random", "total cost s", "wall s"):
        table.add_column(name, justify="left" if name == "arm" else "right")
    for arm, s in report["arms"].items():
        def cell(key: str) -> str:
            q = s[key]
            return f"{q['median']:.4g} ({q['iqr'][0]:.3g}–{q['iqr'][1]:.3g})"
        af = report["af_vs_random"].get(arm)
        table.add_row(arm, *(cell(key) for _, key in keys),
                      "" if af is None else f"{af:.2f}", f"{s['total_cost_s']:.3g}", f"{s['wall_s']:.2f}")
    out.print(table)
