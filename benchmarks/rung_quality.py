"""Does the ladder policy keep its promises on rungs it has never seen? A sweep over synthetic rungs of known quality.

The discovery tables test the ladder on three real rungs (GAFF, Delaney's model, PBE), and a held-out data set will
bring a fourth. This benchmark asks the issue-16 questions of the policy itself, on rungs whose quality is set by
construction, so that no public rung's luck decides the answer:

- with an informative rung, is the ``bo`` campaign never worse than measuring in the rung's order (``cheap-first``)
  and never worse than bo without the rung (``bo-sf``)?
- with an uninformative rung, does it cost no more than single fidelity?

For each data set's lab column ``y`` (over the pool, one value per candidate), a rung is drawn afresh for every seed
of a cell (from a fixed seed per cell and seed), so a cell measures a rung *quality*, not one draw's luck:

- ``same unit``:  ``r = y + q·sd(y)·ε``               (a good simulator in the lab's unit, with noise)
- ``other unit``: ``r = 0.6·y − 1.5·sd(y) + 0.6·q·sd(y)·ε``  (the same ranking quality, a biased scale and offset,
  as a PBE gap or a raw solvation energy has)
- ``noise``:      ``r = sd(y)·ε``                    (uninformative)

with ``ε`` standard normal and ``q`` in 0.25, 0.5, 1 (a Pearson correlation with the lab of about 0.97, 0.89 and
0.71; ρ in the table is the mean Spearman correlation over the draws). Everything else is the discovery bench's configuration (budget 50 in batches of 5, 20 seeds, the rung costing
1 CPU-h). The data are the copies in ``benchmarks/data`` (provenance in each SOURCE.txt); the synthetic column is
added in a temporary copy, the files are never written.

    OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.rung_quality          # about 11 min here
    .venv/bin/python -m benchmarks.rung_quality --render                  # only re-write the markdown

Writes ``benchmarks/results/rung_quality.json`` and ``benchmarks/RESULTS.rung_quality.md``.
"""

from __future__ import annotations

import tempfile
import zlib
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results" / "rung_quality.json"
MARKDOWN = ROOT / "RESULTS.rung_quality.md"
ARMS = ("bo", "bo-sf", "cheap-first")
SEEDS, BUDGET, BATCH, RUNG_COST_S, LAB_COST_S = 20, 50, 5, 3600.0, 86400.0
NOISE_SEEDS = 100  # a pure-noise rung's cold start is another random draw than bo-sf's: 20 seeds cannot average it
NOISE_LEVELS = (0.25, 0.5, 1.0)
GAP_SHARE = 0.3  # rows with empty rung cells: a cheap column computed for most candidates, not all
GAP_MODELS = (("same unit", 0.5), ("noise", 1.0))
OTHER_UNIT_SCALE, OTHER_UNIT_OFFSET_SD = 0.6, -1.5
INFORMATIVE_SPEARMAN = 0.3  # the learn node's own bar for "the rung ranks the lab's values"
RUNG_COLUMN = "synthetic_rung"
PROBLEMS: dict[str, dict] = {  # the discovery bench's data sets with a lab column, and one more direction
    "freesolv target −12": dict(data="freesolv", objective="target:expt:-12:0.5"),
    "freesolv minimise": dict(data="freesolv", objective="minimize:expt"),
    "esol maximise": dict(data="esol", objective="maximize:measured log solubility in mols per litre"),
    "bandgap target 1.4": dict(data="bandgap", objective="target:expt_gap_eV_median:1.4:0.1"),
    # a descriptor pool (Matérn, the rung as a GP input) to maximise; it has no real rung, so only synthetic ones
    "crossed barrel maximise": dict(data="crossed_barrel", objective="maximize:toughness"),
}


def rung_models() -> list[tuple[str, float]]:
    """(model, q) for every cell of one problem: both units at every noise level, then pure noise."""
    return [(model, q) for model in ("same unit", "other unit") for q in NOISE_LEVELS] + [("noise", 1.0)]


