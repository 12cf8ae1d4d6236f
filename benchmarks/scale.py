"""Orchestration speed and scale: loop overhead, ledger writes, replay, reports, and pools from 10^3 to 10^6.

Four measurements (issue 8, item 5; the report time is also issue 7's):

- **Loop overhead per iteration.** Two campaigns on the simulated lab with the bo (main) and random (control) arms,
  so no language model runs: FreeSolv with one ``table`` rung (the GAFF column, run in-process) and the
  Buchwald–Hartwig conditions pool without a ladder. An iteration is one pass plan → … → decide, timed between
  the graph's node updates (``Campaign.run(on_step=…)``), so LangGraph's own work and its SQLite checkpoint writes
  are included. Wrapped and subtracted: the simulators (``run_rung``), the SimLab's clock advancing to the next
  completion (``run_until_any_complete``), the surrogate fit (``campaign_surrogate_state``; choosing its ladder
  prior stays in the overhead), the arms' ``propose`` (GP posterior and log-EI over the whole pool) and the fused
  beliefs of the screen node (``lab_beliefs``). What is left is the orchestration: ledger reads and writes,
  projections, rubric scoring, escalation bookkeeping, the SimLab's submit/status/result calls and the checkpoints.
- **Ledger writes** on a SQLite file (WAL): events per second through ``append_many`` in batches and through
  single ``append`` calls (one transaction each). Each event is a ``Proposed`` or a ``Simulated`` of a FreeSolv
  molecule, so every write also updates the projections.
- **Replay**: events per second through ``verify`` (fold every event into a fresh database and compare), on the
  written ledger and the two campaigns; and ``write_report`` seconds on the FreeSolv campaign (warm process).
- **Pool size.** Synthetic pools in a temporary directory, 10^3 … 10^6 rows, each measured in a fresh interpreter
  that reports its own peak RSS (``VmHWM``) and its RSS after imports (the baseline). The streamed path
  (``orchestrator.space.stream``: count rows, find the conditions space, then the top 10 by log-EI of a GP fitted
  on 48 rows) against the in-memory ``Pool`` (``load_pool`` + ``features`` + the same log-EI over every row at
  once, as the bo arm scores ``pool.features[available]``).

  - *conditions*: 5 continuous parameters (temperature, time, concentration, equivalents, catalyst loading,
    uniform, rounded to 0.01) and a 6-way solvent, 11 features; the first rows pin every bound and choice so each
    prefix spans the same space. The 10^n-row pools are prefixes of one seeded 10^6-row table.
  - *molecules*: FreeSolv molecules (those whose first atom takes one more bond) each prefixed with every linear
    chain of 1–5 C/N/O atoms (``CO`` + ``c1ccccc1`` → ``COc1ccccc1``), shuffled with a fixed seed: 10^5 rows of
    small organic molecules, about 4 % of them repeats. 1024-bit Morgan fingerprints, Tanimoto GP.

Run from the repository root (about 11 minutes on the loaded 2-core machine; ``--quick`` stops the pools at 10^4)::

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.scale [--quick] [--lab-budget 40] [--n-events 4000]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: python benchmarks/scale.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from typing import Any  # noqa: E402

from benchmarks import common  # noqa: E402  (pins the thread variables before numpy loads)
from benchmarks.memory import peak_rss_mb, status_kb  # noqa: E402

NAME = "scale"
ROOT = common.BENCHMARKS_DIR.parent
FREESOLV_SPEC = ROOT / "campaigns" / "freesolv" / "campaign.toml"
BUCHWALD_SPEC = ROOT / "campaigns" / "buchwald_hartwig" / "campaign.toml"
SUBTRACTED = ("simulators", "lab_twin", "surrogate_fit", "planner", "beliefs")
#: Parts of the overhead timed on their own (outside the subtracted calls), not subtracted.
WITHIN_OVERHEAD = ("ledger_writes", "ledger_reads")
CATEGORIES = (*SUBTRACTED, *WITHIN_OVERHEAD)
TOP_K = 10
N_TRAIN = 48


def quantiles(values: Sequence[float]) -> dict[str, float]:
    """Median, quartiles, IQR and mean of a sample (the quartiles are the sample's own for fewer than 4 values)."""
    values = sorted(values)
    if len(values) >= 4:
        q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    else:
        q1, median, q3 = values[0], statistics.median(values), values[-1]
    return {"median": median, "q1": q1, "q3": q3, "iqr": q3 - q1, "mean": statistics.fmean(values), "n": len(values)}


# ------------------------------------------------------------------------------------------------ loop overhead
def loop_specs(lab_budget: int) -> dict[str, Any]:
    """The two campaigns: bo main arm, random control, no compute budget, rungs run in this process."""
    from orchestrator.spec import load_spec, validate_spec

    specs = {}
    for name, path in (("freesolv_table_rung", FREESOLV_SPEC), ("buchwald_hartwig", BUCHWALD_SPEC)):
        data = load_spec(path).model_dump()
        data["budget"].update(lab_experiments=lab_budget, compute_seconds=None, lab_hours=None)
        data["stop"].update(on_target=False, threshold=None)
        data["planner"].update(main="bo", control="random")
        data["screening"]["executor"] = "serial"
        if name == "freesolv_table_rung":
            data["ladder"] = [{"name": "gaff", "simulator": "table", "column": "calc", "property": "dg_hydration_gaff",
                               "proxy": "dg_hydration_gaff", "cost_s": 3600.0}]
        specs[name] = validate_spec(data, source=f"{name} (benchmarks.scale)")
    return specs


class _Timers:
    """Wall and CPU seconds spent inside wrapped callables, by category, since the last ``take``.

    A call in a ``WITHIN_OVERHEAD`` category made from inside a subtracted call (the screen's beliefs read the
    ledger) is not counted again.
    """

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self.depth = 0  # subtracted calls in progress

    def wrap(self, category: str, function: Callable) -> Callable:
        is_subtracted = category in SUBTRACTED

        def timed(*args, **kwargs):
            if not is_subtracted and self.depth:
                return function(*args, **kwargs)
            self.depth += is_subtracted
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[category] += time.perf_counter() - wall
                self.seconds[category + "_cpu"] += time.process_time() - cpu
                self.depth -= is_subtracted

        return timed

    def take(self) -> dict[str, float]:
        taken = {name: self.seconds.get(name, 0.0) for c in CATEGORIES for name in (c, c + "_cpu")}
        self.seconds.clear()
        return taken


def run_instrumented(spec, db: Path, campaign_id: str) -> tuple[list[dict[str, Any]], int]:
    """Run a campaign to its end; return every node step with its wall seconds and the wrapped seconds inside it."""
    import importlib

    from orchestrator.loop.campaign import Campaign

    # ``orchestrator.loop.nodes`` re-exports the node functions under the modules' names, so ask for the modules.
    screen_node = importlib.import_module("orchestrator.loop.nodes.screen")
    learn_node = importlib.import_module("orchestrator.loop.nodes.learn")

    timers = _Timers()
    originals = {(screen_node, "run_rung"): screen_node.run_rung, (screen_node, "lab_beliefs"): screen_node.lab_beliefs,
                 (learn_node, "campaign_surrogate_state"): learn_node.campaign_surrogate_state}
    screen_node.run_rung = timers.wrap("simulators", screen_node.run_rung)
    screen_node.lab_beliefs = timers.wrap("beliefs", screen_node.lab_beliefs)
    learn_node.campaign_surrogate_state = timers.wrap("surrogate_fit", learn_node.campaign_surrogate_state)
    steps: list[dict[str, Any]] = []
    start = time.perf_counter()
    try:
        with Campaign.start(spec, db=db, campaign_id=campaign_id) as campaign:
            start_s = time.perf_counter() - start
            for planner in campaign.ctx.planners.values():
                planner.propose = timers.wrap("planner", planner.propose)
            ledger = campaign.ledger  # append() goes through append_many, so wrapping that catches both
            ledger.append_many = timers.wrap("ledger_writes", ledger.append_many)
            ledger.events = timers.wrap("ledger_reads", ledger.events)
            driver = campaign.ctx.driver
            for method in ("run_until_complete", "run_until_any_complete"):
                if hasattr(driver, method):
                    setattr(driver, method, timers.wrap("lab_twin", getattr(driver, method)))
            last, last_cpu = time.perf_counter(), time.process_time()

            def on_step(node: str, _update: dict) -> None:
                nonlocal last, last_cpu
                now, now_cpu = time.perf_counter(), time.process_time()
                steps.append({"node": node, "wall_s": now - last, "cpu_s": now_cpu - last_cpu, **timers.take()})
                last, last_cpu = now, now_cpu

            campaign.run(on_step=on_step)
            n_events = campaign.ledger.n_events(campaign_id)
    finally:
        for (module, name), original in originals.items():
            setattr(module, name, original)
    return steps, n_events, start_s


def group_iterations(steps: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Full iterations (plan … decide) and drain rounds (observe … decide once nothing more may be dispatched)."""
    groups: list[list[dict[str, Any]]] = []
    previous = None
    for step in steps:
        if not groups or step["node"] == "plan" or (step["node"] == "observe" and previous == "decide"):
            groups.append([])
        groups[-1].append(step)
        previous = step["node"]
    totals = []
    for group in groups:
        total = {"kind": "iteration" if group[0]["node"] == "plan" else "drain",
                 "wall_s": sum(s["wall_s"] for s in group), "cpu_s": sum(s["cpu_s"] for s in group)}
        for category in CATEGORIES:
            total[category] = sum(s[category] for s in group)
            total[category + "_cpu"] = sum(s[category + "_cpu"] for s in group)
        total["overhead_s"] = total["wall_s"] - sum(total[c] for c in SUBTRACTED)
        total["overhead_cpu_s"] = total["cpu_s"] - sum(total[c + "_cpu"] for c in SUBTRACTED)
        total["by_node"] = {s["node"]: s["wall_s"] - sum(s[c] for c in SUBTRACTED) for s in group}
        totals.append(total)
    return [t for t in totals if t["kind"] == "iteration"], [t for t in totals if t["kind"] == "drain"]


def measure_loop(work: Path, lab_budget: int) -> dict[str, Any]:
    results = {}
    for name, spec in loop_specs(lab_budget).items():
        common.console.print(f"loop overhead: {name}, {lab_budget} lab experiments …")
        db = work / f"{name}.db"
        with common.Stopwatch.run() as watch:
            steps, n_events, start_s = run_instrumented(spec, db, name)
        iterations, drains = group_iterations(steps)
        summary = {"db": str(db), "campaign_run_s": watch.wall_s, "campaign_start_s": start_s,
                   "steps_s": sum(s["wall_s"] for s in steps), "n_events": n_events, "n_steps": len(steps),
                   "n_iterations": len(iterations), "n_drain_rounds": len(drains),
                   "events_per_iteration": n_events / max(len(iterations), 1)}
        keys = ("wall_s", "cpu_s", "overhead_s", "overhead_cpu_s", *CATEGORIES, *(c + "_cpu" for c in WITHIN_OVERHEAD))
        for key in keys:
            summary[key + "_ms"] = quantiles([1e3 * it[key] for it in iterations])
        summary["first_iteration_ms"] = {k: 1e3 * iterations[0][k] for k in keys}
        nodes = sorted({node for it in iterations for node in it["by_node"]}, key=[n for n, _ in _nodes()].index)
        summary["overhead_by_node_ms"] = {
            node: quantiles([1e3 * it["by_node"].get(node, 0.0) for it in iterations])["median"] for node in nodes}
        results[name] = summary
    return results


def _nodes():
    from orchestrator.loop.nodes import NODES

    return NODES


# ------------------------------------------------------------------------------------------------ ledger writes
def _write_items(n: int, offset: int) -> list[tuple[Any, str]]:
    """``n`` events alternating ``Proposed`` and ``Simulated`` over FreeSolv molecules, with unique keys."""
    from vocabulary.domain import Molecule, Observation
    from vocabulary.events import Proposed, Simulated

    rows = common.load_freesolv()
    items = []
    for index in range(offset, offset + n):
        row = rows[(index // 2) % len(rows)]
        molecule = Molecule.parse(row["smiles"])
        cid = f"{molecule.id}-{index // 2}"
        iteration = index // 20
        if index % 2 == 0:
            payload = Proposed(iteration=iteration, arm="bo", candidate_id=cid, candidate=molecule.model_dump(mode="json"),
                               hypothesis="close to the target window", rationale="high log-EI", acquisition=-1.5)
        else:
            observation = Observation(candidate_id=cid, source="table", source_version="1", fidelity=2,
                                      properties={"dg_hydration_gaff": row["calc"]}, cost_s=3600.0)
            payload = Simulated(iteration=iteration, candidate_id=cid, rung="gaff",
                                observation=observation.model_dump(mode="json"))
        items.append((payload, f"{index}"))
    return items


def _started(campaign_id: str):
    from vocabulary.events import CampaignStarted

    spec = {"objective": {"property": "dg_hydration", "direction": "target", "target": -12.0}}
    return CampaignStarted(name=campaign_id, seed=0, spec=spec)


def measure_ledger(work: Path, n_events: int, batch_size: int, n_single: int, *, db: str | None = None) -> dict[str, Any]:
    """Events per second written on a fresh ledger: ``work/writes.db`` (SQLite), or ``db`` (an empty database's URL)."""
    from orchestrator.ledger import Ledger, safe_url, verify

    common.console.print(f"ledger: {n_events} events in batches of {batch_size}, {n_single} single appends …")
    ledger = Ledger.open(db or work / "writes.db")
    results: dict[str, Any] = {"db": safe_url(db or work / "writes.db"), "n_events_batched": n_events,
                               "batch_size": batch_size, "n_single": n_single}
    batched = _write_items(n_events, 0)
    ledger.append("batched", _started("batched"), key="started")
    with common.Stopwatch.run() as watch:
        for start in range(0, n_events, batch_size):
            ledger.append_many("batched", batched[start:start + batch_size], actor="bench")
    results["append_many"] = {"wall_s": watch.wall_s, "cpu_s": watch.cpu_s, "events_per_s": n_events / watch.wall_s,
                              "events_per_cpu_s": n_events / watch.cpu_s}
    single = _write_items(n_single, 0)
    ledger.append("single", _started("single"), key="started")
    with common.Stopwatch.run() as watch:
        for payload, key in single:
            ledger.append("single", payload, key=key, actor="bench")
    results["append"] = {"wall_s": watch.wall_s, "cpu_s": watch.cpu_s, "events_per_s": n_single / watch.wall_s,
                         "events_per_cpu_s": n_single / watch.cpu_s, "ms_per_event": 1e3 * watch.wall_s / n_single}
    with common.Stopwatch.run() as watch:
        ledger.append_many("batched", batched[:batch_size], actor="bench")  # already stored: idempotent no-ops
    results["append_many_noop"] = {"events_per_s": batch_size / watch.wall_s}
    with common.Stopwatch.run() as watch:
        report = verify(ledger, "batched")
    assert report.is_identical, "the written ledger does not replay identically"
    results["verify"] = {"n_events": report.n_events, "wall_s": watch.wall_s, "cpu_s": watch.cpu_s,
                         "events_per_s": report.n_events / watch.wall_s}
    ledger.close()
    if db is None:
        results["db_bytes"] = sum(p.stat().st_size for p in work.glob("writes.db*"))
    return results


def measure_replay(loop: dict[str, Any], work: Path, repeats: int) -> dict[str, Any]:
    from orchestrator.ledger import Ledger, verify
    from orchestrator.replay.report import write_report

    results: dict[str, Any] = {}
    for name, summary in loop.items():
        ledger = Ledger.open(summary["db"])
        walls = []
        for _ in range(repeats):
            with common.Stopwatch.run() as watch:
                report = verify(ledger, name)
            assert report.is_identical, f"{name} does not replay identically"
            walls.append(watch.wall_s)
        results[name] = {"n_events": report.n_events, "wall_s_median": statistics.median(walls),
                         "events_per_s": report.n_events / statistics.median(walls)}
        ledger.close()
    common.console.print("report generation …")
    name = "freesolv_table_rung"
    ledger = Ledger.open(loop[name]["db"])
    write_report(ledger, name, work / "report-warmup")  # imports and matplotlib's font cache
    walls = []
    for index in range(repeats):
        with common.Stopwatch.run() as watch:
            write_report(ledger, name, work / f"report-{index}")
        walls.append(watch.wall_s)
    results["write_report"] = {"campaign": name, "n_events": loop[name]["n_events"],
                               "wall_s_median": statistics.median(walls), "wall_s_min": min(walls), "wall_s_all": walls}
    ledger.close()
    return results


# ------------------------------------------------------------------------------------------------ pools
CONDITION_PARAMETERS = {  # name: (low, high), in the unit the name gives
    "temperature_c": (20.0, 120.0),
    "time_h": (0.5, 24.0),
    "concentration_m": (0.05, 1.0),
    "equivalents": (1.0, 3.0),
    "catalyst_mol_pct": (0.5, 10.0),
}
SOLVENTS = ("dmso", "dmf", "thf", "toluene", "water", "meoh")
CONDITION_COLUMNS = [*CONDITION_PARAMETERS, "solvent"]


def write_condition_pools(work: Path, sizes: Sequence[int]) -> dict[int, Path]:
    """Prefixes of one seeded table of random conditions with a synthetic ``yield`` (%) column."""
    import numpy as np
    import pandas as pd

    n = max(sizes)
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({name: np.round(rng.uniform(low, high, n), 2) for name, (low, high) in CONDITION_PARAMETERS.items()})
    frame["solvent"] = rng.choice(SOLVENTS, n)
    for name, (low, high) in CONDITION_PARAMETERS.items():  # pin the bounds and every choice in the first rows
        frame.loc[0, name], frame.loc[1, name] = low, high
    frame.loc[: len(SOLVENTS) - 1, "solvent"] = SOLVENTS
    frame["yield"] = synthetic_yield(frame)
    paths = {}
    for size in sorted(sizes):
        paths[size] = work / f"conditions-{size}.csv"
        frame.head(size).to_csv(paths[size], index=False)
    return paths


def synthetic_yield(frame) -> Any:
    """A smooth made-up yield (%): an optimum near 85 °C and 0.4 M, saturating in time, solvent-dependent."""
    import numpy as np

    solvent = frame["solvent"].map(dict(zip(SOLVENTS, (1.0, 0.9, 0.7, 0.5, 0.3, 0.6), strict=True)))
    return (100 * np.exp(-(((frame["temperature_c"] - 85) / 30) ** 2) - ((frame["concentration_m"] - 0.4) / 0.5) ** 2)
            * (1 - np.exp(-frame["time_h"] / 6)) * solvent).round(2)


def chain_prefixes(max_length: int = 5) -> list[str]:
    """Every linear chain of 1…max_length atoms drawn from C, N and O, as SMILES prefixes."""
    chains, frontier = [], [""]
    for _ in range(max_length):
        frontier = [chain + atom for chain in frontier for atom in "CNO"]
        chains += frontier
    return chains


def write_molecule_pools(work: Path, sizes: Sequence[int]) -> tuple[dict[int, Path], dict[str, Any]]:
    """FreeSolv molecules prefixed with short C/N/O chains, shuffled with a fixed seed; prefixes of one table."""
    import random

    import pandas as pd

    from vocabulary.domain import InvalidCandidate, Molecule

    bases = []
    for row in common.load_freesolv():
        try:
            Molecule.parse("C" + row["smiles"])  # its first atom takes one more bond
        except InvalidCandidate:
            continue
        bases.append(row)
    rows = [(prefix + row["smiles"], row["expt"]) for row in bases for prefix in chain_prefixes()]
    random.Random(0).shuffle(rows)
    n = max(sizes)
    if n > len(rows):
        raise SystemExit(f"only {len(rows)} molecule variants exist; ask for at most that many")
    frame = pd.DataFrame(rows[:n], columns=["smiles", "expt"])
    paths = {}
    for size in sorted(sizes):
        paths[size] = work / f"molecules-{size}.csv"
        frame.head(size).to_csv(paths[size], index=False)
    return paths, {"n_bases": len(bases), "n_variants": len(rows)}


def fit_pool_surrogates(work: Path, condition_csv: Path, molecule_csv: Path) -> dict[str, Path]:
    """GPs on 48 rows of each smallest pool (conditions: the synthetic yield; molecules: FreeSolv's expt)."""
    import numpy as np
    import pandas as pd

    from orchestrator.policy.planners.surrogate import GPSurrogate
    from vocabulary.domain import featurise, parse_candidate

    space = declared_space()
    out = {}
    for kind, path, target, kernel in (("conditions", condition_csv, "yield", "matern52"),
                                       ("molecule", molecule_csv, "expt", "tanimoto")):
        frame = pd.read_csv(path).sample(N_TRAIN, random_state=0)
        raw = frame[CONDITION_COLUMNS].to_dict("records") if kind == "conditions" else frame["smiles"].tolist()
        candidates = [parse_candidate(kind, item, space) for item in raw]
        X = featurise(candidates, space)
        y = frame[target].to_numpy(dtype=float).copy()
        surrogate = GPSurrogate.fit(X, y, kernel=kernel, seed=0, n_steps=100)
        out[kind] = work / f"surrogate-{kind}.json"
        out[kind].write_text(json.dumps({"X": X.tolist(), "y": y.tolist(), "hyperparameters": surrogate.hyperparameters,
                                         "incumbent": float(np.max(y)), "exclude_ids": [c.id for c in candidates]}))
    return out


def declared_space():
    from vocabulary.domain import ConditionSpace, Parameter

    parameters = [Parameter(name=name, kind="continuous", low=low, high=high)
                  for name, (low, high) in CONDITION_PARAMETERS.items()]
    parameters.append(Parameter(name="solvent", kind="categorical", choices=tuple(sorted(SOLVENTS))))
    return ConditionSpace(parameters=tuple(parameters))


def _rss_kb(field: str) -> int:
    kb = status_kb(field)
    return kb if kb is not None else round(peak_rss_mb() * 1024)


def pool_child(config: dict[str, Any]) -> dict[str, Any]:
    """One pool measurement, run in a fresh interpreter so that its peak RSS is its own."""
    import numpy as np

    from orchestrator.policy.planners.acquisition_stream import log_ei_scorer
    from orchestrator.policy.planners.surrogate import GPSurrogate
    from orchestrator.space.pool import load_pool
    from orchestrator.space.stream import (
        condition_space_from_csv,
        count_rows,
        stream_top_k,
    )
    from orchestrator.spec import load_spec, validate_spec

    fitted = json.loads(Path(config["surrogate"]).read_text())
    surrogate = GPSurrogate.from_hyperparameters(np.asarray(fitted["X"]), np.asarray(fitted["y"]), fitted["hyperparameters"])
    scorer = log_ei_scorer(surrogate, fitted["incumbent"])
    scorer(np.asarray(fitted["X"][:2]))  # torch's first call allocates; that belongs to the baseline
    kind, path = config["kind"], Path(config["path"])
    is_conditions = kind == "conditions"
    out: dict[str, Any] = {"baseline_rss_kb": _rss_kb("VmRSS")}
    wall, cpu = time.perf_counter(), time.process_time()
    if config["mode"] == "stream":
        start = time.perf_counter()
        out["n_rows"] = count_rows(path)
        out["count_s"] = time.perf_counter() - start
        space = None
        if is_conditions:
            start = time.perf_counter()
            space = condition_space_from_csv(path, CONDITION_COLUMNS)
            out["space_pass_s"] = time.perf_counter() - start
            assert space == declared_space(), "the streamed space differs from the declared one"
        start = time.perf_counter()
        top = stream_top_k(path, kind, scorer, TOP_K, column=None if is_conditions else "smiles",
                           columns=CONDITION_COLUMNS if is_conditions else None, space=space,
                           chunk_size=config["chunk_size"], exclude_ids=fitted["exclude_ids"])
        out["top_k_s"] = time.perf_counter() - start
        out.update(n_invalid=top.n_invalid, n_duplicates=top.n_duplicates, n_chunks=top.n_chunks,
                   best=[(c.score, c.candidate.id) for c in top.best])
    else:
        data = load_spec(BUCHWALD_SPEC if is_conditions else FREESOLV_SPEC).model_dump()
        data["space"].update(pool=str(path), column=None if is_conditions else "smiles",
                             columns=CONDITION_COLUMNS if is_conditions else None,
                             replicates="average")  # chained prefixes repeat some molecules; the stream keeps one
        data["lab"]["oracle_column"] = "yield" if is_conditions else "expt"
        pool = load_pool(validate_spec(data))
        out["load_s"] = time.perf_counter() - wall
        start = time.perf_counter()
        features = pool.features
        out["features_s"] = time.perf_counter() - start
        start = time.perf_counter()
        excluded = {pool.index[cid] for cid in fitted["exclude_ids"] if cid in pool.index}
        available = np.asarray([i for i in range(len(pool)) if i not in excluded], dtype=int)
        scores = scorer(features[available])
        order = np.lexsort((available, -scores))[:TOP_K]
        out["score_s"] = time.perf_counter() - start
        out.update(n_candidates=len(pool), n_invalid=len(pool.skipped_rows),
                   features_mb=features.nbytes / 2**20,
                   best=[(float(scores[i]), pool.ids[available[i]]) for i in order])
    out["wall_s"] = time.perf_counter() - wall
    out["cpu_s"] = time.process_time() - cpu
    out["peak_rss_kb"] = _rss_kb("VmHWM")
    return out


def run_pool_child(config: dict[str, Any]) -> dict[str, Any]:
    completed = subprocess.run([sys.executable, "-m", "benchmarks.scale", "--child", json.dumps(config)], cwd=ROOT,
                               capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise SystemExit(f"pool measurement {config} failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def measure_pools(work: Path, condition_sizes: Sequence[int], molecule_sizes: Sequence[int], memory_max: dict[str, int],
                  chunk_size: int) -> dict[str, Any]:
    common.console.print(f"writing pools: conditions {list(condition_sizes)}, molecules {list(molecule_sizes)} …")
    condition_paths = write_condition_pools(work, condition_sizes)
    molecule_paths, molecule_info = write_molecule_pools(work, molecule_sizes)
    surrogates = fit_pool_surrogates(work, condition_paths[min(condition_sizes)], molecule_paths[min(molecule_sizes)])
    rows = []
    for kind, paths in (("conditions", condition_paths), ("molecule", molecule_paths)):
        for size, path in sorted(paths.items()):
            for mode in ("stream", "memory"):
                if mode == "memory" and size > memory_max[kind]:
                    continue
                common.console.print(f"  {kind} {size:>9,} {mode} …")
                config = {"kind": kind, "mode": mode, "path": str(path), "surrogate": str(surrogates[kind]),
                          "chunk_size": chunk_size}
                result = run_pool_child(config)
                rows.append({"kind": kind, "size": size, "mode": mode, "file_mb": path.stat().st_size / 2**20, **result})
    # The two paths must agree on the answer wherever both ran.
    for row in rows:
        twin = next((r for r in rows if r["mode"] != row["mode"] and (r["kind"], r["size"]) == (row["kind"], row["size"])),
                    None)
        if twin is not None:
            row["same_top_k_as_other_path"] = [cid for _, cid in row["best"]] == [cid for _, cid in twin["best"]]
    return {"rows": rows, "molecules": molecule_info, "top_k": TOP_K, "n_train": N_TRAIN, "chunk_size": chunk_size}


# ------------------------------------------------------------------------------------------------ output
def _mb(kb: float) -> float:
    return kb / 1024


def report(results: dict[str, Any]) -> None:
    loop = results["loop"]
    columns = ["campaign", "iterations", "events/it", "wall ms", "simulators", "lab twin", "surrogate fit", "planner",
               "beliefs", "overhead ms", "overhead IQR", "overhead CPU ms", "of which ledger writes",
               "ledger reads"]
    rows = []
    for name, s in loop.items():
        rows.append((name, s["n_iterations"], s["events_per_iteration"], s["wall_s_ms"]["median"],
                     *(s[c + "_ms"]["mean"] for c in SUBTRACTED), s["overhead_s_ms"]["median"],
                     s["overhead_s_ms"]["iqr"], s["overhead_cpu_s_ms"]["median"],
                     s["ledger_writes_ms"]["median"], s["ledger_reads_ms"]["median"]))
    common.print_table("loop: ms per iteration", columns, rows,
                       caption="wall and overhead: median over iterations; the subtracted parts: mean per iteration "
                               "(the surrogate refits only every few iterations); overhead = wall − simulators − lab "
                               "twin − surrogate fit − planner − beliefs, and the same in this process's CPU time")
    nodes = list(next(iter(loop.values()))["overhead_by_node_ms"])
    common.print_table("overhead by node, ms (median; subtracted parts removed)", ["campaign", *nodes],
                       [(name, *(s["overhead_by_node_ms"].get(n, 0.0) for n in nodes)) for name, s in loop.items()])
    ledger = results["ledger"]
    common.print_table("ledger on SQLite (WAL)", ["operation", "events", "events/s", "events/cpu s"], [
        (f"append_many, batches of {ledger['batch_size']}", ledger["n_events_batched"],
         ledger["append_many"]["events_per_s"], ledger["append_many"]["events_per_cpu_s"]),
        ("append, one transaction each", ledger["n_single"], ledger["append"]["events_per_s"],
         ledger["append"]["events_per_cpu_s"]),
        ("append_many of stored keys (no-op)", ledger["batch_size"], ledger["append_many_noop"]["events_per_s"], None),
        ("verify (replay) of the written ledger", ledger["verify"]["n_events"], ledger["verify"]["events_per_s"], None),
        *((f"verify of {name}", r["n_events"], r["events_per_s"], None)
          for name, r in results["replay"].items() if name != "write_report"),
    ])
    w = results["replay"]["write_report"]
    common.console.print(f"write_report on {w['campaign']} ({w['n_events']} events): median {w['wall_s_median']:.2f} s, "
                         f"min {w['wall_s_min']:.2f} s (warm process)")
    pool_rows = []
    for r in results["pools"]["rows"]:
        pool_rows.append((r["kind"], r["size"], r["mode"], r["wall_s"], r["cpu_s"], 1e6 * r["cpu_s"] / r["size"],
                          r.get("space_pass_s"), _mb(r["baseline_rss_kb"]), _mb(r["peak_rss_kb"]),
                          _mb(r["peak_rss_kb"] - r["baseline_rss_kb"]), r.get("features_mb"),
                          str(r.get("same_top_k_as_other_path", "—"))))
    common.print_table("pool size: time and peak RSS (fresh interpreter per row)",
                       ["kind", "rows", "path", "wall s", "cpu s", "cpu µs/row", "space pass s", "baseline MB",
                        "peak MB", "peak − baseline MB", "feature matrix MB", "same top-k"], pool_rows,
                       caption="stream: count rows + (conditions) space pass + top-k; memory: load_pool + features + "
                               "log-EI over every row; baseline = RSS after imports and the surrogate")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lab-budget", type=int, default=40, help="lab experiments per loop campaign (default 40)")
    parser.add_argument("--n-events", type=int, default=4000, help="events written with append_many (default 4000)")
    parser.add_argument("--batch-size", type=int, default=50, help="events per append_many call (default 50)")
    parser.add_argument("--n-single", type=int, default=500, help="events written with single appends (default 500)")
    parser.add_argument("--repeats", type=int, default=3, help="repeats of verify and write_report (default 3)")
    parser.add_argument("--chunk-size", type=int, default=4096, help="rows per streamed chunk (default 4096)")
    parser.add_argument("--quick", action="store_true", help="pools of 10^3 and 10^4 rows only")
    parser.add_argument("--skip", nargs="*", default=[], choices=["loop", "ledger", "pools"],
                        help="parts to leave out; their last results are kept from results/scale.json")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if {"loop", "ledger", "pools"} <= set(args.skip):
        parser.error("--skip leaves nothing to measure")
    if args.child:
        print(json.dumps(pool_child(json.loads(args.child))))
        return
    condition_sizes = [10**3, 10**4] if args.quick else [10**3, 10**4, 10**5, 10**6]
    molecule_sizes = [10**3, 10**4] if args.quick else [10**3, 10**4, 10**5]
    memory_max = {"conditions": 10**6, "molecule": 10**5}
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="scale-") as tmp:
        work = Path(tmp)
        if "loop" not in args.skip:
            results["loop"] = measure_loop(work, args.lab_budget)
            results["replay"] = measure_replay(results["loop"], work, args.repeats)
        if "ledger" not in args.skip:
            results["ledger"] = measure_ledger(work, args.n_events, args.batch_size, args.n_single)
        if "pools" not in args.skip:
            results["pools"] = measure_pools(work, condition_sizes, molecule_sizes, memory_max, args.chunk_size)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    run = {"date_utc": now, "command": " ".join(["python -m benchmarks.scale", *sys.argv[1:]]), "parts": sorted(results)}
    measured, runs = dict.fromkeys(results, now), []
    previous = common.RESULTS_DIR / f"{NAME}.json"
    if args.skip and previous.is_file():  # a partial run replaces its parts and keeps the others
        kept = json.loads(previous.read_text())["results"]
        measured = kept.pop("measured_utc", {}) | measured
        runs = kept.pop("runs", [])
        results = kept | results
    results["measured_utc"], results["runs"] = measured, [*runs, run]
    report(results)
    common.write_results(NAME, {"parameters": vars(args) | {"condition_sizes": condition_sizes,
                                                            "molecule_sizes": molecule_sizes,
                                                            "memory_max": memory_max},
                                "results": results})


if __name__ == "__main__":
    main()
