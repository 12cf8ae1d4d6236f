"""The llm arm's cost and reliability: proposal validity, latency per planning step, and overhead against bo.

Runs the real planners on FreeSolv planning contexts (random lab histories of a few sizes, GP fitted on them):
the embedded SmolLM2 model (or ``--model provider:model``) against the bo arm, on the same contexts.

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.llm_planner [--n-contexts 3] [--n 3] [--model MODEL]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from orchestrator.planners import BOPlanner, fit_surrogate_state
from orchestrator.planners.base import PlanningContext
from orchestrator.planners.llm import LLMPlanner
from orchestrator.pool import load_pool
from orchestrator.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "campaigns" / "freesolv" / "campaign.toml"


def planning_context(spec, pool, *, n_observed: int, seed: int) -> PlanningContext:
    """A context with ``n_observed`` random lab results from the pool's ground truth and a GP fitted on them."""
    rng = np.random.default_rng(seed)
    observed = np.sort(rng.choice(len(pool), size=n_observed, replace=False))
    truth = pool.columns[spec.lab.oracle_column]
    utilities = np.asarray([spec.objective.utility(v) for v in truth[observed]], dtype=float)
    state = fit_surrogate_state(pool.features[observed], utilities, kernel="tanimoto", seed=seed)
    taken = set(observed.tolist())
    available = np.asarray([i for i in range(len(pool)) if i not in taken], dtype=int)
    return PlanningContext(spec=spec, pool=pool, iteration=seed + 1, available=available, observed=observed,
                           utilities=utilities, pending=np.zeros(0, dtype=int), surrogate_state=state, seed=seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n-contexts", type=int, default=3)
    parser.add_argument("--n", type=int, default=3, help="proposals per planning step")
    parser.add_argument("--model", default=None, help="provider:model or .gguf; default the embedded model")
    args = parser.parse_args()
    spec = load_spec(SPEC)
    pool = load_pool(spec)
    llm, bo = LLMPlanner(model=args.model), BOPlanner()
    rows = []
    for k in range(args.n_contexts):
        context = planning_context(spec, pool, n_observed=6 + 6 * k, seed=k)
        start = time.perf_counter()
        bo.propose(context, args.n)
        bo_s = time.perf_counter() - start
        start = time.perf_counter()
        proposals = llm.propose(context, args.n)
        llm_s = time.perf_counter() - start
        run = llm.last_run
        rows.append({"n_observed": len(context.observed), "n_proposed": len(proposals),
                     "n_valid_first_round": run["n_valid_first_round"], "n_valid": run["n_valid"],
                     "n_fallback": run["n_fallback"], "n_repair_rounds": run["n_repair_rounds"],
                     "llm_s": llm_s, "bo_s": bo_s})
    n_asked = args.n * len(rows)
    summary = {
        "model": args.model or "embedded SmolLM2-135M-Instruct (llama.cpp)",
        "validity_first_round": sum(r["n_valid_first_round"] for r in rows) / n_asked,
        "fallback_rate": sum(r["n_fallback"] for r in rows) / n_asked,
        "llm_s_per_step_median": float(np.median([r["llm_s"] for r in rows])),
        "bo_s_per_step_median": float(np.median([r["bo_s"] for r in rows])),
    }
    summary["overhead_vs_bo"] = summary["llm_s_per_step_median"] / max(summary["bo_s_per_step_median"], 1e-9)
    table = Table(title="llm arm against bo, same FreeSolv contexts")
    for column in ("lab results", "valid (first round)", "fallbacks", "repairs", "llm s", "bo s"):
        table.add_column(column)
    for r in rows:
        table.add_row(str(r["n_observed"]), f"{r['n_valid_first_round']}/{args.n}", str(r["n_fallback"]),
                      str(r["n_repair_rounds"]), f"{r['llm_s']:.1f}", f"{r['bo_s']:.3f}")
    console = Console()
    console.print(table)
    console.print(summary)
    out = Path(__file__).parent / "results" / "llm_planner.json"
    out.write_text(json.dumps({"rows": rows, "summary": summary, "date": time.strftime("%Y-%m-%d")}, indent=2))


if __name__ == "__main__":
    main()
