"""The llm arm's cost and reliability per planning step: CPU seconds, tokens, JSON validity, repairs and fallbacks.

Runs the real planner (the embedded SmolLM2 model, or ``--model provider:model``) on the planning contexts of the
discovery cells: the FreeSolv and ESOL problems exactly as ``benchmarks/results/discovery_<dataset>.json`` configures
them, with random lab histories of 0, 5, 15, 25, 35 and 45 results (a GP fitted on each, as the bench's learn step
does), asking for one batch of ``--n`` proposals each. The bo arm plans on the same contexts for comparison.

CPU seconds are ``time.process_time`` around ``propose`` (all threads of this process); the model is loaded, and one
warm-up step run, before anything is timed, as in a long campaign. ``choice_rank`` says which of the options the grammar
offered at each position the model took (0: the best-ranked by expected improvement).

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.llm_planner [--n 5] [--label after] [--out PATH]
    .venv/bin/python -m benchmarks.llm_planner --report    # re-render benchmarks/RESULTS.llm.md from results/*.json

Run it from another checkout (``PYTHONPATH=/path/to/old/tree``) to measure older planner code the same way.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

from orchestrator.bench.config import BenchConfig
from orchestrator.bench.problem import load_problem
from orchestrator.policy.planners import (
    BOPlanner,
    PlanningContext,
    campaign_kernel,
    continuous_columns,
    fit_surrogate_state,
)
from orchestrator.policy.planners.llm import LLMPlanner
from orchestrator.policy.planners.llm_prompt import ProposalBatch
from orchestrator.policy.planners.llm_recording import InMemoryLLMRecorder

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ("freesolv", "esol")
HISTORY_SIZES = (0, 5, 15, 25, 35, 45)


def bench_problem(dataset: str):
    """The discovery cell's problem, from the configuration stored with its results."""
    config = json.loads((ROOT / "benchmarks" / "results" / f"discovery_{dataset}.json").read_text())["config"]
    config.update(arms=["llm"], seeds=1, workers=1)
    import tempfile

    return load_problem(BenchConfig(**config), Path(tempfile.mkdtemp(prefix="closedloop-llm-bench-")))


def planning_context(problem, *, n_observed: int, seed: int):
    """A bench context with ``n_observed`` random lab results and, from two results on, a GP fitted on them."""
    rng = np.random.default_rng(seed)
    observed = [int(i) for i in rng.choice(len(problem), size=n_observed, replace=False)]
    state = None
    if n_observed >= 2:
        kernel = campaign_kernel(problem.spec, problem.pool)
        continuous = continuous_columns(problem.pool.feature_kinds) if kernel == "tanimoto_matern52" else None
        state = fit_surrogate_state(problem.pool.features[observed], problem.utilities[observed], kernel=kernel,
                                    seed=seed, continuous=continuous)
    is_tested = np.zeros(len(problem), dtype=bool)
    is_tested[observed] = True
    spec = problem.spec.with_overrides(seed=seed)
    return PlanningContext(spec=spec, pool=problem.pool, iteration=n_observed // 5,
                           available=np.flatnonzero(~is_tested), observed=np.asarray(observed, dtype=int),
                           utilities=problem.utilities[observed], values=problem.values[observed],
                           pending=np.zeros(0, dtype=int), surrogate_state=state, seed=seed)


def _valid_json(call: dict) -> bool:
    try:
        ProposalBatch.model_validate_json(call.get("response") or "")
        return True
    except ValueError:
        return False