def synthetic_pool(source: Path, id_cols: list[str], value_col: str, model: str, q: float, seed: int,
                   out: Path, gap: float = 0.0) -> float:
    """Write ``source``'s rows with a value plus a ``synthetic_rung`` column to ``out``; returns its Spearman ρ (over
    the candidates it has a value for). With ``gap``, that share of candidates (drawn after the rung's noise, so the
    values the rung keeps are the gap-free draw's) has an empty cell."""
    import numpy as np
    import pandas as pd
    from scipy.stats import spearmanr

    from orchestrator.bench.problem import canonical_ids

    frame = pd.read_csv(source)
    frame = canonical_ids(frame[pd.to_numeric(frame[value_col], errors="coerce").notna()], id_cols)
    per_id = frame.groupby(id_cols, sort=True)[value_col].mean()  # replicates share one rung value
    y = per_id.to_numpy(dtype=float)
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal(len(y))
    sd = float(np.std(y))
    if model == "same unit":
        rung = y + q * sd * noise
    elif model == "other unit":
        rung = OTHER_UNIT_SCALE * y + OTHER_UNIT_OFFSET_SD * sd + OTHER_UNIT_SCALE * q * sd * noise
    else:
        rung = sd * noise
    if gap:
        rung = np.where(rng.random(len(y)) < gap, np.nan, rung)
    frame = frame.merge(pd.DataFrame({RUNG_COLUMN: rung}, index=per_id.index).reset_index(), on=id_cols)
    frame.to_csv(out, index=False)
    known = np.isfinite(rung)
    return float(spearmanr(y[known], rung[known]).statistic)


def _run_seed(task: tuple[str, str, float, int, tuple[str, ...], float]) -> dict:
    """One seed of one cell: its own rung draw, every arm on it (a worker process)."""
    from benchmarks.discovery import DATASETS
    from orchestrator.bench import BenchConfig, parse_rung, run_bench

    problem, model, q, seed, arms, gap = task
    spec, data = PROBLEMS[problem], DATASETS[PROBLEMS[problem]["data"]]
    rung_seed = zlib.crc32(f"{problem} · {model} · q={q:g} · seed {seed}".encode())
    with tempfile.TemporaryDirectory(prefix="closedloop-rung-quality-") as workdir:
        pool = Path(workdir) / "pool.csv"
        rho = synthetic_pool(Path(data["pool"]), list(data["id_cols"]), spec["objective"].split(":")[1], model, q,
                             rung_seed, pool, gap)
        config = BenchConfig(pool=str(pool), id_cols=tuple(data["id_cols"]), objective=spec["objective"],
                             rungs=(parse_rung(f"synthetic={RUNG_COLUMN}:{RUNG_COST_S:g}"),), lab_budget=BUDGET,
                             seeds=1, first_seed=seed, arms=arms, batch=BATCH, lab_cost_s=LAB_COST_S, workers=1)
        report = run_bench(config, show_progress=False)
    return {"spearman": rho, "n_top1": report["n_top1"], "n_top5": report["n_top5"],
            "arms": {arm: {key: report["arms"][arm]["per_seed"][key][0]
                           for key in ("experiments_to_top1", "experiments_to_top5")} for arm in arms}}


def run_cells(cells: list[tuple[str, str, float]], seeds: int, workers: int,
              arms: tuple[str, ...] = ARMS, gap: float = 0.0) -> list[dict]:
    """Every (problem, model, q) cell over ``seeds`` seeds, each seed with its own rung draw, so that a cell measures
    the rung's quality rather than one draw's luck (a fixed draw would give every seed the same cold start)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    import numpy as np
    from rich.progress import Progress

    tasks = [(problem, model, q, seed, arms, gap) for problem, model, q in cells for seed in range(seeds)]
    with Progress() as progress, ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        bar = progress.add_task("rung-quality runs", total=len(tasks))
        results = []
        for result in pool.map(_run_seed, tasks):
            results.append(result)
            progress.advance(bar)
    out = []
    for k, (problem, model, q) in enumerate(cells):
        runs = results[k * seeds:(k + 1) * seeds]
        summary = {}
        for arm in arms:
            summary[arm] = {}
            for key in ("experiments_to_top1", "experiments_to_top5"):
                values = [r["arms"][arm][key] for r in runs]
                q1, median, q3 = np.percentile(values, [25, 50, 75])
                summary[arm][key] = {"median": float(median), "iqr": [float(q1), float(q3)], "per_seed": values}
        out.append({"problem": problem, "model": model, "q": q, "spearman": float(np.mean([r["spearman"] for r in runs])),
                    "n_top1": runs[0]["n_top1"], "n_top5": runs[0]["n_top5"], "arms": summary})
    return out


def run(seeds: int, workers: int) -> dict:
    from benchmarks.discovery import code_commit

    commit = code_commit()  # at the start: the code the runs use
    cells = [(problem, model, q) for problem in PROBLEMS for model, q in rung_models()]
    noise = [(problem, "noise", 1.0) for problem in PROBLEMS]
    return {"arms": list(ARMS), "seeds": seeds, "budget": BUDGET, "batch": BATCH, "code_commit": commit,
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "cells": run_cells(cells, seeds, workers),
            "noise_seeds": NOISE_SEEDS, "noise_cells": run_cells(noise, NOISE_SEEDS, workers, arms=("bo", "bo-sf")),
            **run_gaps(seeds, workers)}


def run_gaps(seeds: int, workers: int) -> dict:
    """The rows of ``GAP_MODELS`` with ``GAP_SHARE`` of the rung's cells empty (each seed its own draw)."""
    from benchmarks.discovery import code_commit

    cells = [(problem, model, q) for problem in PROBLEMS for model, q in GAP_MODELS]
    return {"gap_share": GAP_SHARE, "gap_code_commit": code_commit(),
            "gap_cells": run_cells(cells, seeds, workers, gap=GAP_SHARE)}


