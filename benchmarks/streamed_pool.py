"""10^6-row pools in live campaigns (issue 17): peak RSS, time to the first dispatch, and each later planning step.

Two pools are generated in a temporary folder (the data files are never modified):

- **conditions**: the full factorial of 100 aryl halides × 100 additives × 10 bases × 10 ligands, as SMILES. The
  reagents are the Buchwald–Hartwig HTE set's (Ahneman et al., Science 2018; ``/work/shared/data/
  buchwald_hartwig_ahneman/SOURCE.txt``: 15 aryl halides, 22 additives, 3 bases, 4 ligands), extended with rdkit
  analogues (one H on a carbon replaced by F, Cl, CH3, OCH3 or CN) until each column has its count. The yield is
  synthetic: a seeded effect per reagent plus an aryl halide × ligand interaction, clipped to 0..100 %. Features are
  ``[space] features = "columns"``: Morgan fingerprints per reagent.
- **design table**: five continuous process parameters drawn uniformly, and a smooth synthetic yield.

Each is run as a user runs it, ``closedloop run SPEC --db DB --json``, in a subprocess with the bo planner and a
small lab budget. Peak RSS is the child's ``VmHWM`` (``benchmarks.memory``; resident file-backed pages count too); the
first dispatch is the first ``Dispatched`` event's time after the process started; a later planning step is the wall
time between one dispatch round and the next (observe, reward, learn, plan, screen, approve; the simulated lab's
clock is simulated, so it costs nothing here).

Run alone: ``OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.streamed_pool [--rows 1000000]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.memory import wait_with_peak_rss

DATA = Path("/work/shared/data/buchwald_hartwig_ahneman/experiment_index.csv")
REAGENT_COLUMNS = {"aryl_halide": ("Aryl_halide_SMILES", 100), "additive": ("Additive_SMILES", 100),
                   "base": ("Base_SMILES", 10), "ligand": ("Ligand_SMILES", 10)}
DESIGN_COLUMNS = ["temperature_c", "time_h", "concentration_m", "equivalents", "catalyst_mol_pct"]
GOALS = {"peak_rss_mb": 1024.0, "first_dispatch_s": 60.0, "later_step_s": 30.0}


# ------------------------------------------------------------------------------------------------ pools
def analogues(smiles: list[str], n: int) -> list[str]:
    """The given reagents, then rdkit analogues (an H on a carbon replaced by a substituent), ``n`` in all."""
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    seen = [Chem.MolToSmiles(Chem.MolFromSmiles(s)) for s in smiles]
    out = list(dict.fromkeys(seen))[:n]
    substituents = ["F", "Cl", "C", "OC", "C#N"]
    for substituent in substituents:
        for parent in list(out):
            mol = Chem.MolFromSmiles(parent)
            for atom in mol.GetAtoms():
                if len(out) >= n:
                    return out
                if atom.GetSymbol() != "C" or atom.GetTotalNumHs() == 0:
                    continue
                editable = Chem.RWMol(mol)
                fragment = Chem.MolFromSmiles(substituent)
                offset = editable.GetNumAtoms()
                for a in fragment.GetAtoms():
                    editable.AddAtom(Chem.Atom(a.GetAtomicNum()))
                for b in fragment.GetBonds():
                    editable.AddBond(b.GetBeginAtomIdx() + offset, b.GetEndAtomIdx() + offset, b.GetBondType())
                editable.AddBond(atom.GetIdx(), offset, Chem.BondType.SINGLE)
                try:
                    Chem.SanitizeMol(editable)
                except Exception:  # noqa: BLE001  (a valence rdkit refuses: try the next atom)
                    continue
                text = Chem.MolToSmiles(editable)
                if text not in out:
                    out.append(text)
    if len(out) < n:
        raise SystemExit(f"only {len(out)} analogues of {len(smiles)} reagents; need {n}")
    return out


def write_conditions_pool(path: Path, n_rows: int, seed: int = 0) -> dict[str, Any]:
    """The reagent factorial (first ``n_rows`` rows of it, shuffled) with a synthetic yield."""
    import pandas as pd

    source = pd.read_csv(DATA)
    reagents = {key: analogues(sorted(source[column].dropna().unique()), count)
                for key, (column, count) in REAGENT_COLUMNS.items()}
    sizes = [len(reagents[k]) for k in REAGENT_COLUMNS]
    rng = np.random.default_rng(seed)
    effects = {k: rng.normal(0, 12, len(reagents[k])) for k in REAGENT_COLUMNS}
    interaction = rng.normal(0, 8, (sizes[0], sizes[3]))
    rows = rng.permutation(int(np.prod(sizes)))[:n_rows]
    codes = np.unravel_index(rows, sizes)
    with open(path, "w") as handle:
        handle.write(",".join([c for c, _ in REAGENT_COLUMNS.values()] + ["yield"]) + "\n")
        for start in range(0, n_rows, 100_000):
            part = [c[start:start + 100_000] for c in codes]
            value = 40 + sum(effects[k][p] for k, p in zip(REAGENT_COLUMNS, part, strict=True))
            value = np.clip(value + interaction[part[0], part[3]], 0, 100)
            frame = pd.DataFrame({column: np.asarray(reagents[key], dtype=object)[p]
                                  for (key, (column, _)), p in zip(REAGENT_COLUMNS.items(), part, strict=True)})
            frame["yield"] = np.round(value, 3)
            frame.to_csv(handle, header=False, index=False)
    return {"n_rows": n_rows, "reagents": dict(zip(REAGENT_COLUMNS, sizes, strict=True)),
            "bytes": path.stat().st_size}


def write_design_table(path: Path, n_rows: int, seed: int = 0) -> dict[str, Any]:
    """Five continuous parameters, uniform in their ranges, and a smooth yield with one optimum."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    low = np.array([20.0, 0.5, 0.05, 1.0, 0.5])
    high = np.array([140.0, 48.0, 2.0, 4.0, 10.0])
    optimum = rng.uniform(0.2, 0.8, 5)
    with open(path, "w") as handle:
        handle.write(",".join([*DESIGN_COLUMNS, "yield"]) + "\n")
        for start in range(0, n_rows, 100_000):
            u = rng.uniform(size=(min(100_000, n_rows - start), 5))
            value = 95 * np.exp(-((u - optimum) ** 2 / 0.08).sum(axis=1)) + 3 * np.sin(9 * u[:, 0])
            frame = pd.DataFrame(np.round(low + u * (high - low), 4), columns=DESIGN_COLUMNS)
            frame["yield"] = np.round(np.clip(value, 0, 100), 3)
            frame.to_csv(handle, header=False, index=False)
    return {"n_rows": n_rows, "bytes": path.stat().st_size}


