"""Per-rung throughput on this machine: serial, through ``LocalProcessExecutor(max_workers=2)``, and through the cache.

For each rung of the molecule ladder (rdkit_descriptors, conformers, xtb; dft on a few molecules of at most
``--dft-max-heavy`` heavy atoms) on a seeded sample of FreeSolv molecules, and each rung of the materials ladder
(composition, prototype on a sample of the band-gap compositions; chgnet on compositions whose prototype cell is
small), it measures:

- candidates per second run serially in this process, and its CPU seconds;
- candidates per second through ``LocalProcessExecutor(max_workers=2)`` with ``chunk_size=1`` (the default) and with
  ``--chunk-size``, each on fresh workers that were first warmed up on other candidates (so interpreter start-up and
  imports are reported separately as "worker warm-up", not charged to the batch), and the speed-up over serial;
- the result cache: the batch through ``SimulationCache`` (a temporary SQLite file) twice, on fresh warmed workers;
  the hit rate of the second pass and the wall-time ratio first / second;
- the seconds the cost model charges for the batch against the serial wall and CPU seconds (the budget is charged
  from the cost model).

Per-process caches (the MMFF geometry cache, the prototype search cache) are cleared before every serial
measurement and every measurement uses fresh workers, so no rung profits from an earlier one.

Run from the repository root::

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.rung_throughput [--n 100] [--n-materials 100] [--n-chgnet 20]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: python benchmarks/rung_throughput.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse  # noqa: E402
import tempfile  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

from benchmarks import common  # noqa: E402  (pins the thread variables before numpy loads)

NAME = "rung_throughput"
TIMEOUT_S = 600.0  # generous: this measures speed, it is not a test of the timeout


@dataclass
class Rung:
    """One rung to measure: how to build it, the batch, candidates to warm workers with, and the chunked variant."""

    name: str
    kind: str
    factory: Callable[[], Any]
    batch: list[Any]
    warmup: list[Any]
    chunk_size: int | None


def clear_process_caches() -> None:
    """Forget this process's MMFF ensembles and prototype searches, so a rung pays for its own geometry."""
    from simulators import geometry, structures

    geometry._ensemble.cache_clear()
    structures._fits.cache_clear()


def serial(rung: Rung) -> dict[str, Any]:
    simulator = rung.factory()
    simulator.evaluate(rung.warmup)  # imports (tblite, pyscf, torch) and model loading are not per-candidate cost
    clear_process_caches()
    with common.Stopwatch.run() as watch:
        observations = simulator.evaluate(rung.batch)
    return {
        "wall_s": watch.wall_s,
        "cpu_s": watch.cpu_s,
        "load_before": watch.load_before,
        "load_after": watch.load_after,
        "candidates_per_s": len(rung.batch) / watch.wall_s,
        "n_ok": sum(o.status == "ok" for o in observations),
        "n_failed": sum(o.status == "failed" for o in observations),
        "cost_model_s": sum(o.cost_s for o in observations),
        "failures": common.failure_summary(
            common.failure_kind(o.reason, c.id, getattr(c, "formula", ""), getattr(c, "smiles", ""))
            for c, o in zip(rung.batch, observations, strict=True)
            if o.status == "failed"
        ),
        "failed_candidates": [
            {"id": c.id, "reason": o.reason}
            for c, o in zip(rung.batch, observations, strict=True)
            if o.status == "failed"
        ],
    }


def warmed_executor(rung: Rung, chunk_size: int):
    """A fresh two-worker executor whose workers have imported the rung's backend; and the warm-up seconds."""
    from simulators.executor_process import LocalProcessExecutor

    executor = LocalProcessExecutor(max_workers=2, chunk_size=chunk_size)
    simulator = rung.factory()
    # one chunk per worker, so that both workers start (a 2-candidate warm-up is one chunk when chunk_size >= 2)
    warmup = [candidate for candidate in rung.warmup[:2] for _ in range(chunk_size)]
    with common.Stopwatch.run() as watch:
        executor.map_evaluate(simulator, warmup, timeout_s=TIMEOUT_S)
    return executor, simulator, watch.wall_s


def parallel(rung: Rung, chunk_size: int) -> dict[str, Any]:
    executor, simulator, warmup_s = warmed_executor(rung, chunk_size)
    try:
        with common.Stopwatch.run() as watch:
            observations = executor.map_evaluate(simulator, rung.batch, timeout_s=TIMEOUT_S)
    finally:
        executor.close()
    return {
        "chunk_size": chunk_size,
        "worker_warmup_s": warmup_s,
        "wall_s": watch.wall_s,
        "load_before": watch.load_before,
        "load_after": watch.load_after,
        "candidates_per_s": len(rung.batch) / watch.wall_s,
        "n_ok": sum(o.status == "ok" for o in observations),
        "n_failed": sum(o.status == "failed" for o in observations),
    }


