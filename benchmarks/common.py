"""Shared helpers for the benchmark scripts: data loading, timing, statistics, rich tables and JSON results.

Every script pins one BLAS/OpenMP thread before numpy is imported (``pin_threads``), prints rich tables and writes
``benchmarks/results/<name>.json`` with the numbers, the command line and a description of the machine.

Data come from the shared data directory (``/work/shared/data``, or ``$CLOSEDLOOP_SHARED_DATA``); each folder's
``SOURCE.txt`` gives the provenance. The files are read, never written.
"""

from __future__ import annotations

import os
import sys

# numpy reads the thread variables at import; scripts import this module first.
for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_name] = "1"

import csv
import json
import math
import platform
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

BENCHMARKS_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCHMARKS_DIR / "results"
CACHE_DIR = BENCHMARKS_DIR / ".cache"
DATA_DIR = Path(os.environ.get("CLOSEDLOOP_SHARED_DATA", "/work/shared/data"))
FREESOLV_CSV = DATA_DIR / "freesolv" / "FreeSolv_gauche.csv"
BANDGAP_CSV = DATA_DIR / "bandgap_expt_vs_pbe" / "expt_vs_pbe_bandgap_pairs.csv"

__all__ = [
    "BANDGAP_CSV",
    "BENCHMARKS_DIR",
    "CACHE_DIR",
    "DATA_DIR",
    "FREESOLV_CSV",
    "RESULTS_DIR",
    "Stopwatch",
    "agreement",
    "clean_nan",
    "console",
    "failure_kind",
    "failure_summary",
    "fmt",
    "load_bandgap",
    "load_freesolv",
    "machine_info",
    "print_table",
    "run_or_render",
    "sample",
    "timed",
    "write_results",
]


def _console():
    from rich.console import Console

    return Console(width=max(140, int(os.environ.get("COLUMNS", "0") or 0)))


console = _console()


# ----------------------------------------------------------------------------------------------------- data
def _rows(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        raise SystemExit(f"{path} is missing; set CLOSEDLOOP_SHARED_DATA to the folder that holds the shared data")
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def load_freesolv() -> list[dict[str, Any]]:
    """FreeSolv v0.52 (Mobley & Guthrie 2014) as rows: iupac, smiles, expt and calc (GAFF), both kcal/mol."""
    return [
        {"iupac": r["iupac"], "smiles": r["smiles"], "expt": float(r["expt"]), "calc": float(r["calc"])}
        for r in _rows(FREESOLV_CSV)
    ]


def load_bandgap() -> list[dict[str, Any]]:
    """Experimental vs Materials Project PBE band gaps paired by composition (eV); see its SOURCE.txt."""
    return [
        {
            "composition": r["composition"],
            "expt_gap_ev": float(r["expt_gap_eV_median"]),
            "pbe_gap_ev": float(r["pbe_gap_eV_MP"]),
            "mp_id": r["mp_id"],
        }
        for r in _rows(BANDGAP_CSV)
    ]


def sample(items: Sequence[Any], n: int | None, seed: int = 0) -> list[Any]:
    """``n`` items drawn without replacement with a fixed seed (all of them, shuffled, when ``n`` is None)."""
    items = list(items)
    k = len(items) if n is None else min(n, len(items))
    return random.Random(seed).sample(items, k)


# ----------------------------------------------------------------------------------------------------- timing
@dataclass
class Stopwatch:
    """Wall and CPU seconds of this process (CPU excludes worker processes)."""

    wall_s: float = 0.0
    cpu_s: float = 0.0
    load_before: float = 0.0
    load_after: float = 0.0

    @classmethod
    @contextmanager
    def run(cls):
        watch = cls(load_before=os.getloadavg()[0])
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield watch
        finally:
            watch.wall_s = time.perf_counter() - wall
            watch.cpu_s = time.process_time() - cpu
            watch.load_after = os.getloadavg()[0]


# ----------------------------------------------------------------------------------------------------- statistics
@dataclass(frozen=True)
class Agreement:
    """How one predictor relates to a measured value over the candidates where both exist."""

    n: int
    spearman: float
    spearman_p: float
    pearson: float
    mae: float | None = None
    mean_signed_error: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "spearman": self.spearman,
            "spearman_p": self.spearman_p,
            "pearson": self.pearson,
            "mae": self.mae,
            "mean_signed_error": self.mean_signed_error,
            **self.extra,
        }


