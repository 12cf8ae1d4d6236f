"""Discovery-efficiency benchmarks: every arm against the lab column of a CSV pool, seeds in parallel.

``closedloop bench`` (``orchestrator/cli_bench.py``) is the command line; ``run_bench`` is the entry point.

Example:
    >>> "botorch" in ARM_NAMES and "cheap-first" in ARM_NAMES
    True
"""

from .config import ARM_NAMES, BenchConfig, BenchError, RungColumn, parse_objective, parse_rung
from .metrics import acceleration, best_at_budget, experiments_to_hit, summarise
from .problem import BenchProblem, load_problem, top_set
from .runner import run_bench, summarise_runs

__all__ = [
    "ARM_NAMES",
    "BenchConfig",
    "BenchError",
    "BenchProblem",
    "RungColumn",
    "acceleration",
    "best_at_budget",
    "experiments_to_hit",
    "load_problem",
    "parse_objective",
    "parse_rung",
    "run_bench",
    "summarise",
    "summarise_runs",
    "top_set",
]
