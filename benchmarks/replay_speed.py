"""Replay speed of the ledger: rebuilding projections, verify, JSONL export and import, and report generation.

On one finished campaign of a few hundred events (by default a Buchwald–Hartwig campaign on the simulated lab,
run first in a temporary directory; ``--db``/``--campaign-id`` measure an existing ledger instead), it measures:

- ``rebuild_projections``: events folded per second into a fresh in-memory ledger (median of ``--repeats``);
- ``verify``: the rebuild plus the comparison with the stored projections;
- ``export_jsonl``: events written per second;
- ``import_jsonl``: events per second into a fresh SQLite file (validation plus one transaction), and a re-import of
  the same file (a no-op);
- ``write_report``: seconds for the whole report in this warmed-up process (median), the Gantt's simulated-lab
  replay on its own, and once in a fresh interpreter (imports included: what ``closedloop report`` costs).

Run from the repository root::

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.replay_speed [--lab-budget 40] [--repeats 5]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: python benchmarks/replay_speed.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from typing import Any  # noqa: E402

from benchmarks import common  # noqa: E402  (pins the thread variables before numpy loads)

NAME = "replay_speed"
ROOT = Path(__file__).resolve().parents[1]
BUCHWALD_SPEC = ROOT / "campaigns" / "buchwald_hartwig" / "campaign.toml"


def run_campaign(db: Path, lab_budget: int) -> tuple[str, float]:
    """Run the Buchwald–Hartwig campaign to its lab budget; return its id and the wall seconds it took."""
    from orchestrator.loop.campaign import Campaign
    from orchestrator.spec import load_spec

    spec = load_spec(BUCHWALD_SPEC).with_overrides(lab_budget=lab_budget)
    with common.Stopwatch.run() as watch, Campaign.start(spec, db=db, campaign_id="bench-replay") as campaign:
        campaign.run()
    return "bench-replay", watch.wall_s


def measure(function: Callable[[int], Any], repeats: int) -> dict[str, Any]:
    """Wall and CPU seconds of ``function(i)`` over ``repeats`` runs: median, min and all."""
    walls, cpus = [], []
    for index in range(repeats):
        _, watch = common.timed(lambda index=index: function(index))
        walls.append(watch.wall_s)
        cpus.append(watch.cpu_s)
    return {"wall_s_median": statistics.median(walls), "wall_s_min": min(walls),
            "cpu_s_median": statistics.median(cpus), "wall_s_all": walls}


def cold_report_s(db: Path, campaign_id: str, out: Path) -> float:
    """Wall seconds of ``write_report`` in a fresh interpreter, start-up and imports included."""
    code = ("from orchestrator.ledger import Ledger; from orchestrator.replay.report import write_report; "
            f"write_report(Ledger.open({str(db)!r}), {campaign_id!r}, {str(out)!r})")
    with common.Stopwatch.run() as watch:
        subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
    return watch.wall_s


def run(db: Path, campaign_id: str, work: Path, repeats: int) -> dict[str, Any]:
    from orchestrator.ledger import Ledger, rebuild_projections, verify
    from orchestrator.ledger.jsonl import export_jsonl, import_jsonl
    from orchestrator.replay.report import station_gantt, write_report
    from orchestrator.spec import validate_spec

    ledger = Ledger.open(db)
    n_events = len(ledger.events(campaign_id))
    jsonl = work / "campaign.jsonl"
    results: dict[str, Any] = {"n_events": n_events}

    results["rebuild_projections"] = measure(lambda _: rebuild_projections(ledger, campaign_id).close(), repeats)
    results["verify"] = measure(lambda _: verify(ledger, campaign_id), repeats)
    results["export_jsonl"] = measure(lambda _: export_jsonl(ledger, campaign_id, jsonl), repeats)
    results["jsonl_bytes"] = jsonl.stat().st_size

    def import_fresh(index: int) -> None:
        target = Ledger.open(work / f"import-{index}.db")
        import_jsonl(jsonl, target)
        target.close()

    results["import_jsonl"] = measure(import_fresh, repeats)
    target = Ledger.open(work / "import-0.db")
    results["reimport_noop"] = measure(lambda _: import_jsonl(jsonl, target), repeats)
    assert verify(target, campaign_id).is_identical, "the imported campaign does not replay identically"
    target.close()

    spec = validate_spec(ledger.events(campaign_id, types=["CampaignStarted"])[0].payload["spec"])
    results["report_cold_s"] = cold_report_s(db, campaign_id, work / "report-cold")
    write_report(ledger, campaign_id, work / "report-warmup")  # imports and matplotlib's font cache
    results["write_report"] = measure(lambda i: write_report(ledger, campaign_id, work / f"report-{i}"), repeats)
    results["gantt_replay"] = measure(lambda _: station_gantt(ledger, campaign_id, spec), repeats)
    for name in ("rebuild_projections", "verify", "export_jsonl", "import_jsonl", "reimport_noop"):
        results[name]["events_per_s"] = n_events / results[name]["wall_s_median"]
        results[name]["events_per_cpu_s"] = n_events / results[name]["cpu_s_median"]
    ledger.close()
    return results


def report(results: dict[str, Any], setup: dict[str, Any]) -> None:
    n = results["n_events"]
    rows = [
        (name, n, results[name]["events_per_s"], results[name]["events_per_cpu_s"],
         results[name]["wall_s_median"] * 1e3, results[name]["wall_s_min"] * 1e3, results[name]["cpu_s_median"] * 1e3)
        for name in ("rebuild_projections", "verify", "export_jsonl", "import_jsonl", "reimport_noop")
    ]
    common.print_table(
        f"ledger replay on {n} events ({setup['source']})",
        ["operation", "events", "events/s", "events/cpu s", "median ms", "min ms", "cpu ms"],
        rows,
        caption="median of the repeats (events/s on wall time; events/cpu s on this process's CPU time, which a "
                "busy machine disturbs less); import is into a fresh SQLite file: validation and one transaction",
    )
    common.print_table(
        "report generation",
        ["what", "median s", "min s"],
        [
            ("write_report (warm process)", *(results["write_report"][k] for k in ("wall_s_median", "wall_s_min"))),
            ("  of which the Gantt lab replay", *(results["gantt_replay"][k] for k in ("wall_s_median", "wall_s_min"))),
            ("write_report (fresh interpreter, once)", results["report_cold_s"], results["report_cold_s"]),
        ],
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lab-budget", type=int, default=40, help="lab experiments of the campaign run (default 40)")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats per operation (default 5)")
    parser.add_argument("--db", type=Path, help="measure an existing ledger instead of running a campaign")
    parser.add_argument("--campaign-id", help="the campaign in --db to measure")
    args = parser.parse_args(argv)
    if (args.db is None) != (args.campaign_id is None):
        parser.error("--db and --campaign-id go together")
    with tempfile.TemporaryDirectory(prefix="replay-speed-") as tmp:
        work = Path(tmp)
        if args.db is None:
            db = work / "campaign.db"
            common.console.print(f"running the Buchwald–Hartwig campaign to {args.lab_budget} lab experiments …")
            campaign_id, campaign_s = run_campaign(db, args.lab_budget)
            setup = {"source": f"Buchwald–Hartwig, {args.lab_budget} lab experiments", "campaign_run_s": campaign_s}
        else:
            db, campaign_id = args.db.resolve(), args.campaign_id
            setup = {"source": f"{campaign_id} in {db}", "campaign_run_s": None}
        results = run(db, campaign_id, work, args.repeats)
    setup["load_average_1_5_15"] = [round(x, 2) for x in os.getloadavg()]
    report(results, setup)
    parameters = vars(args) | {"db": str(args.db) if args.db else None}
    common.write_results(NAME, {"parameters": parameters, "setup": setup, "results": results})


if __name__ == "__main__":
    main()