def _median(cell: dict, arm: str, metric: str = "experiments_to_top1") -> float:
    return cell["arms"][arm][metric]["median"]


def paired_ratio(cell: dict, arm: str, other: str) -> float:
    """Geometric mean over seeds of ``arm``'s lab experiments to a top-1 % candidate over ``other``'s on the same
    seed (the same rung draw): below 1, ``arm`` needs fewer."""
    import numpy as np

    mine = np.asarray(cell["arms"][arm]["experiments_to_top1"]["per_seed"], dtype=float)
    theirs = np.asarray(cell["arms"][other]["experiments_to_top1"]["per_seed"], dtype=float)
    return float(np.exp(np.mean(np.log(mine / theirs))))


def paired_interval(cell: dict, arm: str, other: str, z: float = 1.6449) -> tuple[float, float, float]:
    """``paired_ratio`` and its two-sided 90 % interval (the normal approximation on the mean log ratio)."""
    import numpy as np

    mine = np.asarray(cell["arms"][arm]["experiments_to_top1"]["per_seed"], dtype=float)
    theirs = np.asarray(cell["arms"][other]["experiments_to_top1"]["per_seed"], dtype=float)
    logs = np.log(mine / theirs)
    half = z * float(np.std(logs, ddof=1)) / np.sqrt(len(logs)) if len(logs) > 1 else float("inf")
    centre = float(np.mean(logs))
    return float(np.exp(centre)), float(np.exp(centre - half)), float(np.exp(centre + half))


def verdicts(cell: dict) -> tuple[str, str]:
    """(bo against cheap-first, bo against bo-sf): ``ok`` when bo needs no more lab experiments to a top-1 %
    candidate by the paired geometric mean over seeds (every seed counts, and each pair shares its rung draw, which
    a median of 20 capped counts does not), else that ratio.

    Only the promises the issue makes are judged: against cheap-first where the rung is informative, against bo-sf
    everywhere (with an uninformative rung the promise is "no more than single fidelity").
    """
    def judge(other: str) -> str:
        ratio = paired_ratio(cell, "bo", other)
        return "ok" if round(ratio, 2) <= 1.0 else f"{ratio:.2f}×"  # at the precision shown

    informative = cell["spearman"] >= INFORMATIVE_SPEARMAN
    return (judge("cheap-first") if informative else "—"), judge("bo-sf")


