"""Orchestration speed against issue 17's goal table: every row measured in one run, with the commit and the load.

Each row reuses an existing measurement, so the numbers mean what they mean in the benchmark that owns them:

1. **Loop overhead per iteration**, median ms (``scale.measure_loop``): the FreeSolv campaign with one table rung and
   the Buchwald–Hartwig campaign, bo against random. Subtracted: simulators, the lab twin's clock, surrogate fits,
   the arms' ``propose`` (GP posterior and log-EI, where an llm arm would call its model) and the screen's beliefs.
2. **Ledger appends** through ``append_many`` in batches of 50 (``scale.measure_ledger``), on SQLite and on a
   throwaway PostgreSQL started by ``tests/postgres.py`` (skipped, with the reason, when no server binaries exist).
3. **Exact replay and verify**: ``closedloop ledger verify CID --db DB`` and ``closedloop replay CID --db DB`` run as
   a user runs them (the console script in a subprocess), timed minus the median start-up of ``closedloop --help``,
   on the soak's ledger and on the FreeSolv campaign's; and ``verify`` in-process on the soak ledger.
4. **Soak** (``soak.run_soak``, in a fresh interpreter so that its RSS is its own): lab experiments per second and
   peak-RSS growth per 1,000 experiments after the first tenth; 1,000 experiments with ``--quick``, else 10,000.
5. **Events per lab experiment** of ``closedloop run campaigns/freesolv/campaign.toml --lab-budget 12 --planner bo``
   (the README's campaign with its llm main arm swapped for bo, so no model runs; the control arm stays random).
6. **10^6-row pools in live campaigns** (``streamed_pool.measure``): a conditions pool of 100 × 100 × 10 × 10
   reagent SMILES (Buchwald–Hartwig reagents and rdkit analogues) and a numeric design table, each run with
   ``closedloop run SPEC --json`` and the bo planner in a child process: its peak RSS, the first ``Dispatched``
   event's time after start, and the slowest later planning step (one dispatch round to the next).

Run from the repository root (``--quick``: a few minutes on the shared 2-core machine)::

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.orchestration --json out.json [--quick] [--markdown PATH]

Without ``--json`` the results go to ``benchmarks/results/orchestration[_quick].json``.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: python benchmarks/orchestration.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from collections import Counter  # noqa: E402
from collections.abc import Iterator, Sequence  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from dataclasses import asdict, dataclass  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from typing import Any, Literal  # noqa: E402

from benchmarks import (  # noqa: E402
    common,  # noqa: E402  (pins the thread variables before numpy loads)
    scale,
    soak,
)

NAME = "orchestration"
ROOT = common.BENCHMARKS_DIR.parent
FREESOLV_SPEC = ROOT / "campaigns" / "freesolv" / "campaign.toml"
PARTS = ("soak", "replay", "events", "loop", "ledger", "postgres", "pool")
#: The model-free version of the README's campaign: bo as the main arm; the spec's control becomes random.
FREESOLV_FLAGS = ("--lab-budget", "12", "--planner", "bo")
SETTINGS = {
    "quick": {"loop_lab_budget": 24, "soak_n": 1_000, "n_events": 4_000, "n_single": 500, "repeats": 1},
    "full": {"loop_lab_budget": 40, "soak_n": 10_000, "n_events": 20_000, "n_single": 500, "repeats": 3},
}
BATCH_SIZE = 50
SOAK_BATCH = 100


@dataclass
class Row:
    """One line of the goal table. ``measured`` is None when the row could not be measured (``note`` says why)."""

    key: str
    what: str
    unit: str
    goal: float | None
    comparison: Literal["<=", ">="]
    measured: float | None = None
    note: str = ""
    is_goal_applicable: bool = True
    """False when this run's size differs from the goal's (the 130k-event verify in a quick run)."""

    @property
    def is_met(self) -> bool | None:
        if self.measured is None or self.goal is None or not self.is_goal_applicable:
            return None
        return self.measured <= self.goal if self.comparison == "<=" else self.measured >= self.goal

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "is_met": self.is_met}


# ------------------------------------------------------------------------------------------------ helpers
def git_commit() -> dict[str, Any]:
    """The short commit of the checkout and the paths that differ from it (the numbers belong to both)."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
        return done.stdout.strip()

    changed = [line[3:] for line in git("status", "--porcelain").splitlines()]
    return {"commit": git("rev-parse", "--short", "HEAD") or "unknown", "branch": git("rev-parse", "--abbrev-ref", "HEAD"),
            "is_dirty": bool(changed), "changed_paths": changed[:50]}


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def closedloop_command() -> list[str]:
    """The console script a user runs, from this interpreter's environment."""
    script = Path(sys.executable).with_name("closedloop")
    if not script.is_file():
        raise SystemExit(f"{script} is missing; install the project into this environment: pip install -e .")
    return [str(script)]


