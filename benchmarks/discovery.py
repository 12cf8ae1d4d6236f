"""Discovery efficiency on public data: every arm, 20 seeds per cell, written to benchmarks/RESULTS.md.

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.discovery                 # everything (about an hour here)
    .venv/bin/python -m benchmarks.discovery --only freesolv --arms bo,bo-sf   # re-run some cells, merge, re-render
    .venv/bin/python -m benchmarks.discovery --render                          # only re-render RESULTS.md
    .venv/bin/python -m benchmarks.discovery --resummarise                     # re-summarise stored runs, re-render
    .venv/bin/python -m benchmarks.discovery --only lnp --arms bo,botorch-onehot --seeds 1 --lab-budget 10 \
        --results /tmp/smoke                                                   # a smoke run, kept out of the tables

Each dataset is one ``closedloop bench`` configuration (``DATASETS``; the equivalent command line is printed in
RESULTS.md). Results go to ``benchmarks/results/discovery_<name>.json``; a re-run of some arms replaces those arms'
runs and keeps the others. The data are copies of the public files in ``benchmarks/data/<name>/`` with their
SOURCE.txt, so a fresh clone can run this without ``/work/shared``.

``botorch-onehot`` (BoTorch on one-hot categories and scaled numbers) runs by default where its inputs differ from
``botorch``'s, the cells whose id columns are reagent SMILES in a grid (``smiles_grid``); elsewhere it proposes what
botorch proposes, seed for seed (``orchestrator/policy/planners/botorch_onehot.py``). A cell with several measured
objectives runs its documented primary one and lists the others under ``other_objectives``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

from benchmarks.discovery_report import dataset_table, render

ROOT = Path(__file__).resolve().parent
DATA = ROOT / "data"
RESULTS = ROOT / "results"
PV = DATA / "pvlab_benchmarking_liang"
OLYMPUS = DATA / "olympus_reactions"
LAB_COST_S = 86400.0  # one lab-day per experiment, synthesis or preparation included (a nominal, stated cost)
SEEDS, BUDGET, BATCH = 20, 50, 5

DATASETS: dict[str, dict] = {
    "freesolv": dict(pool=DATA / "freesolv/FreeSolv_gauche.csv", id_cols=["smiles"],
                     objective="target:expt:-12:0.5", rungs=["gaff=calc:3600"],
                     title="FreeSolv hydration free energy, target −12 ± 0.5 kcal/mol; GAFF `calc` as a rung (1 CPU-h)"),
    "buchwald_hartwig": dict(pool=DATA / "buchwald_hartwig_ahneman/experiment_index.csv",
                             id_cols=["Aryl_halide_SMILES", "Additive_SMILES", "Base_SMILES", "Ligand_SMILES"],
                             objective="maximize:yield", rungs=[], smiles_grid=True,
                             title="Buchwald–Hartwig C–N coupling (Ahneman 2018), maximize yield"),
    "bandgap": dict(pool=DATA / "bandgap_expt_vs_pbe/expt_vs_pbe_bandgap_pairs.csv", id_cols=["composition"],
                    objective="target:expt_gap_eV_median:1.4:0.1", rungs=["pbe=pbe_gap_eV_MP:3600"],
                    title="Experimental band gap, target 1.4 ± 0.1 eV; Materials Project PBE gap as a rung (1 CPU-h)"),
    "esol": dict(pool=DATA / "esol_delaney/ESOL_delaney.csv", id_cols=["smiles"],
                 objective="maximize:measured log solubility in mols per litre",
                 rungs=["esol=ESOL predicted log solubility in mols per litre:0.01"],
                 title="ESOL aqueous solubility, maximize log S; Delaney's ESOL model as a rung (0.01 s)"),
    "crossed_barrel": dict(pool=PV / "Crossed_barrel_dataset.csv", id_cols=["n", "theta", "r", "t"],
                           objective="maximize:toughness", rungs=[], title="PV-Lab crossed barrel, maximize toughness"),
    "p3ht": dict(pool=PV / "P3HT_dataset.csv",
                 id_cols=["P3HT content (%)", "D1 content (%)", "D2 content (%)", "D6 content (%)", "D8 content (%)"],
                 objective="maximize:Conductivity (measured) (S/cm)", rungs=[],
                 title="PV-Lab P3HT/CNT films, maximize conductivity"),
    "agnp": dict(pool=PV / "AgNP_dataset.csv", id_cols=["QAgNO3(%)", "Qpva(%)", "Qtsc(%)", "Qseed(%)", "Qtot(uL/min)"],
                 objective="minimize:loss", rungs=[], title="PV-Lab silver nanoparticles, minimize spectral loss"),
    "perovskite": dict(pool=PV / "Perovskite_dataset.csv", id_cols=["CsPbI", "FAPbI", "MAPbI"],
                       objective="minimize:Instability index", rungs=[],
                       title="PV-Lab perovskite films, minimize instability index"),
    "autoam": dict(pool=PV / "AutoAM_dataset.csv",
                   id_cols=["Prime Delay", "Print Speed", "X Offset Correction", "Y Offset Correction"],
                   objective="maximize:Score", rungs=[], title="PV-Lab AutoAM 3D printing, maximize score"),
    "reductive_amination": dict(
        pool=OLYMPUS / "Reductive_Amination.csv",
        id_cols=["substrate", "AcOH_equiv", "TTIP_equiv", "solvent", "reaction_concentration_mM"],
        objective="maximize:percent_conversion", rungs=[],
        title="Olympus reductive amination of staurosporine (uHTE, 16 aldehydes × 48 conditions), maximize conversion"),
    "suzuki_cernak": dict(
        pool=OLYMPUS / "Suzuki_Cernak.csv", id_cols=["halide", "boronate", "conditions"],
        objective="maximize:conversion", rungs=[],
        title="Olympus Suzuki coupling informer library (uHTE, 8 halides × 10 boronates × 12 conditions), maximize "
              "conversion (142 of 960 reach 100 %: its top-1 % and top-5 % are those 142)"),
    "amide_coupling": dict(
        pool=OLYMPUS / "amide_coupling_hte.csv", id_cols=["amine", "acid", "condition"],
        objective="maximize:yield", rungs=[], smiles_grid=True,
        title="Olympus amide coupling HTE (3 amines × 3 acids as SMILES × 72 coded conditions), maximize yield"),
    "dye_lasers": dict(
        pool=OLYMPUS / "dye_lasers.csv", id_cols=["frag_a", "frag_b", "frag_c"],
        objective="maximize:peak_score", rungs=[], smiles_grid=True,
        other_objectives=["minimize:spectral_overlap", "maximize:fluo_rate"],
        title="Olympus organic laser dyes (3,458 pentamers from three SMILES fragments, computed), maximize peak score"),
    "lnp": dict(
        pool=DATA / "lnp_formulations/lnp_formulations.csv",
        id_cols=["drug_input", "solid_lipid", "solid_lipid_input", "liquid_lipid_input", "surfactant_input"],
        objective="maximize:drug_loading", rungs=[],
        other_objectives=["maximize:encap_efficiency", "minimize:particle_diameter"],
        title="Lipid nanoparticle formulations of CBD (Olympus lnp3, 768), maximize drug loading"),
}
"""Each cell: the pool, its id columns, the objective (a multi-objective set's first measurement in its Olympus
config, whose default goal it takes; the rest under ``other_objectives``), the rungs and a title."""
LLM_SUBSET = ("perovskite",)  # the llm arm costs seconds per step; run separately: --only perovskite --arms llm


def default_arms(name: str) -> list[str]:
    arms = ["random", "bo", "botorch"]
    if DATASETS[name].get("smiles_grid"):
        arms.append("botorch-onehot")
    if DATASETS[name]["rungs"]:
        arms += ["bo-sf", "cheap-first"]
    if name in LLM_SUBSET:
        arms.append("llm")
    return arms


def command_line(name: str, arms: list[str], seeds: int = SEEDS, budget: int = BUDGET, results: Path = RESULTS) -> str:
    d = DATASETS[name]
    parts = ["closedloop", "bench", "--pool", str(Path(d["pool"]).relative_to(ROOT.parent)),
             "--id-cols", ",".join(d["id_cols"]), "--objective", d["objective"]]
    for rung in d["rungs"]:
        parts += ["--rung", rung]
    parts += ["--lab-budget", str(budget), "--seeds", str(seeds), "--arms", ",".join(arms), "--batch", str(BATCH),
              "--lab-cost-s", f"{LAB_COST_S:g}", "--json", _shown(results / f"discovery_{name}.json")]
    return shlex.join(parts)


def _shown(path: Path) -> str:
    """A path as a command line in the repository root writes it."""
    path = Path(path).resolve()
    return str(path.relative_to(ROOT.parent)) if path.is_relative_to(ROOT.parent) else str(path)


def run_dataset(name: str, arms: list[str], seeds: int, workers: int, budget: int = BUDGET) -> dict:
    from orchestrator.bench import BenchConfig, parse_rung, run_bench

    d = DATASETS[name]
    config = BenchConfig(pool=str(d["pool"]), id_cols=tuple(d["id_cols"]), objective=d["objective"],
                         rungs=tuple(parse_rung(r) for r in d["rungs"]), lab_budget=budget, seeds=seeds,
                         arms=tuple(arms), batch=BATCH, lab_cost_s=LAB_COST_S, workers=workers)
    return run_bench(config)


def code_commit() -> str:
    """The checked-out commit (short hash, ``+dirty`` when the tree has changes), or ``"unknown"`` outside git."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()

    try:
        dirty = git("status", "--porcelain", "--", "orchestrator", "simulators", "rewards")
        return git("rev-parse", "--short", "HEAD") + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def merge(old: dict | None, new: dict, commit: str = "unknown") -> dict:
    """Keep the old report's arms that were not re-run, and recompute the summary over all runs.

    ``arm_sources`` records, per re-run arm, the code commit and date it was measured at, since the arms of one cell
    may come from different commits; ``date``, ``machine`` and ``code_commit`` stay those of the first run.
    """
    if old is None:
        return {**new, "code_commit": commit}
    sources = {**old.get("arm_sources", {}),
               **{arm: {"code_commit": commit, "date": new.get("date")} for arm in new["config"]["arms"]}}
    rerun = set(new["config"]["arms"])
    runs = [r for r in old["runs"] if r["arm"] not in rerun] + new["runs"]
    arms = [a for a in old["config"]["arms"] if a not in rerun] + list(new["config"]["arms"])
    report = summarised({**new["config"], "arms": arms}, runs)
    report["wall_s_total"] = old.get("wall_s_total", 0.0) + new.get("wall_s_total", 0.0)
    for key in ("date", "machine", "code_commit"):
        if key in old:
            report[key] = old[key]
    report["arm_sources"] = sources
    return report