def markdown(results: dict) -> str:
    lines = ["# The ladder policy on synthetic rungs of known quality", "",
             "Median lab experiments to a top-1 % candidate (top-5 % in brackets), 20 seeds, budget 50 in batches of 5; "
             "a run that never hits counts 51. Every seed draws its own rung of the row's kind (`benchmarks/"
             "rung_quality.py` says how); ρ is the mean Spearman correlation of those rungs with the lab over the pool. "
             "The verdict columns judge the issue's promises by the paired geometric mean over seeds of bo's lab "
             "experiments over the other arm's (a pair shares its rung draw): `ok` when bo needs no more (to two decimals), else the "
             "ratio. Regenerate with `OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.rung_quality`.", "",
             f"Each arm a campaign (`closedloop bench`), measured at commit {results['code_commit']} on "
             f"{results['date']}.", "",
             "| problem | rung | q | ρ | bo | bo-sf | cheap-first | bo vs cheap-first | bo vs bo-sf |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    tally = {"cheap-first": [0, 0], "bo-sf": [0, 0]}
    for cell in results["cells"]:
        shown = [f"{_median(cell, a):g} ({_median(cell, a, 'experiments_to_top5'):g})" for a in results["arms"]]
        against_cheap, against_sf = verdicts(cell)
        for key, verdict in (("cheap-first", against_cheap), ("bo-sf", against_sf)):
            if verdict != "—":
                tally[key][0] += verdict == "ok"
                tally[key][1] += 1
        lines.append(f"| {cell['problem']} | {cell['model']} | {cell['q']:g} | {cell['spearman']:.2f} | "
                     + " | ".join(shown) + f" | {against_cheap} | {against_sf} |")
    lines += ["", f"bo needs no more lab experiments than cheap-first on {tally['cheap-first'][0]} of "
              f"{tally['cheap-first'][1]} rows with an informative rung (ρ ≥ {INFORMATIVE_SPEARMAN}), and no more "
              f"than bo-sf on {tally['bo-sf'][0]} of {tally['bo-sf'][1]} rows (paired geometric means).", ""]
    if results.get("noise_cells"):
        lines += _noise_table(results)
    if results.get("gap_cells"):
        lines += _gap_table(results)
    return "\n".join(lines)


def _gap_table(results: dict) -> list[str]:
    """Rows whose rung has empty cells, against the same rung without them (the first table's row)."""
    share = results["gap_share"]
    lines = [f"## Rungs with {share:.0%} of their cells empty", "",
             f"A cheap column is often computed for most candidates, not all. The same rung draws as the rows above, "
             f"with {share:.0%} of the candidates' cells emptied (each seed its own draw; cheap-first measures those "
             "last). A candidate without a rung value climbs on without it (orchestrator/DECISIONS.md, \"A table "
             "rung's empty cell\"). Paired geometric means over the seeds, and the same ratio without gaps. "
             f"Measured at commit {results.get('gap_code_commit', results['code_commit'])}.", "",
             "| problem | rung | q | ρ | bo | bo-sf | cheap-first | bo vs cheap-first (no gaps) | "
             "bo vs bo-sf (no gaps) |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    whole = {(c["problem"], c["model"], c["q"]): c for c in results["cells"]}
    for cell in results["gap_cells"]:
        base = whole.get((cell["problem"], cell["model"], cell["q"]))
        ratios = []
        for other in ("cheap-first", "bo-sf"):
            then = f" ({paired_ratio(base, 'bo', other):.2f}×)" if base else ""
            ratios.append(f"{paired_ratio(cell, 'bo', other):.2f}×{then}")
        shown = [f"{_median(cell, a):g} ({_median(cell, a, 'experiments_to_top5'):g})" for a in results["arms"]]
        lines.append(f"| {cell['problem']} | {cell['model']} | {cell['q']:g} | {cell['spearman']:.2f} | "
                     + " | ".join(shown) + " | " + " | ".join(ratios) + " |")
    return lines + [""]


def _noise_table(results: dict) -> list[str]:
    """The pure-noise rows again over ``noise_seeds`` seeds, bo against bo-sf with a 90 % interval."""
    n = results["noise_seeds"]
    lines = [f"## Pure-noise rungs over {n} seeds", "",
             f"A noise rung's cold start is a random draw other than bo-sf's, so a 20-seed ratio above carries that "
             f"draw's luck. The same rows over seeds 0–{n - 1}, bo and bo-sf only: median lab experiments to a "
             f"top-1 % candidate and the paired geometric mean of bo over bo-sf with its 90 % interval (normal "
             f"approximation on the mean log ratio). Measured at commit "
             f"{results.get('noise_code_commit', results['code_commit'])}.", "",
             "| problem | bo | bo-sf | bo vs bo-sf | 90 % interval |", "| --- | ---: | ---: | ---: | --- |"]
    for cell in results["noise_cells"]:
        ratio, low, high = paired_interval(cell, "bo", "bo-sf")
        lines.append(f"| {cell['problem']} | {_median(cell, 'bo'):g} | {_median(cell, 'bo-sf'):g} | {ratio:.2f}× | "
                     f"{low:.2f}–{high:.2f} |")
    return lines + [""]


def main(argv: list[str] | None = None) -> None:
    from benchmarks.common import run_or_render

    run_or_render(__doc__, RESULTS, MARKDOWN, run, markdown, seeds=SEEDS, argv=argv)


if __name__ == "__main__":
    main()