def cached(rung: Rung) -> dict[str, Any]:
    from simulators.cache import SimulationCache

    executor, simulator, _ = warmed_executor(rung, 1)
    with tempfile.TemporaryDirectory(prefix="closedloop-bench-") as folder:
        cache = SimulationCache(Path(folder) / "cache.sqlite")
        try:
            with common.Stopwatch.run() as first:
                _, is_cached_first = cache.evaluate(simulator, rung.batch, executor, timeout_s=TIMEOUT_S)
            with common.Stopwatch.run() as second:
                observations, is_cached_second = cache.evaluate(simulator, rung.batch, executor, timeout_s=TIMEOUT_S)
            stats = cache.stats()
        finally:
            cache.close()
            executor.close()
    return {
        "first_wall_s": first.wall_s,
        "second_wall_s": second.wall_s,
        "time_ratio_first_over_second": first.wall_s / second.wall_s,
        "hit_rate_first": sum(is_cached_first) / len(rung.batch),
        "hit_rate_second": sum(is_cached_second) / len(rung.batch),
        "n_rows": stats.n_rows,
        "n_not_stored": sum(not hit for hit in is_cached_second),
        "n_failed_stored": sum(o.status == "failed" for o, hit in zip(observations, is_cached_second) if hit),
    }


def measure(rung: Rung) -> dict[str, Any]:
    common.console.print(f"[bold]{rung.name}[/bold]: {len(rung.batch)} candidates")
    clear_process_caches()
    result: dict[str, Any] = {"rung": rung.name, "kind": rung.kind, "n": len(rung.batch)}
    result["serial"] = serial(rung)
    common.console.print(f"  serial {result['serial']['wall_s']:.2f} s")
    result["process"] = parallel(rung, 1)
    common.console.print(f"  process x2 {result['process']['wall_s']:.2f} s")
    if rung.chunk_size and rung.chunk_size > 1:
        result["process_chunked"] = parallel(rung, rung.chunk_size)
        common.console.print(f"  process x2 chunk {rung.chunk_size} {result['process_chunked']['wall_s']:.2f} s")
    result["cache"] = cached(rung)
    first, second = result["cache"]["first_wall_s"], result["cache"]["second_wall_s"]
    common.console.print(f"  cache {first:.2f} s then {second:.3f} s")
    s = result["serial"]
    result["cost_model_over_serial_wall"] = s["cost_model_s"] / s["wall_s"]
    result["cost_model_over_serial_cpu"] = s["cost_model_s"] / s["cpu_s"] if s["cpu_s"] > 0 else float("nan")
    for key in ("process", "process_chunked"):
        if key in result:
            result[key]["speedup_over_serial"] = result[key]["candidates_per_s"] / s["candidates_per_s"]
    return result


# ----------------------------------------------------------------------------------------------------- batches
def registered(name: str) -> Callable[[], Any]:
    """Build the rung the way the orchestrator does: through the entry-point registry, default parameters."""
    from simulators.registry import load_simulator

    return lambda: load_simulator(name)


def molecule_rungs(args: argparse.Namespace) -> list[Rung]:
    from vocabulary.domain import Molecule

    shuffled = [Molecule.parse(row["smiles"]) for row in common.sample(common.load_freesolv(), None, args.seed)]
    batch, rest = shuffled[: args.n], shuffled[args.n :]
    warmup = rest[:2]
    small = [m for m in rest[2:] if m.n_heavy_atoms <= args.dft_max_heavy]
    dft_warmup = sorted(small, key=lambda m: m.n_heavy_atoms)[:2]  # the smallest: the warm-up is about imports
    dft_batch = [m for m in small if m not in dft_warmup and m.n_heavy_atoms >= 3][: args.n_dft]
    chunk = args.chunk_size
    rungs = [
        Rung("rdkit_descriptors", "molecule", registered("rdkit_descriptors"), batch, warmup, chunk),
        Rung("conformers", "molecule", registered("conformers"), batch, warmup, chunk),
        Rung("xtb", "molecule", registered("xtb"), batch, warmup, chunk),
    ]
    if args.n_dft > 0:
        rungs.append(Rung("dft", "molecule", registered("dft"), dft_batch, dft_warmup, None))
    return rungs


