"""The unit-free ladder rules (issue 45) on the rung-quality sweep: bo at this commit against the stored sweep.

``orchestrator/policy/escalation.py`` and ``ladder_prior.py`` read a rung against the lab without assuming a slope
of 1 (any ``a * rung + b`` with ``a > 0`` gives the same decisions). This runs bo alone on every cell of
``benchmarks/rung_quality.py`` (each seed its own rung draw, the same draws as the stored sweep) and compares each
seed's lab experiments to a top-1 % candidate with the stored sweep's (``benchmarks/results/rung_quality.json``, made
with the slope-1 rules), as a paired geometric mean per cell.

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.unit_free_ladder --seeds 5 --workers 1

Writes ``benchmarks/results/unit_free_ladder.json`` (``--json``) and prints the table.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from benchmarks.rung_quality import PROBLEMS, run_cells, rung_models

RESULTS = Path(__file__).parent / "results"


def compare(seeds: int, workers: int) -> list[dict]:
    """One row per sweep cell: the stored and the new per-seed counts and their paired geometric mean (new / old)."""
    cells = [(p, m, q) for p in PROBLEMS for m, q in rung_models()]  # noise rows included
    out = run_cells(cells, seeds, workers, arms=("bo",))
    stored = json.loads((RESULTS / "rung_quality.json").read_text())
    old = {(c["problem"], c["model"], c["q"]): c["arms"]["bo"]["experiments_to_top1"]["per_seed"]
           for c in stored["cells"]}
    rows = []
    for cell in out:
        key = (cell["problem"], cell["model"], cell["q"])
        new = cell["arms"]["bo"]["experiments_to_top1"]["per_seed"]
        before = old[key][:seeds]
        ratio = math.exp(sum(math.log(a / b) for a, b in zip(new, before, strict=True)) / seeds)
        rows.append({"problem": key[0], "rung": key[1], "q": key[2], "stored": before, "now": new, "ratio": ratio})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--json", type=Path, default=RESULTS / "unit_free_ladder.json")
    args = parser.parse_args()
    rows = compare(args.seeds, args.workers)
    args.json.write_text(json.dumps(rows, indent=1) + "\n")
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"bo, unit-free rules over the stored sweep ({args.seeds} seeds)")
    for column in ("problem", "rung", "q", "stored", "now", "now / stored"):
        table.add_column(column)
    for r in rows:
        table.add_row(r["problem"], r["rung"], f"{r['q']:g}", str(r["stored"]), str(r["now"]), f"{r['ratio']:.3f}")
    Console().print(table)
    print(f"geometric mean over cells: {math.exp(sum(math.log(r['ratio']) for r in rows) / len(rows)):.3f}")


if __name__ == "__main__":
    main()