def write_spec(path: Path, pool: Path, columns: list[str], *, features: str, lab_budget: int) -> None:
    path.write_text(f"""[campaign]
name = "{path.stem}"
kind = "conditions"
seed = 0

[objective]
property = "yield"
unit = "%"
direction = "maximize"

[space]
pool = "{pool}"
columns = {json.dumps(columns)}
features = "{features}"

[lab]
driver = "simlab"
oracle_column = "yield"
noise_sd = 1.0

[budget]
lab_experiments = {lab_budget}

[planner]
main = "bo"
batch_size = 5
n_initial = 5
""")


# ------------------------------------------------------------------------------------------------ running
def run_campaign(spec: Path, db: Path, env: dict[str, str], command: list[str]) -> dict[str, Any]:
    """``closedloop run SPEC --db DB --json`` in a child; its peak RSS, and the dispatch rounds' times."""
    from orchestrator.ledger import Ledger

    out_path, err_path = db.with_suffix(".out"), db.with_suffix(".err")
    started_at = datetime.now(UTC)
    started = time.perf_counter()
    with open(out_path, "w") as out, open(err_path, "w") as err:
        process = subprocess.Popen([*command, "run", str(spec), "--db", str(db), "--json"], env=env, stdout=out,
                                   stderr=err)
        _, peak_rss = wait_with_peak_rss(process)  # VmHWM: ru_maxrss would include this parent's RSS at the fork
    wall_s = time.perf_counter() - started
    stdout, stderr = out_path.read_text(), err_path.read_text()
    if process.returncode != 0:
        raise SystemExit(f"closedloop run {spec.name} exited {process.returncode}:\n{stderr[-3000:]}")
    summary = json.loads(stdout)
    ledger = Ledger.open(db)
    try:
        events = ledger.events(summary["campaign_id"])
    finally:
        ledger.close()
    rounds: dict[int, float] = {}
    for event in events:
        if event.type == "Dispatched":
            at = event.at if event.at.tzinfo else event.at.replace(tzinfo=UTC)
            rounds.setdefault(event.payload["iteration"], (at - started_at).total_seconds())
    times = [rounds[k] for k in sorted(rounds)]
    steps = [round(b - a, 2) for a, b in zip(times, times[1:], strict=False)]
    return {"peak_rss_mb": round(peak_rss, 1), "first_dispatch_s": round(times[0], 2) if times else None,
            "later_steps_s": steps, "later_step_s": max(steps) if steps else None, "wall_s": round(wall_s, 1),
            "n_lab": summary["n_lab"], "n_events": len(events), "stop_reason": summary.get("stop_reason"),
            "best": (summary.get("best") or {}).get("value")}


def measure(work: Path, *, n_rows: int = 1_000_000, lab_budget: int = 20, env: dict[str, str] | None = None,
            command: list[str] | None = None) -> dict[str, Any]:
    """Generate both pools in ``work`` and run a campaign on each; the numbers and whether each goal is met."""
    env = env or {**os.environ, "OMP_NUM_THREADS": "1"}
    command = command or [str(Path(sys.executable).with_name("closedloop"))]
    results: dict[str, Any] = {"n_rows": n_rows, "lab_budget": lab_budget, "goals": GOALS}
    cases = {
        "conditions": (write_conditions_pool, [c for c, _ in REAGENT_COLUMNS.values()], "columns"),
        "design_table": (write_design_table, DESIGN_COLUMNS, "parameters"),
    }
    for name, (write, columns, features) in cases.items():
        pool, spec = work / f"{name}.csv", work / f"{name}.toml"
        generated_at = time.perf_counter()
        info = write(pool, n_rows)
        info["generate_s"] = round(time.perf_counter() - generated_at, 1)
        write_spec(spec, pool, columns, features=features, lab_budget=lab_budget)
        run = run_campaign(spec, work / f"{name}.db", env, command)
        run["is_met"] = {key: run[key] is not None and run[key] <= goal for key, goal in GOALS.items()}
        results[name] = {"pool": info, "features": features, **run}
        pool.unlink()
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--lab-budget", type=int, default=20)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="streamed-pool-") as tmp:
        results = measure(Path(tmp), n_rows=args.rows, lab_budget=args.lab_budget)
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text)


if __name__ == "__main__":
    main()
