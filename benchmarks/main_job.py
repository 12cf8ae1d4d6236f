"""The README's main job, measured as it ships: ``closedloop run SPEC --seed S --json`` over seeds.

Each seed is the command line a user runs (the CLI in a subprocess, its own SQLite ledger), so the numbers are
``closedloop run``'s. Per seed: whether the target was hit, lab experiments used (the spec stops at the first hit), the main arm against
its control (``acceleration``, ``main_beats_control``), and the llm arm's statistics (``planner_stats.llm``).

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.main_job                       # FreeSolv, seeds 0-11
    .venv/bin/python -m benchmarks.main_job --planner bo --control-share 0 --seeds 0-5
    .venv/bin/python -m benchmarks.main_job --render                                # the table from the JSON

Writes ``benchmarks/results/main_job[_<tag>].json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SPEC = ROOT / "campaigns" / "freesolv" / "campaign.toml"


def _seeds(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        out += list(range(int(first), int(last or first) + 1))
    return out


def run_seed(spec: Path, seed: int, extra: list[str]) -> dict:
    closedloop = Path(sys.executable).with_name("closedloop")
    with tempfile.TemporaryDirectory(prefix="closedloop-main-job-") as workdir:
        command = [str(closedloop), "run", str(spec), "--seed", str(seed), "--json", "--db", f"{workdir}/run.db", *extra]
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        wall_s = time.perf_counter() - start
        rows = _lab_rows(Path(workdir) / "run.db") if done.returncode == 0 else []
    if done.returncode != 0:
        return {"seed": seed, "error": done.stderr.strip().splitlines()[-1:] or ["exit " + str(done.returncode)],
                "wall_s": wall_s}
    summary = json.loads(done.stdout)
    return {"seed": seed, "wall_s": wall_s, "n_lab": summary["n_lab"], "n_hits": summary["n_hits"],
            "is_hit": summary["n_hits"] > 0, "stop_reason": summary.get("stop_reason"),
            "best_value": (summary.get("best") or {}).get("value"), "best_arm": (summary.get("best") or {}).get("arm"),
            "measured": summary.get("measured"),
            "acceleration": summary.get("acceleration"), "main_beats_control": summary.get("main_beats_control"),
            "paired_experiments": summary.get("paired_experiments"), "pairings": summary.get("pairings"),
            "best_level": summary.get("best_level"),
            "experiments_to_best_level": summary.get("experiments_to_best_level"),
            "arms": summary.get("arms"), "planner_stats": summary.get("planner_stats"),
            "compute_s": summary.get("compute_s"), "command": " ".join(command[1:4] + command[5:6] + extra),
            "lab_rows": rows}


def _lab_rows(db: Path) -> list[list]:
    """Every lab job of the run as [candidate id, arm, iteration, dispatched seq, value], in dispatch order, so a
    comparison can be recomputed from the JSON without re-running the campaign."""
    from orchestrator.ledger import Ledger

    ledger = Ledger.open(str(db))
    try:
        (campaign_id,) = [c.id for c in ledger.campaigns()]
        jobs = sorted(ledger.lab_jobs(campaign_id), key=lambda j: j.dispatched_seq)
        return [[j.candidate_id, j.arm, j.iteration, j.dispatched_seq, j.value] for j in jobs]
    finally:
        ledger.close()


def render(report: dict) -> str:
    rows = report["runs"]
    ok = [r for r in rows if "error" not in r]
    lines = [f"{report['spec']} {' '.join(report['extra'])} (commit {report['code_commit']}, {report['date']})", "",
             "| seed | hit | lab experiments | best value (arm) | paired (pairings) | acceleration | main beats control | "
             "llm fallback share | llm differs from bo | llm lab picks bo would not make |",
             "| ---: | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['seed']} | error: {r['error'][0]} | | | | | | | | |")
            continue
        stats = r.get("planner_stats") or {}
        llm = next((v for v in stats.values() if v), {})  # the model-backed arm that ran (llm or llm-shuffled)
        best_arm = f" ({r['best_arm']})" if r.get("best_arm") else ""
        lines.append(f"| {r['seed']} | {'yes' if r['is_hit'] else 'no'} | {r['n_lab']} | {r['best_value']:.3g}{best_arm} | "
                     f"{_fmt(r.get('paired_experiments'))}{_pairings(r)} | {_fmt(r['acceleration'])} | {_fmt(r['main_beats_control'])} | "
                     f"{_fmt(llm.get('fallback_share'))} | {_fmt(llm.get('differs_from_bo_share'))} | "
                     f"{llm.get('n_lab_differs_from_bo', '—')} of {llm.get('n_lab', '—')} |")
    accelerations = [r["acceleration"] for r in ok if r.get("acceleration") is not None]
    compared = [r for r in ok if r.get("main_beats_control") is not None]
    lines += ["", f"hits: {sum(r['is_hit'] for r in ok)} of {len(rows)} seeds; median lab experiments "
                  f"{np.median([r['n_lab'] for r in ok]) if ok else float('nan'):.3g}; main arm not behind its control "
                  f"on {sum(bool(r['main_beats_control']) for r in compared)} of {len(compared)} seeds; median "
                  f"acceleration {np.median(accelerations) if accelerations else float('nan'):.3g} over "
                  f"{len(accelerations)} seeds"]
    return "\n".join(lines)


def _pairings(run: dict) -> str:
    """" (n)": the pairings the acceleration averages over; none in results from before they were averaged."""
    return f" ({run['pairings']})" if run.get("pairings") else ""


def _fmt(value) -> str:
    if value is None:
        return "—"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", type=Path, default=DEFAULT_SPEC)
    parser.add_argument("--seeds", default="0-11", help="e.g. 0-11 or 0,3,5")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tag", default="", help="suffix of the results file")
    parser.add_argument("--render", action="store_true", help="print the table of an existing results file")
    args, extra = parser.parse_known_args(argv)
    out = ROOT / "benchmarks" / "results" / f"main_job{'_' + args.tag if args.tag else ''}.json"
    if args.render:
        print(render(json.loads(out.read_text())))
        return
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    start = time.perf_counter()
    report = {"spec": str(args.spec.relative_to(ROOT) if args.spec.is_relative_to(ROOT) else args.spec),
              "extra": extra, "seeds": _seeds(args.seeds), "code_commit": commit or "unknown",
              "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "machine": {"cpu": platform.processor() or platform.machine(), "n_cpu": os.cpu_count()}, "runs": []}
    out.parent.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=args.workers) as pool:  # the file is rewritten as each seed finishes
        for future in as_completed([pool.submit(run_seed, args.spec, s, extra) for s in _seeds(args.seeds)]):
            report["runs"] = sorted([*report["runs"], future.result()], key=lambda r: r["seed"])
            report["wall_s_total"] = time.perf_counter() - start
            out.write_text(json.dumps(report, indent=2) + "\n")
    print(render(report))
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    main()