def resummarise(report: dict) -> dict:
    """The report with its summary recomputed from its stored runs by today's ``summarise_runs`` (a new measure,
    such as lab experiments to a target's window, over runs already made); no run is repeated, and each arm keeps
    the commit and date it was measured at."""
    fresh = summarised(report["config"], report["runs"])
    pool = local_copy(report["config"]["pool"])
    if pool.is_relative_to(ROOT.parent):  # the repository's path, not the checkout's that ran it
        fresh["config"]["pool"] = str(pool.relative_to(ROOT.parent))
    for key in ("wall_s_total", "date", "machine", "code_commit", "arm_sources"):
        if key in report:
            fresh[key] = report[key]
    return fresh


def summarised(config_fields: dict, runs: list[dict]) -> dict:
    """``summarise_runs`` over stored runs (JSON dicts) on the pool the config names."""
    import tempfile

    from orchestrator.bench import BenchConfig, RunRecord, load_problem, summarise_runs

    config = BenchConfig.model_validate({**config_fields, "pool": str(local_copy(config_fields["pool"]))})
    with tempfile.TemporaryDirectory() as workdir:
        problem = load_problem(config, Path(workdir))
        records = [RunRecord(arm=r["arm"], seed=r["seed"], order=r["order"], wall_s=r["wall_s"],
                             measured=r.get("measured") or [problem.pool.ids[i] for i in r["order"]],
                             rung_cost_s=r["rung_cost_s"], notes=r["notes"],
                             n_rung_evaluations=r.get("n_rung_evaluations", len(problem) if r["rung_cost_s"] else 0))
                   for r in runs]
        return summarise_runs(problem, records)


