"""How well each molecule rung predicts FreeSolv's experimental hydration free energy, on all 642 molecules.

Data: FreeSolv v0.52 (Mobley & Guthrie, J Comput Aided Mol Des 28, 711 (2014)), the gauche copy
``freesolv/FreeSolv_gauche.csv`` of the shared data (provenance in its SOURCE.txt): ``expt`` is the experimental
hydration free energy and ``calc`` the GAFF alchemical free energy, both kcal/mol.

Every molecule goes through the rungs rdkit_descriptors, conformers and xtb (GFN2-xTB, ALPB water, the default; and
GBSA water for comparison) with ``LocalProcessExecutor(max_workers=2)`` and the ``SimulationCache``, kept in
``benchmarks/.cache/simulation_cache.sqlite`` so that a re-run is instant (``--cache PATH``; ``--fresh`` uses a
temporary file). The dataset's own GAFF column is served by a ``TableSimulator``, as the FreeSolv campaign does.
The dft rung is not measured: it has no solvation property, and the 642 molecules would take hours.

For every numeric property of every rung it reports the Spearman and Pearson correlation with ``expt`` (and the MAE
and mean signed error for the properties in kcal/mol). Then the view of the FreeSolv example campaign
(``campaigns/freesolv``: target −12 ± 0.5 kcal/mol): the Spearman correlation between −|x − target| of the rung and
of the experiment, raw for the kcal/mol properties and after a linear recalibration onto ``expt`` (least squares
over all 642 molecules, in sample) for every property, and where the molecules inside the experimental window rank.

Run from the repository root::

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.freesolv_rungs [--fresh] [--no-gbsa]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: python benchmarks/freesolv_rungs.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse  # noqa: E402
import tempfile  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from typing import Any  # noqa: E402

from benchmarks import common  # noqa: E402  (pins the thread variables before numpy loads)

NAME = "freesolv_rungs"
TARGET_KCAL_MOL = -12.0
TOLERANCE_KCAL_MOL = 0.5
TIMEOUT_S = 120.0
GAFF_COST_S = 3600.0  # what campaigns/freesolv charges for the table rung: about a CPU-hour of alchemical MD
KCAL_MOL_PROPERTIES = {"dg_solv_kcal_mol", "dg_hydration_gaff"}
WINDOW_TABLE_PROPERTIES = KCAL_MOL_PROPERTIES | {"logp", "tpsa", "n_hba", "dipole_debye"}


def rungs(args: argparse.Namespace, molecules, rows) -> list[tuple[str, Any]]:
    from simulators.registry import load_simulator

    gaff = {m.id: row["calc"] for m, row in zip(molecules, rows, strict=True)}
    built = [
        ("rdkit_descriptors", load_simulator("rdkit_descriptors")),
        ("conformers", load_simulator("conformers")),
        ("xtb (ALPB water)", load_simulator("xtb")),
    ]
    if args.gbsa:
        built.append(("xtb (GBSA water)", load_simulator("xtb", solvation_model="gbsa")))
    # the GBSA variant's gas-phase properties are the ALPB run's, computed again: report only its ΔG_solv
    built.append(
        (
            "GAFF calc (table)",
            load_simulator(
                "table", name="freesolv_gaff", values=gaff, property="dg_hydration_gaff", cost_s=GAFF_COST_S
            ),
        )
    )
    return built


def run_rungs(args: argparse.Namespace, molecules, rows, cache_path: Path) -> list[dict[str, Any]]:
    from simulators.cache import SimulationCache
    from simulators.executor_process import LocalProcessExecutor
    from simulators.ladder import evaluate_rung

    results = []
    with SimulationCache(cache_path) as cache, LocalProcessExecutor(max_workers=args.workers) as executor:
        for label, simulator in rungs(args, molecules, rows):
            common.console.print(f"[bold]{label}[/bold] ({simulator.name} {simulator.version}) on {len(molecules)}")
            with common.Stopwatch.run() as watch:
                pairs = evaluate_rung(simulator, molecules, cache=cache, executor=executor, timeout_s=TIMEOUT_S)
            observations = [obs for obs, _ in pairs]
            n_cached = sum(is_cached for _, is_cached in pairs)
            failed = [(m, o) for m, o in zip(molecules, observations, strict=True) if o.status == "failed"]
            common.console.print(f"  {watch.wall_s:.1f} s, {n_cached} from the cache, {len(failed)} failed")
            results.append(
                {
                    "label": label,
                    "simulator": simulator.name,
                    "version": simulator.version,
                    "parameters": simulator.parameters,
                    "properties": ["dg_solv_kcal_mol"] if "GBSA" in label else list(simulator.implemented_properties),
                    "observations": observations,
                    "wall_s": watch.wall_s,
                    "n_cached": n_cached,
                    "n_ok": len(observations) - len(failed),
                    "n_failed": len(failed),
                    "cost_model_s": sum(o.cost_s for o in observations),
                    "failures": [{"smiles": m.smiles, "id": m.id, "reason": o.reason} for m, o in failed],
                }
            )
    return results


def window_score(values, target: float = TARGET_KCAL_MOL):
    import numpy as np

    return -np.abs(np.asarray(values, dtype=float) - target)


def calibrated(x, y):
    """``x`` mapped onto ``y`` by ordinary least squares (in sample), over the finite pairs."""
    import numpy as np

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    slope, intercept = np.polyfit(x[keep], y[keep], 1)
    return intercept + slope * x


def window_view(x, expt, in_window) -> dict[str, Any]:
    """Spearman of −|x − target| with −|expt − target|, and the ranks (1 = closest) of the molecules in the window."""
    import numpy as np
    from scipy import stats

    x = np.asarray(x, dtype=float)
    keep = np.isfinite(x)
    score = window_score(x[keep])
    rho, p = stats.spearmanr(score, window_score(np.asarray(expt)[keep]))
    ranks = stats.rankdata(-score, method="average")  # 1 = predicted closest to the target
    hit_ranks = sorted(float(r) for r in ranks[np.asarray(in_window)[keep]])
    return {"n": int(keep.sum()), "spearman": float(rho), "spearman_p": float(p), "window_ranks": hit_ranks}


def analyse(results: list[dict[str, Any]], expt: list[float]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    import numpy as np

    in_window = [abs(e - TARGET_KCAL_MOL) <= TOLERANCE_KCAL_MOL for e in expt]
    correlations, windows = [], []
    for result in results:
        for prop in result["properties"]:
            x = [o.properties.get(prop, np.nan) if o.status == "ok" else np.nan for o in result["observations"]]
            if not np.isfinite(x).any():
                continue
            same_unit = prop in KCAL_MOL_PROPERTIES
            agree = common.agreement(x, expt, same_unit=same_unit)
            correlations.append({"rung": result["label"], "property": prop, **agree.as_dict()})
            row = {"rung": result["label"], "property": prop}
            if same_unit:
                row["raw"] = window_view(x, expt, in_window)
            row["calibrated"] = window_view(calibrated(x, expt), expt, in_window)
            windows.append(row)
    return correlations, windows


def report(results, correlations, windows, n_in_window: int, n_molecules: int) -> None:
    common.print_table(
        "Rungs on FreeSolv (through the process executor and the cache)",
        ["rung", "version", "ok", "failed", "from cache", "wall s", "cost model s"],
        [
            [r["label"], r["version"], r["n_ok"], r["n_failed"], r["n_cached"], r["wall_s"], r["cost_model_s"]]
            for r in results
        ],
    )
    common.print_table(
        "Agreement with the experimental hydration free energy (kcal/mol)",
        ["rung", "property", "n", "Spearman ρ", "Pearson r", "MAE", "mean signed error"],
        [
            [c["rung"], c["property"], c["n"], c["spearman"], c["pearson"], c["mae"], c["mean_signed_error"]]
            for c in correlations
        ],
        caption="MAE and signed error (rung − experiment) only where the property is in kcal/mol.",
    )
    rows = []
    for w in windows:
        if w["property"] not in WINDOW_TABLE_PROPERTIES:
            continue  # the JSON has every property
        raw, cal = w.get("raw"), w["calibrated"]
        rows.append(
            [
                w["rung"],
                w["property"],
                raw["spearman"] if raw else None,
                ", ".join(f"{r:.0f}" for r in raw["window_ranks"]) if raw else "—",
                cal["spearman"],
                ", ".join(f"{r:.0f}" for r in cal["window_ranks"]),
            ]
        )
    common.print_table(
        f"Target window {TARGET_KCAL_MOL:g} ± {TOLERANCE_KCAL_MOL:g} kcal/mol: Spearman of −|x − target| with the "
        "experiment's",
        ["rung", "property", "ρ raw", "window ranks raw", "ρ calibrated", "window ranks calibrated"],
        rows,
        caption=f"{n_in_window} of {n_molecules} molecules are inside the experimental window; their ranks (1 = "
        "predicted closest to the target) are listed. Calibrated = least-squares line onto expt over all molecules "
        "(in sample). Every property is in the JSON.",
    )
    failures = [(r["label"], f["smiles"], f["reason"]) for r in results for f in r["failures"]]
    if failures:
        common.print_table("Failed molecules", ["rung", "SMILES", "reason"], failures)


def main(argv: Sequence[str] | None = None) -> None:
    from vocabulary.domain import Molecule

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=common.CACHE_DIR / "simulation_cache.sqlite", help="SQLite file")
    parser.add_argument("--fresh", action="store_true", help="use a temporary cache, so everything is computed")
    parser.add_argument("--no-gbsa", dest="gbsa", action="store_false", help="skip the GBSA variant of xtb")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--n", type=int, default=None, help="first N molecules only (default: all 642)")
    args = parser.parse_args(argv)

    rows = common.load_freesolv()[: args.n]
    molecules = [Molecule.parse(row["smiles"]) for row in rows]
    expt = [row["expt"] for row in rows]
    with tempfile.TemporaryDirectory(prefix="closedloop-freesolv-") as folder:
        if args.fresh:
            cache_path = Path(folder) / "cache.sqlite"
        else:
            cache_path = args.cache
            cache_path.parent.mkdir(parents=True, exist_ok=True)
        with common.Stopwatch.run() as total:
            results = run_rungs(args, molecules, rows, cache_path)
    correlations, windows = analyse(results, expt)
    n_in_window = sum(abs(e - TARGET_KCAL_MOL) <= TOLERANCE_KCAL_MOL for e in expt)
    report(results, correlations, windows, n_in_window, len(molecules))
    common.console.print(f"total {total.wall_s:.0f} s")
    in_window = [
        {"iupac": row["iupac"], "smiles": row["smiles"], "expt": row["expt"], "calc": row["calc"]}
        for row in rows
        if abs(row["expt"] - TARGET_KCAL_MOL) <= TOLERANCE_KCAL_MOL
    ]
    common.write_results(
        NAME,
        {
            "parameters": {**{k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}},
            "data": str(common.FREESOLV_CSV),
            "n_molecules": len(molecules),
            "total_wall_s": total.wall_s,
            "target_window": {"target": TARGET_KCAL_MOL, "tolerance": TOLERANCE_KCAL_MOL, "molecules": in_window},
            "rungs": [{k: v for k, v in r.items() if k != "observations"} for r in results],
            "correlations": correlations,
            "window": windows,
        },
    )


if __name__ == "__main__":
    main()
