"""``closedloop bench``: a discovery-efficiency benchmark over any CSV pool, without writing a spec."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

__all__ = ["bench"]

_console = Console(stderr=True)
_FLAGS = {"pool": "--pool", "id_cols": "--id-cols", "objective": "--objective", "rungs": "--rung",
          "feature_cols": "--feature-cols", "lab_budget": "--lab-budget", "seeds": "--seeds", "arms": "--arms",
          "batch": "--batch", "lab_cost_s": "--lab-cost-s", "workers": "--workers", "first_seed": "--first-seed"}


def _fail(message: str) -> None:
    _console.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(2)


def _split(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _config(**values):
    from pydantic import ValidationError

    from .bench import BenchConfig, BenchError, parse_rung

    try:
        values["rungs"] = tuple(parse_rung(r) for r in values["rungs"])
        return BenchConfig(**values)
    except BenchError as exc:
        _fail(str(exc))
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            message = error["msg"].removeprefix("Value error, ")
            if not error["loc"]:  # a check across flags: its message starts with the flag to fix
                problems.append(message)
                continue
            field = str(error["loc"][0])
            problems.append(f"{_FLAGS.get(field, '--' + field.replace('_', '-'))}: {message}")
        _fail("; ".join(problems))


def bench(
    pool: Annotated[Path, typer.Option("--pool", help="CSV file: one row per candidate (replicates are averaged)")],
    id_cols: Annotated[str, typer.Option("--id-cols", help="COL[,COL...]: the columns that identify a candidate")],
    objective: Annotated[str, typer.Option("--objective", help="maximize:COL | minimize:COL | target:COL:VALUE:TOL")],
    lab_budget: Annotated[int, typer.Option("--lab-budget", help="lab experiments per run")],
    seeds: Annotated[int, typer.Option("--seeds", help="runs per arm (seeds 0..K-1)")],
    arms: Annotated[str, typer.Option("--arms", help="comma-separated: llm,bo,bo-sf,random,cheap-first,botorch")],
    json_out: Annotated[Path, typer.Option("--json", help="write the report here")],
    rung: Annotated[list[str] | None, typer.Option("--rung", help="NAME=COL[:COST_S], a cheaper fidelity; repeatable")] = None,
    feature_cols: Annotated[str, typer.Option("--feature-cols", help="COL,... or auto (the id columns, by type)")] = "auto",
    batch: Annotated[int, typer.Option("--batch", help="lab experiments per iteration")] = 5,
    lab_cost_s: Annotated[float, typer.Option("--lab-cost-s", help="cost of one lab experiment, seconds")] = 3600.0,
    workers: Annotated[int, typer.Option("--workers", help="processes running seeds in parallel")] = 2,
    first_seed: Annotated[int, typer.Option("--first-seed", help="first seed")] = 0,
) -> None:
    """Benchmark discovery efficiency: lab experiments to a top-1 % and top-5 % candidate, per arm, over seeds.

    The lab is the objective column; each --rung column is a cheaper fidelity. A run that never hits counts as
    lab-budget + 1. OUT.json holds pool_size, objective, seeds, lab_budget, per-arm medians and IQRs
    (experiments_to_top1, experiments_to_top5, best_at_budget), total_cost_s, wall_s, and af_vs_random (random's
    median experiments to top-5 % over the arm's).
    """
    from .bench import run_bench
    from .domain import ClosedLoopError

    config = _config(pool=str(pool), id_cols=_split(id_cols), objective=objective, rungs=rung or [],
                     feature_cols="auto" if feature_cols.strip() == "auto" else _split(feature_cols),
                     lab_budget=lab_budget, seeds=seeds, arms=_split(arms), batch=batch, lab_cost_s=lab_cost_s,
                     workers=workers, first_seed=first_seed)
    try:
        report = run_bench(config)
    except ClosedLoopError as exc:
        _fail(str(exc))
    json_out.parent.mkdir(parents=True, exist_ok=True)
    json_out.write_text(json.dumps(report, indent=2) + "\n")
    _print_table(report)
    _console.print(f"report written to {json_out}", highlight=False)


def _print_table(report: dict) -> None:
    table = Table(title=f"{report['objective']} · pool {report['pool_size']} · {report['seeds']} seeds · "
                        f"budget {report['lab_budget']}")
    for name in ("arm", "to top-1 % (IQR)", "to top-5 % (IQR)", "best at budget", "AF vs random", "total cost s", "wall s"):
        table.add_column(name, justify="left" if name == "arm" else "right")
    for arm, s in report["arms"].items():
        def cell(key: str) -> str:
            q = s[key]
            return f"{q['median']:.4g} ({q['iqr'][0]:.3g}–{q['iqr'][1]:.3g})"
        af = report["af_vs_random"].get(arm)
        table.add_row(arm, cell("experiments_to_top1"), cell("experiments_to_top5"), cell("best_at_budget"),
                      "" if af is None else f"{af:.2f}", f"{s['total_cost_s']:.3g}", f"{s['wall_s']:.2f}")
    Console().print(table)
