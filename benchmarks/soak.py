"""Soak: one simulated campaign of many lab experiments (default 10,000), to completion, with its memory watched.

The campaign is a high-throughput plate lab: a conditions pool (a grid of four parameters, ``1.25 x N`` points, with a
smooth ground truth plus noise), the random planner without a control arm, no simulator ladder, auto-approval, and a
simulated lab with ``--batch`` slots per station that takes a whole plate at a time (``lab.wait = "all"``). Every node
of the loop runs for every plate: plan, validate, screen, approve, dispatch, observe, recover, reward, learn, decide,
each appending to the ledger (SQLite by default, ``--db postgresql://…`` for PostgreSQL) and checkpointing through
LangGraph.

Reported: wall time, lab experiments and ledger events per second, the resident set size at every tenth of the run,
the peak RSS, and whether ``verify`` (the projections rebuilt from the events) agrees at the end. Memory is bounded
if RSS stops growing with the experiment count; the table shows it per tenth.

Run from the repository root::

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.soak [--n 10000] [--batch 100] [--db PATH_OR_URL] \
        [--markdown benchmarks/RESULTS.soak.md]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: python benchmarks/soak.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse  # noqa: E402
import itertools  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from typing import Any  # noqa: E402

from benchmarks import common  # noqa: E402  (pins the thread variables before numpy loads)
from benchmarks.memory import peak_rss_mb, rss_mb  # noqa: E402

__all__ = ["SoakResult", "rss_mb", "run_soak", "soak_spec"]


def _write_pool(directory: Path, n_points: int) -> Path:
    import numpy as np

    side = max(2, int(np.ceil(n_points ** 0.25)))
    grid = np.asarray(list(itertools.product(range(side), repeat=4)), dtype=float)[:n_points]
    rng = np.random.default_rng(0)
    y = np.sin(grid[:, 0] / 3) + np.cos(grid[:, 1] / 4) + grid[:, 2] / side - (grid[:, 3] / side - 0.5) ** 2
    y = y + rng.normal(0.0, 0.05, len(grid))
    path = directory / "plate_pool.csv"
    with path.open("w") as handle:
        handle.write("a,b,c,d,y\n")
        for row, value in zip(grid, y, strict=True):
            handle.write(",".join(f"{v:g}" for v in row) + f",{value:.6f}\n")
    return path


def soak_spec(n_experiments: int, batch: int, directory: Path):
    """The soak campaign's spec, with its pool written to ``directory``."""
    from orchestrator.spec import validate_spec

    pool = _write_pool(directory, int(n_experiments * 1.25) + batch)
    return validate_spec({
        "campaign": {"name": "soak", "kind": "conditions", "seed": 0},
        "objective": {"property": "y", "direction": "maximize"},
        "space": {"pool": str(pool), "columns": ["a", "b", "c", "d"]},
        "lab": {"driver": "simlab", "oracle_column": "y", "noise_sd": 0.05, "wait": "all", "max_pending": batch,
                "parameters": {"stations": {"synthesis": batch, "workup": batch, "characterisation": batch},
                               "transfer_s": 0.0}},
        "budget": {"lab_experiments": n_experiments},
        "planner": {"main": "random", "control": None, "control_share": 0.0, "batch_size": batch},
        "approval": {"policy": "auto", "max_auto_jobs": batch},
        "stop": {"on_target": False},
    }, source="benchmarks/soak.py")


@dataclass
class SoakResult:
    n_experiments: int
    batch: int
    db: str
    wall_s: float = 0.0
    n_events: int = 0
    n_steps: int = 0
    peak_rss_mb: float = 0.0
    is_verified: bool = False
    verify_s: float = 0.0
    status: str = ""
    progress: list[dict[str, float]] = field(default_factory=list)
    """Per tenth of the run: lab experiments done, seconds, RSS and peak RSS (MB), events."""

    @property
    def experiments_per_s(self) -> float:
        return self.n_experiments / self.wall_s if self.wall_s else float("nan")

    @property
    def events_per_s(self) -> float:
        return self.n_events / self.wall_s if self.wall_s else float("nan")

    def as_dict(self) -> dict[str, Any]:
        return {"n_experiments": self.n_experiments, "batch": self.batch, "db": self.db, "status": self.status,
                "wall_s": self.wall_s, "n_events": self.n_events, "n_steps": self.n_steps,
                "experiments_per_s": self.experiments_per_s, "events_per_s": self.events_per_s,
                "peak_rss_mb": self.peak_rss_mb, "is_verified": self.is_verified, "verify_s": self.verify_s,
                "progress": self.progress}