def local_copy(pool: str) -> Path:
    """A report's pool path in this checkout: reports record the absolute path of the checkout that ran them.

    Example:
        >>> local_copy("/tmp/elsewhere/benchmarks/data/esol_delaney/ESOL_delaney.csv") == DATA / "esol_delaney/ESOL_delaney.csv"
        True
    """
    marker = "benchmarks/data/"
    return DATA / pool.split(marker, 1)[1] if marker in pool else Path(pool)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", default=None, help="datasets to run (default: all)")
    parser.add_argument("--arms", default=None, help="comma-separated arms (default: each dataset's set)")
    parser.add_argument("--seeds", type=int, default=SEEDS)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--lab-budget", type=int, default=BUDGET,
                        help=f"lab experiments per run (default {BUDGET}; another needs --results)")
    parser.add_argument("--results", type=Path, default=RESULTS,
                        help="where the JSON goes; a folder other than benchmarks/results leaves RESULTS.md alone "
                             "and prints the tables instead")
    parser.add_argument("--render", action="store_true", help="only re-render RESULTS.md from the JSON files")
    parser.add_argument("--resummarise", action="store_true",
                        help="recompute each JSON's summary from its stored runs (no new runs), then re-render")
    args = parser.parse_args(argv)
    results = args.results.resolve()
    is_tables = results == RESULTS.resolve()
    unknown = sorted(set(args.only or []) - set(DATASETS))
    if unknown:
        parser.error(f"--only: unknown data set(s) {unknown}; choose from {', '.join(DATASETS)}")
    if is_tables and args.lab_budget != BUDGET:
        parser.error(f"--lab-budget {args.lab_budget}: RESULTS.md's tables run at {BUDGET}; give --results DIR to "
                     "keep another budget's runs apart")
    results.mkdir(parents=True, exist_ok=True)
    commit = code_commit()  # taken before the runs: the code may change while they run
    if args.resummarise:
        for name in args.only or list(DATASETS):
            path = results / f"discovery_{name}.json"
            if path.exists():
                path.write_text(json.dumps(resummarise(json.loads(path.read_text())), indent=1) + "\n")
    elif not args.render:
        for name in args.only or list(DATASETS):
            arms = args.arms.split(",") if args.arms else default_arms(name)
            arms = [a for a in arms if a not in ("cheap-first", "bo-sf") or DATASETS[name]["rungs"]]
            print(f"== {name}: {command_line(name, arms, args.seeds, args.lab_budget, results)}", file=sys.stderr, flush=True)
            path = results / f"discovery_{name}.json"
            new = run_dataset(name, arms, args.seeds, args.workers, args.lab_budget)
            # read after the run, not before: another run may have re-run other arms of this cell meanwhile
            old = json.loads(path.read_text()) if path.exists() else None
            report = merge(old, new, commit)
            path.write_text(json.dumps(report, indent=1) + "\n")
            if not is_tables:
                print("\n".join([f"### {DATASETS[name]['title']}", "", *dataset_table(report), ""]))
    if is_tables:
        render(RESULTS, ROOT / "RESULTS.md", DATASETS, command_line)


if __name__ == "__main__":
    main()
