"""Discovery-efficiency benchmarks: every arm a real campaign against a ground-truth column, seeds in parallel.

``closedloop bench`` (``orchestrator/interfaces/cli_bench.py``) is the command line; ``run_bench`` is the entry point.
The rewards red team's campaigns (``redteam``) are played here too. The bench owns no planner code: every arm is a
campaign planner of ``policy/``.

May import: every floor below it. Only ``interfaces`` imports it.

Example:
    >>> "botorch" in ARM_NAMES and "cheap-first" in ARM_NAMES
    True
"""

from orchestrator.bench.config import (
    ARM_NAMES,
    BenchConfig,
    BenchError,
    RungColumn,
    parse_objective,
    parse_rung,
)
from orchestrator.bench.metrics import (
    BOTORCH_ARMS,
    acceleration,
    best_at_budget,
    botorch_reference,
    experiments_to_hit,
    paired_geomean_ratio,
    summarise,
)
from orchestrator.bench.problem import BenchProblem, load_problem, pool_spec, top_set
from orchestrator.bench.runner import (
    RunRecord,
    arm_spec,
    run_arm,
    run_bench,
    summarise_runs,
    versus_botorch,
)

__all__ = [
    "ARM_NAMES",
    "BOTORCH_ARMS",
    "BenchConfig",
    "BenchError",
    "BenchProblem",
    "RunRecord",
    "RungColumn",
    "arm_spec",
    "acceleration",
    "best_at_budget",
    "botorch_reference",
    "experiments_to_hit",
    "load_problem",
    "paired_geomean_ratio",
    "parse_objective",
    "parse_rung",
    "pool_spec",
    "run_arm",
    "run_bench",
    "summarise",
    "summarise_runs",
    "top_set",
    "versus_botorch",
]