def run_soak(n_experiments: int, *, batch: int = 100, db: str | None = None, n_marks: int = 10) -> SoakResult:
    """Run the soak campaign; ``db`` defaults to a SQLite file in a temporary directory."""
    from orchestrator.ledger import verify
    from orchestrator.loop.campaign import Campaign

    with tempfile.TemporaryDirectory(prefix="closedloop-soak-") as tmp:
        directory = Path(tmp)
        spec = soak_spec(n_experiments, batch, directory)
        target = db or str(directory / "soak.db")
        from orchestrator.ledger import safe_url

        result = SoakResult(n_experiments, batch, safe_url(target))
        marks = [n_experiments * (k + 1) / n_marks for k in range(n_marks)]
        started = time.perf_counter()
        with Campaign.start(spec, db=target, campaign_id="soak") as campaign:
            ledger = campaign.ledger

            def on_step(node: str, _update: dict) -> None:
                result.n_steps += 1
                if node != "observe" or not marks:
                    return
                n_lab = ledger.campaign("soak").n_lab
                while marks and n_lab >= marks[0]:
                    marks.pop(0)
                    result.progress.append({"n_lab": n_lab, "s": time.perf_counter() - started, "rss_mb": rss_mb(),
                                            "peak_rss_mb": peak_rss_mb(), "n_events": ledger.n_events("soak")})

            summary = campaign.run(on_step=on_step)
            result.wall_s = time.perf_counter() - started
            result.status = summary["status"]
            result.n_events = ledger.n_events("soak")
            result.peak_rss_mb = peak_rss_mb()
            t = time.perf_counter()
            result.is_verified = verify(ledger, "soak").is_identical
            result.verify_s = time.perf_counter() - t
    return result


def rss_slope_mb_per_1000(progress: list[dict[str, float]]) -> float:
    """Least-squares growth of peak RSS per 1,000 lab experiments over the run's second to last tenth, MB.

    The first tenth is left out: it holds the one-off start-up (imports, the pool, the first fit).
    """
    import numpy as np

    points = progress[1:] if len(progress) > 2 else progress
    if len(points) < 2:
        return float("nan")
    x = np.asarray([p["n_lab"] for p in points], dtype=float)
    y = np.asarray([p["peak_rss_mb"] for p in points], dtype=float)
    return float(np.polyfit(x, y, 1)[0] * 1000)


def markdown(result: SoakResult, command: str) -> str:
    """The soak as a Markdown section (``benchmarks/RESULTS.soak.md``)."""
    slope = rss_slope_mb_per_1000(result.progress)
    rows = "\n".join(f"| {int(p['n_lab']):,} | {p['s']:.0f} | {int(p['n_events']):,} | {p['rss_mb']:.0f} | "
                     f"{p['peak_rss_mb']:.0f} |" for p in result.progress)
    return f"""# Soak: {result.n_experiments:,} lab experiments in one campaign

Regenerate with `{command}` (measured {time.strftime('%Y-%m-%d', time.gmtime())} on the shared 2-core machine).
A conditions pool of {int(result.n_experiments * 1.25) + result.batch:,} points, the random planner, plates of
{result.batch} experiments on the simulated lab, every node of the loop per plate, the ledger on {result.db.split('/')[-1]}
and LangGraph's checkpointer.

| lab experiments | seconds | ledger events | RSS MB | peak RSS MB |
|---:|---:|---:|---:|---:|
{rows}

**{result.status}** after {result.wall_s:.0f} s: {result.experiments_per_s:.1f} experiments/s,
{result.events_per_s:.0f} events/s, {result.n_events:,} events. Peak RSS {result.peak_rss_mb:.0f} MB, growing
{slope:.1f} MB per 1,000 lab experiments after the first tenth. `verify` (every projection rebuilt from the events)
{'agrees' if result.is_verified else 'DISAGREES'} ({result.verify_s:.0f} s).
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000, help="lab experiments")
    parser.add_argument("--batch", type=int, default=100, help="plate size: experiments per iteration")
    parser.add_argument("--db", default=None, help="ledger (default: a SQLite file in a temporary directory)")
    parser.add_argument("--markdown", type=Path, default=None,
                        help="also write the table as Markdown (e.g. benchmarks/RESULTS.soak.md)")
    args = parser.parse_args(argv)
    result = run_soak(args.n, batch=args.batch, db=args.db)
    common.print_table(
        f"soak: {args.n} lab experiments, plates of {args.batch}, {result.db}",
        ["experiments", "seconds", "events", "RSS MB", "peak RSS MB"],
        [[int(p["n_lab"]), common.fmt(p["s"]), int(p["n_events"]), common.fmt(p["rss_mb"]),
          common.fmt(p["peak_rss_mb"])] for p in result.progress],
        caption=(f"{result.status}; {result.experiments_per_s:.2f} experiments/s, {result.events_per_s:.0f} events/s, "
                 f"peak RSS {result.peak_rss_mb:.0f} MB; verify {'ok' if result.is_verified else 'FAILED'} "
                 f"in {result.verify_s:.1f} s"),
    )
    common.write_results("soak", {**result.as_dict(), "rss_slope_mb_per_1000": rss_slope_mb_per_1000(result.progress)})
    if args.markdown is not None:
        command = "OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.soak " + " ".join(argv or sys.argv[1:])
        args.markdown.write_text(markdown(result, command))
        common.console.print(f"[dim]wrote {args.markdown}[/dim]")


if __name__ == "__main__":
    main()