def measure_step(planner: LLMPlanner, context, n: int) -> dict:
    """One planning step: CPU and wall seconds, tokens, validity, repairs, fallbacks and the ranks of the choices."""
    planner.recorder = InMemoryLLMRecorder()
    cpu, wall = time.process_time(), time.perf_counter()
    proposals = planner.propose(context, n)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    run = planner.last_run
    calls = [planner.recorder.lookup(key) for key in run["keys"]]
    first = calls[0] if calls else {}
    labels = {}
    for message in first.get("messages", []):
        if "<<<DATA\n" in message["content"] and message["role"] == "user":
            text = message["content"].split("<<<DATA\n", 1)[1].rsplit("\nDATA>>>", 1)[0]
            labels = {row[1]: row[0] for row in json.loads(text)["shortlist"]["rows"]}  # candidate text -> label
    ranks = []
    try:
        picked = [item.candidate for item in ProposalBatch.model_validate_json(first.get("response") or "").proposals]
        ranks = [int(label[1:]) // n for label in picked if label.lower().startswith("c") and label[1:].isdigit()]
    except ValueError:
        pass
    return {
        "n_observed": len(context.observed),
        "n_proposed": len(proposals),
        "cpu_s": cpu,
        "wall_s": wall,
        "n_calls": len(calls),
        "n_prompt_tokens": sum(c.get("n_prompt_tokens") or 0 for c in calls),
        "n_completion_tokens": sum(c.get("n_completion_tokens") or 0 for c in calls),
        "n_shortlist_rows": len(labels),
        "n_valid_json_calls": sum(_valid_json(c) for c in calls),
        "n_valid_first_round": run["n_valid_first_round"],
        "n_valid": run["n_valid"],
        "n_fallback": run["n_fallback"],
        "n_repair_rounds": run["n_repair_rounds"],
        "choice_rank": ranks,
    }


def summarise(rows: list[dict], n: int) -> dict:
    cpu = [r["cpu_s"] for r in rows]
    n_asked = n * len(rows)
    n_calls = sum(r["n_calls"] for r in rows)
    ranks = [k for r in rows for k in r["choice_rank"]]
    return {
        "n_steps": len(rows),
        "cpu_s_per_step_median": float(np.median(cpu)),
        "cpu_s_per_step_mean": float(np.mean(cpu)),
        "cpu_s_per_step_iqr": [float(np.percentile(cpu, 25)), float(np.percentile(cpu, 75))],
        "wall_s_per_step_median": float(np.median([r["wall_s"] for r in rows])),
        "prompt_tokens_per_step_median": float(np.median([r["n_prompt_tokens"] for r in rows])),
        "completion_tokens_per_step_median": float(np.median([r["n_completion_tokens"] for r in rows])),
        "shortlist_rows_median": float(np.median([r["n_shortlist_rows"] for r in rows])),
        "json_valid_rate": sum(r["n_valid_json_calls"] for r in rows) / max(n_calls, 1),
        "calls_per_step": n_calls / len(rows),
        "validity_first_round": sum(r["n_valid_first_round"] for r in rows) / n_asked,
        "fallback_rate": sum(r["n_fallback"] for r in rows) / n_asked,
        "repair_rounds_per_step": sum(r["n_repair_rounds"] for r in rows) / len(rows),
        "share_first_option": (sum(k == 0 for k in ranks) / len(ranks)) if ranks else None,
    }


# --------------------------------------------------------------------------------------------------- report
ARM_ORDER = ("llm", "bo", "bo-sf", "botorch", "cheap-first", "random")


def _cell(summary: dict, digits: int = 3) -> str:
    low, high = summary["iqr"]
    return f"{summary['median']:.{digits}g} [{low:.{digits}g}, {high:.{digits}g}]"


def llm_runs(dataset: str) -> list[dict]:
    """The llm arm's bench reports for a data set (``llm_arm_<dataset>*.json``), newest code first."""
    paths = sorted((ROOT / "benchmarks" / "results").glob(f"llm_arm_{dataset}*.json"), key=lambda p: p.stem != f"llm_arm_{dataset}")
    return [json.loads(path.read_text()) for path in paths]


def _comparable(report: dict, stored: dict) -> bool:
    a, b = dict(report["config"]), dict(stored["config"])
    for c in (a, b):
        for key in ("arms", "workers", "seeds"):
            c.pop(key)
        c["pool"] = str((ROOT / c["pool"]).resolve())  # a relative --pool is relative to the repository root
    return a == b


def _row(name: str, a: dict, date: str) -> str:
    return (f"| {name} | {len(a['per_seed']['seeds'])} | {_cell(a['experiments_to_top1'])} | {_cell(a['experiments_to_top5'])} | "
            f"{a['hit_rate_top1']:.2f} | {_cell(a['best_at_budget'])} | {a['wall_s']:.1f} | {date[:16]} |")


def arm_rows(dataset: str) -> list[str]:
    """Markdown rows: the llm arm's runs (one per code version), then the arms stored in the discovery cell."""
    discovery = json.loads((ROOT / "benchmarks" / "results" / f"discovery_{dataset}.json").read_text())
    rows = []
    for report in llm_runs(dataset):
        if not _comparable(report, discovery):
            raise SystemExit(f"{dataset}: an llm run's configuration differs from the discovery cell's")
        runs = [r for r in report["runs"] if r["arm"] == "llm"]
        n_fallback = sum(r["notes"].get("n_fallback_proposals", 0) for r in runs)
        name = f"llm @ {report.get('code_commit', '?')} ({n_fallback}/{sum(len(r['order']) for r in runs)} fallbacks)"
        rows.append(_row(name, report["arms"]["llm"], report["date"]))
    for arm in [a for a in ARM_ORDER if a in discovery["arms"] and a != "llm"]:
        rows.append(_row(arm, discovery["arms"][arm], discovery["date"]))
    return rows


def render_report() -> None:
    """Fill the measured tables of ``benchmarks/RESULTS.llm.md`` between its ``<!-- table:NAME -->`` markers."""
    import re

    path = ROOT / "benchmarks" / "RESULTS.llm.md"
    text = path.read_text()
    steps = json.loads((ROOT / "benchmarks" / "results" / "llm_planner.json").read_text())["versions"]
    step_rows = ["| version | CPU s / step, median [IQR] | wall s / step | prompt tokens | completion tokens | "
                 "shortlist rows | JSON-valid calls | valid first round | fallbacks | repairs / step | first option taken |",
                 "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for label, version in steps.items():
        m = version["summary"]
        first = "—" if m["share_first_option"] is None else f"{m['share_first_option']:.0%}"
        step_rows.append(
            f"| {label} | {m['cpu_s_per_step_median']:.1f} [{m['cpu_s_per_step_iqr'][0]:.1f}, {m['cpu_s_per_step_iqr'][1]:.1f}]"
            f" | {m['wall_s_per_step_median']:.1f} | {m['prompt_tokens_per_step_median']:.0f} | "
            f"{m['completion_tokens_per_step_median']:.0f} | {m['shortlist_rows_median']:.0f} | {m['json_valid_rate']:.0%} | "
            f"{m['validity_first_round']:.0%} | {m['fallback_rate']:.0%} | {m['repair_rounds_per_step']:.2f} | {first} |")
    tables = {"steps": "\n".join(step_rows)}
    header = ["| arm | seeds | to top-1 %, median [IQR] | to top-5 %, median [IQR] | top-1 % hit rate | best at budget, "
              "median [IQR] | wall s / seed | report date (UTC) |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for dataset in DATASETS:
        if llm_runs(dataset):
            tables[dataset] = "\n".join(header + arm_rows(dataset))
    for name, table in tables.items():
        text, n = re.subn(rf"(<!-- table:{name} -->\n)(?:(?!<!-- /table -->).*\n)*(<!-- /table -->)",
                          lambda m: m.group(1) + table + "\n" + m.group(2), text)
        if n != 1:
            raise SystemExit(f"RESULTS.llm.md has no <!-- table:{name} --> … <!-- /table --> block")
    path.write_text(text)
    print(f"rendered {', '.join(tables)} into {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=5, help="proposals per planning step (the cells' batch)")
    parser.add_argument("--model", default=None, help="provider:model or .gguf; default the embedded model")
    parser.add_argument("--label", default="current", help="a name for this code version in the output")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "llm_planner.json")
    parser.add_argument("--report", action="store_true", help="only re-render benchmarks/RESULTS.llm.md")
    args = parser.parse_args()
    if args.report:
        render_report()
        return

    llm, bo = LLMPlanner(model=args.model), BOPlanner()
    problems = {dataset: bench_problem(dataset) for dataset in DATASETS}
    cpu = time.process_time()
    measure_step(llm, planning_context(problems["esol"], n_observed=10, seed=99), args.n)  # loads the model
    warmup_cpu_s = time.process_time() - cpu

    rows = []
    for dataset, problem in problems.items():
        for k, n_observed in enumerate(HISTORY_SIZES):
            context = planning_context(problem, n_observed=n_observed, seed=k)
            start = time.process_time()
            bo.propose(context, args.n)
            bo_cpu_s = time.process_time() - start
            row = {"dataset": dataset, **measure_step(llm, context, args.n), "bo_cpu_s": bo_cpu_s}
            rows.append(row)
            print(json.dumps({key: value for key, value in row.items() if key != "choice_rank"}), flush=True)
    summary = {"model": args.model or "embedded SmolLM2-135M-Instruct Q4_1 (llama.cpp, 1 thread)", "n": args.n,
               **summarise(rows, args.n),
               "bo_cpu_s_per_step_median": float(np.median([r["bo_cpu_s"] for r in rows])),
               "warmup_cpu_s": warmup_cpu_s,
               "by_dataset": {d: summarise([r for r in rows if r["dataset"] == d], args.n) for d in DATASETS}}
    print(json.dumps(summary, indent=2))
    out = json.loads(args.out.read_text()) if args.out.exists() else {}
    if "versions" not in out:
        out = {"versions": {}}
    out["versions"][args.label] = {"summary": summary, "rows": rows, "date": time.strftime("%Y-%m-%d %H:%M"),
                                   "machine": {"cpu": platform.processor() or platform.machine(),
                                               "load_avg_1m": __import__("os").getloadavg()[0]}}
    args.out.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