def agreement(predicted: Sequence[float], measured: Sequence[float], *, same_unit: bool = False) -> Agreement:
    """Spearman and Pearson correlation (and MAE and mean signed error, predicted − measured, if ``same_unit``)."""
    import numpy as np
    from scipy import stats

    x, y = np.asarray(predicted, dtype=float), np.asarray(measured, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    n = int(len(x))
    if n < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        nan = float("nan")
        return Agreement(n, nan, nan, nan)
    rho, p = stats.spearmanr(x, y)
    r = float(np.corrcoef(x, y)[0, 1])
    mae = float(np.mean(np.abs(x - y))) if same_unit else None
    mse = float(np.mean(x - y)) if same_unit else None
    return Agreement(n, float(rho), float(p), r, mae, mse)


def failure_kind(reason: str, *names: str) -> str:
    """A failure reason with the candidate's own names, element symbols and numbers replaced, to group failures.

    Example:
        >>> failure_kind("TeSe has no charge-balanced oxidation states with Se as the only anion", "TeSe")
        '{candidate} has no charge-balanced oxidation states with {element} as the only anion'
    """
    text = reason or ""
    for name in sorted((n for n in names if n), key=len, reverse=True):
        text = text.replace(name, "{candidate}")
    text = re.sub(r"(?<=with )[A-Z][a-z]?(?= as the only anion)", "{element}", text)
    text = re.sub(r"(?<=stoichiometry of )\S+(?=;)", "{candidate}", text)
    return re.sub(r"(?<![A-Za-z\d.])\d+(\.\d+)?", "N", text)


def failure_summary(reasons: Iterable[str], width: int = 150) -> list[tuple[str, int]]:
    """Failure reasons grouped by their first ``width`` characters, most common first."""
    counts = Counter((reason or "")[:width] for reason in reasons)
    return counts.most_common()


# ----------------------------------------------------------------------------------------------------- output
def fmt(value: Any, digits: int = 3) -> str:
    """A number for a table cell: ``digits`` significant decimals, '—' for None or NaN."""
    if value is None:
        return "—"
    if isinstance(value, float):
        if math.isnan(value):
            return "—"
        if value != 0 and (abs(value) >= 1e4 or abs(value) < 10 ** -digits):
            return f"{value:.{digits - 1}e}"
        return f"{value:.{digits}f}"
    return str(value)


_TEXT_COLUMNS = {"reason", "property", "smiles", "version"}


def print_table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]], *, caption: str | None = None):
    """Print a rich table; numbers are formatted with ``fmt`` and right-aligned."""
    from rich.table import Table

    table = Table(title=title, caption=caption, title_justify="left", caption_justify="left")
    for index, column in enumerate(columns):
        is_text = index == 0 or column.lower() in _TEXT_COLUMNS
        table.add_column(column, justify="left" if is_text else "right", overflow="fold")
    for row in rows:
        table.add_row(*(fmt(cell) if not isinstance(cell, str) else cell for cell in row))
    console.print(table)


def _versions(names: Iterable[str]) -> dict[str, str]:
    found = {}
    for name in names:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "missing"
    return found


def machine_info() -> dict[str, Any]:
    """What the numbers were measured on: CPU, cores, load, Python and the simulator backends' versions."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "n_cpus": os.cpu_count(),
        "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "platform": platform.platform(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "versions": _versions(["rdkit", "tblite", "pyscf", "pymatgen", "chgnet", "torch", "scipy", "numpy"]),
    }


def run_or_render(doc: str, results: Path, markdown_path: Path, run: Callable[[int, int], dict[str, Any]],
                  markdown: Callable[[dict[str, Any]], str], *, seeds: int, argv: list[str] | None = None) -> None:
    """The command line of a benchmark that writes one JSON and one markdown table rendered from it: ``run(seeds,
    workers)`` unless ``--render``, then the table, written and printed. ``doc``'s first line is the help text."""
    import argparse

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--render", action="store_true", help="only re-write the markdown from the JSON")
    parser.add_argument("--seeds", type=int, default=seeds)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    if not args.render:
        results.parent.mkdir(exist_ok=True)
        results.write_text(json.dumps(run(args.seeds, args.workers), indent=1) + "\n")
    markdown_path.write_text(markdown(json.loads(results.read_text())))
    print(markdown_path.read_text())


def write_results(name: str, payload: dict[str, Any], path: Path | None = None) -> Path:
    """Write ``payload`` with the date, the command and the machine to ``path``
    (default ``benchmarks/results/<name>.json``)."""
    document = {
        "benchmark": name,
        "date_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": machine_info(),
        **payload,
    }
    path = path or RESULTS_DIR / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(clean_nan(document), indent=2, default=_json_default, allow_nan=False) + "\n")
    console.print(f"[dim]wrote {path}[/dim]")
    return path


def _json_default(value: Any) -> Any:
    if hasattr(value, "as_dict"):
        return value.as_dict()
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def clean_nan(value: Any) -> Any:
    """NaN and inf become None, recursively, so the JSON stays strict."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: clean_nan(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_nan(v) for v in value]
    if hasattr(value, "as_dict"):
        return clean_nan(value.as_dict())
    return value


def timed(function: Callable[[], Any]) -> tuple[Any, Stopwatch]:
    """Run ``function`` and return its result with the stopwatch."""
    with Stopwatch.run() as watch:
        result = function()
    return result, watch
