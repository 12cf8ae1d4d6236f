"""What the materials ladder predicts about measured band gaps.

Data: the experimental vs Materials Project PBE band-gap pairs of the shared data
(``bandgap_expt_vs_pbe/expt_vs_pbe_bandgap_pairs.csv``, 494 compositions; provenance in its SOURCE.txt: Zhuo,
Mansouri Tehrani & Brgoch, J Phys Chem Lett 9, 1668 (2018), joined with the Materials Project non-metals of the
roost repository). ``expt_gap_eV_median`` is the lab outcome, ``pbe_gap_eV_MP`` the reference cheap fidelity.

The rungs run through ``LocalProcessExecutor(max_workers=2)``, with the per-process caches the ladder relies on (the
prototype search is shared by the prototype and chgnet rungs):

- composition (rung 0) on every composition: electronegativity spread and mean, max ionic character, metal
  fractions, charge balance;
- prototype (rung 1) on every composition; it places only the binary and ternary stoichiometries it has prototypes
  for: Ewald energy, volume and bond-valence misfit of the best prototype;
- chgnet (rung 2) on a seeded sample (``--n-chgnet``, default 60) of the compositions whose prototype cell has at
  most ``--chgnet-max-atoms`` (10) atoms: energy per atom after relaxation, volume, magnetic moment.

For every numeric property it reports the Spearman (and Pearson) correlation with the experimental gap over the
compositions the rung handled, next to the PBE gap's correlation on the same compositions; success and failure
counts with the failure reasons; and the measured wall seconds against the cost model's.

Run from the repository root::

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.bandgap_ladder [--n-chgnet 60]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: python benchmarks/bandgap_ladder.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from typing import Any  # noqa: E402

from benchmarks import common  # noqa: E402  (pins the thread variables before numpy loads)

NAME = "bandgap_ladder"
TIMEOUT_S = 300.0
WARMUP_FORMULAS = ("NaCl", "MgO")  # not in the pairs file; they make both workers import the rung's backend


def parse_all(rows):
    from vocabulary.domain import InvalidCandidate, Material

    parsed, unreadable = [], []
    for row in rows:
        try:
            parsed.append((Material.parse(row["composition"]), row))
        except InvalidCandidate as exc:
            unreadable.append({"composition": row["composition"], "reason": str(exc)})
    return parsed, unreadable


def chgnet_sample(parsed, n: int, max_atoms: int, seed: int):
    """Compositions whose best prototype cell has at most ``max_atoms`` atoms, ``n`` of them drawn with ``seed``."""
    from simulators.structures import best_prototype_structure

    eligible = []
    for material, row in parsed:
        try:
            _, structure = best_prototype_structure(material)
        except Exception:  # no prototype fits; the prototype rung reports why
            continue
        if len(structure) <= max_atoms:
            eligible.append((material, row))
    return common.sample(eligible, n, seed), len(eligible)


def run_rung(executor, simulator, pairs) -> dict[str, Any]:
    from vocabulary.domain import Material

    warmup = [Material.parse(f) for f in WARMUP_FORMULAS]
    with common.Stopwatch.run() as warm:
        executor.map_evaluate(simulator, warmup, timeout_s=TIMEOUT_S)
    materials = [m for m, _ in pairs]
    common.console.print(f"[bold]{simulator.name}[/bold] ({simulator.version}) on {len(materials)} compositions")
    with common.Stopwatch.run() as watch:
        observations = executor.map_evaluate(simulator, materials, timeout_s=TIMEOUT_S)
    failed = [(m, o) for m, o in zip(materials, observations, strict=True) if o.status == "failed"]
    common.console.print(f"  {watch.wall_s:.1f} s, {len(failed)} failed")
    return {
        "simulator": simulator.name,
        "version": simulator.version,
        "parameters": simulator.parameters,
        "properties": list(simulator.implemented_properties),
        "pairs": pairs,
        "observations": observations,
        "n": len(materials),
        "n_ok": len(materials) - len(failed),
        "n_failed": len(failed),
        "warmup_s": warm.wall_s,
        "wall_s": watch.wall_s,
        "load_before": watch.load_before,
        "load_after": watch.load_after,
        "cost_model_s": sum(o.cost_s for o in observations),
        "failure_reasons": common.failure_summary(
            (common.failure_kind(o.reason, m.id, m.formula) for m, o in failed), width=150
        ),
        "failures": [{"composition": m.formula, "reason": o.reason} for m, o in failed],
    }


def analyse(result: dict[str, Any]) -> list[dict[str, Any]]:
    import numpy as np

    rows = []
    ok = [(o, row) for (_, row), o in zip(result["pairs"], result["observations"], strict=True) if o.status == "ok"]
    for prop in result["properties"]:
        have = [(o.properties[prop], row) for o, row in ok if prop in o.properties]
        if len(have) < 3:
            continue
        x = np.array([v for v, _ in have])
        expt = np.array([row["expt_gap_ev"] for _, row in have])
        pbe = np.array([row["pbe_gap_ev"] for _, row in have])
        agree = common.agreement(x, expt)
        reference = common.agreement(pbe, expt, same_unit=True)
        rows.append(
            {
                "rung": result["simulator"],
                "property": prop,
                **agree.as_dict(),
                "pbe_spearman_same_subset": reference.spearman,
                "pbe_mae_same_subset": reference.mae,
            }
        )
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    from simulators.executor_process import LocalProcessExecutor
    from simulators.registry import load_simulator

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-chgnet", type=int, default=60, help="compositions for the chgnet rung (default 60)")
    parser.add_argument("--chgnet-max-atoms", type=int, default=10, help="largest prototype cell for chgnet, atoms")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the chgnet sample")
    parser.add_argument("--n", type=int, default=None, help="first N compositions only (default: all 494)")
    parser.add_argument("--tag", default="", help="suffix of the result file: results/bandgap_ladder_TAG.json")
    args = parser.parse_args(argv)

    rows = common.load_bandgap()[: args.n]
    parsed, unreadable = parse_all(rows)
    chgnet_pairs, n_chgnet_eligible = chgnet_sample(parsed, args.n_chgnet, args.chgnet_max_atoms, args.seed)

    results = []
    with common.Stopwatch.run() as total, LocalProcessExecutor(max_workers=args.workers) as executor:
        results.append(run_rung(executor, load_simulator("composition"), parsed))
        results.append(run_rung(executor, load_simulator("prototype"), parsed))
        results.append(run_rung(executor, load_simulator("chgnet"), chgnet_pairs))

    reference = common.agreement([r["pbe_gap_ev"] for r in rows], [r["expt_gap_ev"] for r in rows], same_unit=True)
    correlations = [row for result in results for row in analyse(result)]

    common.print_table(
        "Materials rungs on the band-gap compositions (LocalProcessExecutor, 2 workers)",
        ["rung", "version", "n", "ok", "failed", "wall s", "cost model s", f"model/(wall×{args.workers})", "warm-up s"],
        [
            [r["simulator"], r["version"], r["n"], r["n_ok"], r["n_failed"], r["wall_s"], r["cost_model_s"],
             r["cost_model_s"] / (r["wall_s"] * args.workers), r["warmup_s"]]
            for r in results
        ],
        caption=f"{len(unreadable)} of {len(rows)} compositions could not be parsed. chgnet: {len(chgnet_pairs)} drawn "
        f"from the {n_chgnet_eligible} with a prototype cell of at most {args.chgnet_max_atoms} atoms. Warm-up: "
        f"{', '.join(WARMUP_FORMULAS)} first, so worker imports are not in the wall time. The cost model is in "
        "single-core seconds, hence the comparison with wall × workers.",
    )
    common.print_table(
        "Reference: the PBE gap (Materials Project) against the experimental gap, eV",
        ["n", "Spearman ρ", "Pearson r", "MAE eV", "mean signed error eV"],
        [[reference.n, reference.spearman, reference.pearson, reference.mae, reference.mean_signed_error]],
    )
    common.print_table(
        "Spearman ρ of each property with the experimental gap (over the compositions the rung handled)",
        ["rung", "property", "n", "Spearman ρ", "p", "Pearson r", "PBE ρ, same subset"],
        [
            [c["rung"], c["property"], c["n"], c["spearman"], c["spearman_p"], c["pearson"],
             c["pbe_spearman_same_subset"]]
            for c in correlations
        ],
    )
    failure_rows = [(r["simulator"], reason, n) for r in results for reason, n in r["failure_reasons"]]
    if failure_rows:
        common.print_table("Failure reasons (grouped)", ["rung", "reason", "n"], failure_rows)
    common.console.print(f"total {total.wall_s:.0f} s")
    common.write_results(
        f"{NAME}_{args.tag}" if args.tag else NAME,
        {
            "parameters": vars(args),
            "data": str(common.BANDGAP_CSV),
            "n_compositions": len(rows),
            "unreadable": unreadable,
            "n_chgnet_eligible": n_chgnet_eligible,
            "total_wall_s": total.wall_s,
            "pbe_reference": reference,
            "rungs": [{k: v for k, v in r.items() if k not in ("observations", "pairs")} for r in results],
            "chgnet_sample": [m.formula for m, _ in chgnet_pairs],
            "correlations": correlations,
        },
    )


if __name__ == "__main__":
    main()