def material_rungs(args: argparse.Namespace) -> list[Rung]:
    from simulators.structures import best_prototype_structure
    from vocabulary.domain import InvalidCandidate, Material

    materials = []
    for row in common.sample(common.load_bandgap(), None, args.seed):
        try:
            materials.append(Material.parse(row["composition"]))
        except InvalidCandidate:
            continue
    warmup_formulas = ["NaCl", "MgO", "KBr", "CaO"]
    warmup = [Material.parse(f) for f in warmup_formulas]
    warmup_ids = {m.id for m in warmup}
    pool = [m for m in materials if m.id not in warmup_ids]
    batch = pool[: args.n_materials]
    small_cells = []
    for material in pool:
        try:
            _, structure = best_prototype_structure(material)
        except Exception:  # no prototype: not a chgnet candidate
            continue
        if len(structure) <= args.chgnet_max_atoms:
            small_cells.append(material)
    chunk = args.chunk_size
    return [
        Rung("composition", "material", registered("composition"), batch, warmup[:2], chunk),
        Rung("prototype", "material", registered("prototype"), batch, warmup[:2], chunk),
        Rung("chgnet", "material", registered("chgnet"), small_cells[: args.n_chgnet], warmup[2:], chunk),
    ]


# ----------------------------------------------------------------------------------------------------- report
def report(results: Sequence[dict[str, Any]], args: argparse.Namespace) -> None:
    chunk = args.chunk_size
    rows = []
    for r in results:
        s, p, c = r["serial"], r["process"], r.get("process_chunked")
        rows.append(
            [
                r["rung"],
                r["n"],
                f"{s['n_ok']}/{s['n_failed']}",
                s["candidates_per_s"],
                p["candidates_per_s"],
                p["speedup_over_serial"],
                c["candidates_per_s"] if c else None,
                c["speedup_over_serial"] if c else None,
                p["worker_warmup_s"],
            ]
        )
    common.print_table(
        "Throughput (candidates per second, wall clock)",
        [
            "rung",
            "n",
            "ok/failed",
            "serial /s",
            "process×2 /s",
            "speed-up",
            f"process×2 chunk {chunk} /s",
            "speed-up",
            "worker warm-up s",
        ],
        rows,
        caption="speed-up = process / serial throughput. Warm-up: two fresh workers importing the backend (not in the "
        "throughput).",
    )
    rows = []
    for r in results:
        s, c = r["serial"], r["cache"]
        rows.append(
            [
                r["rung"],
                s["cost_model_s"],
                s["wall_s"],
                s["cpu_s"],
                r["cost_model_over_serial_wall"],
                r["cost_model_over_serial_cpu"],
                f"{c['hit_rate_second']:.0%}",
                c["first_wall_s"],
                c["second_wall_s"],
                c["time_ratio_first_over_second"],
            ]
        )
    common.print_table(
        "Cost model vs measured (serial), and the cache (two passes through SimulationCache on a temp SQLite file)",
        [
            "rung",
            "cost model s",
            "serial wall s",
            "serial CPU s",
            "model/wall",
            "model/CPU",
            "2nd-pass hits",
            "1st pass s",
            "2nd pass s",
            "1st/2nd",
        ],
        rows,
    )
    failures = [(r["rung"], reason, n) for r in results for reason, n in r["serial"]["failures"]]
    if failures:
        common.print_table("Failed observations (serial pass, grouped)", ["rung", "reason", "n"], failures)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100, help="FreeSolv molecules per molecule rung (default 100)")
    parser.add_argument("--n-dft", type=int, default=4, help="molecules for the dft rung; 0 skips it (default 4)")
    parser.add_argument("--dft-max-heavy", type=int, default=8, help="largest molecule for dft, heavy atoms")
    parser.add_argument("--n-materials", type=int, default=100, help="band-gap compositions for composition, prototype")
    parser.add_argument("--n-chgnet", type=int, default=20, help="compositions for chgnet (default 20)")
    parser.add_argument("--chgnet-max-atoms", type=int, default=10, help="largest prototype cell for chgnet, atoms")
    parser.add_argument("--chunk-size", type=int, default=8, help="chunk size of the chunked process variant")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed")
    parser.add_argument("--only", nargs="*", default=None, help="rung names to measure (default: all)")
    args = parser.parse_args(argv)

    rungs = molecule_rungs(args) + material_rungs(args)
    if args.only:
        rungs = [r for r in rungs if r.name in set(args.only)]
    results = []
    with common.Stopwatch.run() as total:
        for rung in rungs:
            results.append(measure(rung))
    report(results, args)
    common.console.print(f"total {total.wall_s:.0f} s")
    common.write_results(
        NAME,
        {
            "parameters": vars(args),
            "timeout_s": TIMEOUT_S,
            "total_wall_s": total.wall_s,
            "data": {"molecules": str(common.FREESOLV_CSV), "materials": str(common.BANDGAP_CSV)},
            "rungs": results,
        },
    )


if __name__ == "__main__":
    main()