def cli_env() -> dict[str, str]:
    """The environment of every ``closedloop`` subprocess: this checkout's code first, one BLAS thread."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}


def run_cli(args: Sequence[str], *, cwd: Path) -> tuple[subprocess.CompletedProcess, float]:
    """Run ``closedloop ARGS``; return the finished process and its wall seconds. A failure stops the benchmark."""
    command = [*closedloop_command(), *args]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=cli_env(), capture_output=True, text=True, check=False)
    wall_s = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"`closedloop {' '.join(args)}` exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done, wall_s


def startup_s(work: Path, repeats: int) -> dict[str, Any]:
    """Median wall seconds of ``closedloop --help``: interpreter start, the CLI's imports, nothing else."""
    walls = [run_cli(["--help"], cwd=work)[1] for _ in range(max(3, repeats))]
    return {"median_s": statistics.median(walls), "all_s": walls}


def time_cli_replay(db: Path, campaign_id: str, work: Path, repeats: int, startup: float) -> dict[str, Any]:
    """``closedloop ledger verify`` and ``closedloop replay`` (exact) on one ledger: wall, and events/s net of
    start-up."""
    out: dict[str, Any] = {"db": str(db), "campaign_id": campaign_id}
    for name, args in (("ledger_verify", ["ledger", "verify", campaign_id, "--db", str(db), "--json"]),
                       ("replay", ["replay", campaign_id, "--db", str(db), "--json"])):
        walls, n_events = [], None
        for _ in range(repeats):
            done, wall_s = run_cli(args, cwd=work)
            answer = json.loads(done.stdout)
            answer = answer[0] if isinstance(answer, list) else answer
            if not answer["identical"]:  # exit 0 already says so; this guards the parsing
                raise SystemExit(f"`closedloop {' '.join(args)}` says the ledger does not replay identically")
            walls.append(wall_s)
            n_events = answer["n_events"]
        wall = statistics.median(walls)
        net = max(wall - startup, 1e-9)
        out[name] = {"n_events": n_events, "wall_s_median": wall, "wall_s_all": walls, "net_s": net,
                     "events_per_s": n_events / net, "events_per_s_with_startup": n_events / wall}
    return out


