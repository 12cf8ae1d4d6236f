"""Seed a campaign with past lab results from a CSV (part of an HTE table, an old notebook's results).

Each row becomes a ``Proposed`` event (arm ``imported``, iteration -1, so no planning round re-validates it) and an
``Observed`` event with provenance ``imported``. The planner trains on them from its first round; they never count
against the lab budget, and the campaign's own results stay apart from them in summaries and rewards.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .domain import InvalidCandidate, SetupError, parse_candidate
from .events import Observed, Proposed, SurrogateUpdated
from .ledger import Ledger
from .pool import Pool
from .spec import CampaignSpec

__all__ = ["HistoryImportError", "ImportedHistory", "import_history", "read_history"]


class HistoryImportError(SetupError):
    """A history CSV cannot be imported; nothing was written. The message names the line and the fix."""


@dataclass(frozen=True)
class ImportedHistory:
    """What an import added: rows read, results appended, and rows already in the ledger (re-imports are no-ops)."""

    n_rows: int
    n_appended: int
    source: str


def _candidate_columns(spec: CampaignSpec, frame: pd.DataFrame, candidate_column: str | None) -> list[str]:
    if spec.campaign.kind == "conditions":
        wanted = list(spec.space.columns or [])
    else:
        wanted = [candidate_column or spec.space.column or ("smiles" if spec.campaign.kind == "molecule" else "formula")]
    missing = [c for c in wanted if c not in frame.columns]
    if missing:
        raise HistoryImportError(f"the history CSV has no column(s) {missing}; its columns are {list(frame.columns)}. "
                                 "Name the candidate column with --candidate-column (molecules, materials) or use "
                                 "the spec's space.columns (conditions)")
    return wanted


def read_history(spec: CampaignSpec, pool: Pool, path: str | Path, *, value_column: str | None = None,
                 candidate_column: str | None = None) -> list[tuple[int, object, float]]:
    """Parse every row into (CSV line number, candidate, value); any bad row fails the whole file.

    ``value_column`` defaults to the objective's property name. Values are in the objective's unit.
    """
    path = Path(path)
    if not path.is_file():
        raise HistoryImportError(f"history file {path} does not exist")
    frame = pd.read_csv(path, encoding="utf-8-sig")
    value_column = value_column or spec.objective.property
    if value_column not in frame.columns:
        raise HistoryImportError(f"the history CSV has no {value_column!r} column (the measured objective); its "
                                 f"columns are {list(frame.columns)}. Pass --value-column")
    columns = _candidate_columns(spec, frame, candidate_column)
    rows = []
    for k, record in enumerate(frame.to_dict("records")):
        line = k + 2  # 1-based, after the header
        raw = {c: record[c] for c in columns} if spec.campaign.kind == "conditions" else record[columns[0]]
        try:
            candidate = parse_candidate(spec.campaign.kind, raw, pool.space)
        except InvalidCandidate as exc:
            raise HistoryImportError(f"{path.name} line {line}: {exc}") from None
        value = record[value_column]
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise HistoryImportError(f"{path.name} line {line}: {value_column}={value!r} is not a number") from None
        if not math.isfinite(value):
            raise HistoryImportError(f"{path.name} line {line}: {value_column} is empty or not finite; fill it in "
                                     "or drop the row")
        if candidate.id not in pool.index:
            if spec.space.generate:
                pool.extend([candidate])
            else:
                raise HistoryImportError(f"{path.name} line {line}: {candidate.id} is not in the campaign's design "
                                         "space; import only results for members of the pool")
        rows.append((line, candidate, value))
    if not rows:
        raise HistoryImportError(f"{path.name} has no rows to import")
    return rows


def _warm_surrogate(spec: CampaignSpec, pool: Pool, rows: list) -> SurrogateUpdated | None:
    """The surrogate fitted on the imported results, so the first planning round already uses it."""
    import numpy as np

    from .planners import campaign_surrogate_state
    from .seeding import derive_seed

    arms = {spec.planner.main, spec.planner.control}
    if not {"bo", "llm"} & arms or len(rows) < 2:
        return None
    X = pool.features[[pool.index[candidate.id] for _, candidate, _ in rows]]
    values = np.asarray([value for _, _, value in rows], dtype=float)
    hyperparameters = campaign_surrogate_state(spec, X, values, seed=derive_seed(spec.campaign.seed, -1, "learn"))
    incumbent = max(spec.objective.utility(value) for value in values)
    return SurrogateUpdated(iteration=-1, model=f"pyro-gp:{hyperparameters['kernel']}:refit", n_train=len(rows),
                            hyperparameters=hyperparameters, incumbent=float(incumbent))


def import_history(ledger: Ledger, campaign_id: str, spec: CampaignSpec, pool: Pool, path: str | Path, *,
                   value_column: str | None = None, candidate_column: str | None = None) -> ImportedHistory:
    """Append the CSV's results to the campaign as imported observations, all in one transaction.

    Keys derive from the file's content hash and line numbers, so importing the same file twice adds nothing.
    """
    rows = read_history(spec, pool, path, value_column=value_column, candidate_column=candidate_column)
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]
    source = f"import:{Path(path).name}@{digest}"
    seen: dict[str, int] = {}
    items = []
    for line, candidate, value in rows:
        if candidate.id in seen:
            raise HistoryImportError(f"{Path(path).name} line {line}: {candidate.id} repeats line {seen[candidate.id]}; "
                                     "average replicates into one row before importing")
        seen[candidate.id] = line
        proposed = Proposed(iteration=-1, arm="imported", candidate_id=candidate.id,
                            candidate=candidate.model_dump(mode="json"), hypothesis=f"past result, {source} line {line}")
        observed = Observed(iteration=-1, job_key=f"{campaign_id}/imported/{digest}/{line}", candidate_id=candidate.id,
                            arm="imported", value=value, status="ok", sim_time_s=0.0, provenance="imported",
                            driver=source)
        items += [(proposed, f"{source}:{line}:proposed"), (observed, f"{source}:{line}:observed")]
    surrogate = _warm_surrogate(spec, pool, rows)
    if surrogate is not None:
        items.append((surrogate, f"{source}:surrogate"))
    before = len(ledger.events(campaign_id, types=[Observed.type]))
    ledger.append_many(campaign_id, items, actor="importer")
    after = len(ledger.events(campaign_id, types=[Observed.type]))
    return ImportedHistory(n_rows=len(rows), n_appended=after - before, source=source)