# ------------------------------------------------------------------------------------------------ parts
def run_soak_child(n: int, db: Path) -> dict[str, Any]:
    """``soak.run_soak`` in a fresh interpreter, so that the peak RSS it reports is the soak's alone."""
    config = {"n": n, "batch": SOAK_BATCH, "db": str(db)}
    command = [sys.executable, "-m", "benchmarks.orchestration", "--child-soak", json.dumps(config)]
    done = subprocess.run(command, cwd=ROOT, env=cli_env(), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the soak failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def soak_child(config: dict[str, Any]) -> dict[str, Any]:
    result = soak.run_soak(config["n"], batch=config["batch"], db=config["db"])
    return {**result.as_dict(), "rss_slope_mb_per_1000": soak.rss_slope_mb_per_1000(result.progress)}


def run_freesolv(work: Path) -> dict[str, Any]:
    """``closedloop run`` of the README's FreeSolv campaign, model-free; the events it wrote, per lab experiment."""
    from orchestrator.ledger import Ledger

    db = work / "freesolv.db"
    done, wall_s = run_cli(["run", str(FREESOLV_SPEC), "--db", str(db), *FREESOLV_FLAGS, "--json"], cwd=work)
    summary = json.loads(done.stdout)
    campaign_id = summary["campaign_id"]
    ledger = Ledger.open(db)
    try:
        n_events = ledger.n_events(campaign_id)
        n_lab = ledger.campaign(campaign_id).n_lab
        by_type = Counter(event.type for event in ledger.events(campaign_id))
    finally:
        ledger.close()
    return {"db": str(db), "campaign_id": campaign_id, "wall_s": wall_s, "status": summary["status"],
            "stop_reason": summary.get("stop_reason"), "main_arm": summary.get("main_arm"),
            "control_arm": summary.get("control_arm"), "n_events": n_events, "n_lab": n_lab,
            "events_per_lab_experiment": n_events / n_lab if n_lab else None, "events_by_type": dict(by_type.most_common()),
            "command": " ".join(["closedloop run", str(FREESOLV_SPEC.relative_to(ROOT)), *FREESOLV_FLAGS])}


@contextmanager
def postgres_database() -> Iterator[tuple[str | None, str]]:
    """An empty database on tests/postgres.py's server, dropped afterwards; (None, why) when there is none."""
    try:
        import pytest

        from tests import postgres
    except ImportError as exc:
        yield None, f"tests/postgres.py cannot be imported: {exc}"
        return
    try:
        server = postgres.server_url()
        name = f"closedloop_bench_{uuid.uuid4().hex[:12]}"
        postgres._admin(server, f'CREATE DATABASE "{name}"')
    except pytest.skip.Exception as exc:  # the helper skips when there are no binaries or no driver
        yield None, str(exc.msg)
        return
    except subprocess.CalledProcessError as exc:
        yield None, f"the PostgreSQL server did not start: {(exc.stderr or b'').decode(errors='replace')[-500:]}"
        return
    try:
        yield postgres._with_database(server, name), ""
    finally:
        postgres._admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# ------------------------------------------------------------------------------------------------ the table
def goal_rows(results: dict[str, Any], settings: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    loop = results.get("loop")
    for name, label in (("freesolv_table_rung", "FreeSolv, table rung"), ("buchwald_hartwig", "Buchwald–Hartwig")):
        row = Row(f"loop_{name}", f"loop overhead per iteration, median ({label}, bo + random)", "ms", 50, "<=")
        if loop:
            s = loop[name]
            row.measured = s["overhead_s_ms"]["median"]
            row.note = (f"{s['n_iterations']} iterations of a {settings['loop_lab_budget']}-experiment campaign; IQR "
                        f"{s['overhead_s_ms']['iqr']:.0f} ms; median wall {s['wall_s_ms']['median']:.0f} ms before "
                        "subtracting")
        rows.append(row)
    for key, label, goal in (("ledger", "SQLite", 5000), ("postgres", "PostgreSQL", 2000)):
        row = Row(f"ledger_{key}", f"ledger appends on {label} (append_many, batches of {BATCH_SIZE})", "events/s",
                  goal, ">=")
        found = results.get(key)
        if found and "append_many" in found:
            row.measured = found["append_many"]["events_per_s"]
            row.note = (f"{found['n_events_batched']:,} events; single appends "
                        f"{found['append']['events_per_s']:,.0f}/s")
            if key == "postgres":
                row.note += "; test server: fsync=off, full_page_writes=off, 127.0.0.1"
        elif found:
            row.note = f"not measured: {found['skipped']}"
        rows.append(row)
    replay = results.get("replay")
    soak_result = results.get("soak")
    n_soak = soak_result["n_events"] if soak_result else None
    for key, label in (("ledger_verify", "closedloop ledger verify"), ("replay", "closedloop replay")):
        row = Row(f"cli_{key}_soak", f"`{label}` of the soak ledger", "events/s", 20000, ">=")
        if replay and "soak" in replay:
            r = replay["soak"][key]
            row.measured = r["events_per_s"]
            row.note = (f"{r['n_events']:,} events in {r['wall_s_median']:.1f} s, {replay['startup']['median_s']:.1f} s "
                        f"of it start-up")
        rows.append(row)
    row = Row("verify_in_process_soak", "verify in-process of the soak ledger", "events/s", 20000, ">=")
    if soak_result:
        row.measured = soak_result["n_events"] / soak_result["verify_s"]
        row.note = f"{n_soak:,} events in {soak_result['verify_s']:.1f} s"
    rows.append(row)
    row = Row("cli_verify_soak_seconds", "`closedloop ledger verify` of the 10,000-experiment soak ledger", "s", 10,
              "<=", is_goal_applicable=settings["soak_n"] == 10_000)
    if replay and "soak" in replay:
        row.measured = replay["soak"]["ledger_verify"]["wall_s_median"]
        if not row.is_goal_applicable:
            row.note = f"this run's soak has {settings['soak_n']:,} experiments ({n_soak:,} events); the goal is for 10,000"
    rows.append(row)
    # A 12-experiment campaign's ledger is verified in a few ms; the command's wall time is the interpreter and its
    # imports (sqlalchemy, sqlmodel, pydantic), so a rate says nothing about replay speed: the rate goal is judged on
    # the soak ledger above, and this row is shown as measured, start-up included.
    row = Row("cli_verify_freesolv", "`closedloop ledger verify` of the FreeSolv campaign", "events/s", 20000, ">=",
              is_goal_applicable=False)
    if replay and "freesolv" in replay:
        r = replay["freesolv"]["ledger_verify"]
        row.measured = r["events_per_s"]
        row.note = (f"{r['n_events']:,} events in {r['wall_s_median']:.2f} s, of which start-up "
                    f"{replay['startup']['median_s']:.2f} s and imports the rest; start-up bound, so the rate goal "
                    "is judged on the soak ledger")
    rows.append(row)
    row = Row("soak_experiments_per_s", "soak: lab experiments per second (plates of 100)", "experiments/s", 100, ">=")
    row_rss = Row("soak_rss_growth", "soak: peak-RSS growth after the first tenth", "MB per 1,000", 1, "<=")
    if soak_result:
        row.measured = soak_result["experiments_per_s"]
        row.note = (f"{soak_result['n_experiments']:,} experiments in {soak_result['wall_s']:.0f} s, "
                    f"{soak_result['events_per_s']:,.0f} events/s, {soak_result['status']}")
        row_rss.measured = soak_result["rss_slope_mb_per_1000"]
        row_rss.note = f"peak RSS {soak_result['peak_rss_mb']:.0f} MB (fresh interpreter)"
    rows += [row, row_rss]
    row = Row("events_per_lab_experiment", "events written per lab experiment (FreeSolv, `closedloop run`)",
              "events/experiment", 20, "<=")
    events = results.get("events")
    if events:
        row.measured = events["events_per_lab_experiment"]
        top = ", ".join(f"{t} {n}" for t, n in list(events["events_by_type"].items())[:4])
        row.note = f"{events['n_events']:,} events for {events['n_lab']} lab experiments ({top}, …)"
    rows.append(row)
    pool = results.get("pool")
    for case, label in (("conditions", "10^6-row SMILES conditions pool"), ("design_table", "10^6-row design table")):
        measured = (pool or {}).get(case)
        for key, what, unit, goal in (("peak_rss_mb", "peak RSS", "MB", 1024),
                                      ("first_dispatch_s", "first batch dispatched", "s", 60),
                                      ("later_step_s", "slowest later planning step", "s", 30)):
            row = Row(f"pool_{case}_{key}", f"{label}, bo, `closedloop run`: {what}", unit, goal, "<=")
            if measured:
                row.measured = measured[key]
                if key == "later_step_s":
                    row.note = (f"steps {measured['later_steps_s']} s; {measured['n_lab']} lab experiments, "
                                f"{measured['pool']['n_rows']:,} rows, features {measured['features']!r}")
            rows.append(row)
    for row in rows:
        if row.measured is None and not row.note:
            row.note = "not measured in this run (--skip)"
    return rows


def fmt_measured(row: Row) -> str:
    if row.measured is None:
        return "not measured"
    value = row.measured
    if row.unit in ("events/s", "experiments/s"):
        return f"{value:,.0f} {row.unit}" if value >= 10 else f"{value:.1f} {row.unit}"
    if row.unit in ("s", "ms", "events/experiment"):
        return f"{value:,.1f} {row.unit}"
    return f"{value:,.2f} {row.unit}"


def fmt_goal(row: Row) -> str:
    if row.goal is None:
        return "see the issue"
    sign = "≤" if row.comparison == "<=" else "≥"
    return f"{sign} {row.goal:,g} {row.unit}"


def fmt_met(row: Row) -> str:
    if row.is_met is None:
        return "—" if row.measured is None else "n/a"
    return "yes" if row.is_met else "no"


def print_rows(rows: list[Row], header: str) -> None:
    common.print_table(f"issue 17 goals: {header}", ["what", "measured", "goal", "met?"],
                       [(r.what, fmt_measured(r), fmt_goal(r), fmt_met(r)) for r in rows])
    for r in rows:
        if r.note:
            common.console.print(f"[dim]- {r.what}: {r.note}[/dim]")


def markdown(rows: list[Row], header: str, command: str) -> str:
    lines = ["## Orchestration speed against issue 17's goals", "",
             f"`{command}`; {header}.", "",
             "| what | measured | goal | met? | note |", "|---|---:|---|---|---|"]
    lines += [f"| {r.what} | {fmt_measured(r)} | {fmt_goal(r)} | {fmt_met(r)} | {r.note} |" for r in rows]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------ main
def measure(work: Path, settings: dict[str, Any], skip: set[str]) -> dict[str, Any]:
    """Every part not in ``skip``, each with the 1/5/15-minute load before and after it."""
    results: dict[str, Any] = {}
    loads: dict[str, Any] = {}

    def part(name: str) -> bool:
        if name in skip:
            return False
        common.console.print(f"[bold]{name}[/bold] (load {load()}) …")
        loads[name] = {"before": load()}
        return True

    def done(name: str) -> None:
        loads[name]["after"] = load()

    if part("soak"):
        results["soak"] = run_soak_child(settings["soak_n"], work / "soak.db")
        done("soak")
    if part("events"):
        results["events"] = run_freesolv(work)
        done("events")
    if part("replay"):
        replay: dict[str, Any] = {"startup": startup_s(work, settings["repeats"])}
        startup = replay["startup"]["median_s"]
        if "soak" in results:
            replay["soak"] = time_cli_replay(work / "soak.db", "soak", work, settings["repeats"], startup)
        if "events" in results:
            replay["freesolv"] = time_cli_replay(Path(results["events"]["db"]), results["events"]["campaign_id"], work,
                                                 settings["repeats"], startup)
        results["replay"] = replay
        done("replay")
    if part("loop"):
        results["loop"] = scale.measure_loop(work, settings["loop_lab_budget"])
        done("loop")
    if part("ledger"):
        results["ledger"] = scale.measure_ledger(work, settings["n_events"], BATCH_SIZE, settings["n_single"])
        done("ledger")
    if part("postgres"):
        with postgres_database() as (url, why):
            if url is None:
                results["postgres"] = {"skipped": why}
            else:
                results["postgres"] = scale.measure_ledger(work, settings["n_events"], BATCH_SIZE, settings["n_single"],
                                                           db=url)
        done("postgres")
    if part("pool"):
        from benchmarks import streamed_pool

        results["pool"] = streamed_pool.measure(work, n_rows=settings.get("pool_rows", 1_000_000),
                                                env=cli_env(), command=closedloop_command())
        done("pool")
    results["load_by_part"] = loads
    return results


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=None,
                        help="results file (default benchmarks/results/orchestration[_quick].json)")
    parser.add_argument("--quick", action="store_true",
                        help="a soak of 1,000 experiments, loops of 24, one repeat of each command")
    parser.add_argument("--markdown", type=Path, default=None, help="also write the table as a Markdown section")
    parser.add_argument("--skip", nargs="*", default=[], choices=PARTS, help="parts to leave out")
    parser.add_argument("--child-soak", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_soak:
        print(json.dumps(common.clean_nan(soak_child(json.loads(args.child_soak)))))
        return
    mode = "quick" if args.quick else "full"
    settings = SETTINGS[mode]
    provenance = git_commit()
    load_start = load()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="orchestration-") as tmp:
        results = measure(Path(tmp), settings, set(args.skip))
    run_s = time.perf_counter() - started
    load_end = load()
    rows = goal_rows(results, settings)
    dirty = " (with uncommitted changes)" if provenance["is_dirty"] else ""
    header = (f"commit {provenance['commit']}{dirty}, {datetime.now(UTC):%Y-%m-%d}, {mode} run of {run_s / 60:.1f} min, "
              f"load {load_start[0]:.1f} → {load_end[0]:.1f} on {os.cpu_count()} shared cores")
    print_rows(rows, header)
    command = " ".join(["python -m benchmarks.orchestration", *(argv if argv is not None else sys.argv[1:])])
    path = args.json or common.RESULTS_DIR / f"{NAME}{'_quick' if args.quick else ''}.json"
    common.write_results(NAME, {"mode": mode, "settings": settings, **provenance, "run_s": run_s,
                                "load_average_start": load_start, "load_average_end": load_end,
                                "rows": [r.as_dict() for r in rows], "results": results}, path=path)
    if args.markdown is not None:
        args.markdown.write_text(markdown(rows, header, command))
        common.console.print(f"[dim]wrote {args.markdown}[/dim]")


if __name__ == "__main__":
    main()
