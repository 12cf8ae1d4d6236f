"""Seed a campaign with past lab results from a CSV (part of an HTE table, an old notebook's results).

Each row becomes a ``Proposed`` event (arm ``imported``, iteration -1, so no planning round re-validates it) and an
``Observed`` event with provenance ``imported``. The planner trains on them from its first round; they never count
against the lab budget, and the campaign's own results stay apart from them in summaries and rewards. A spec that
measures more than one property (several objectives, outcome constraints) reads a column per property
(``orchestrator.loop.measured_columns``): every objective's is required, a constraint's may be empty.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

from orchestrator.ledger import Ledger
from orchestrator.loop.measured_columns import extra_properties, measured_cells
from orchestrator.space.checks import (
    N_SHOWN,
    as_float,
    csv_line_numbers,
    empty_value_problem,
    missing_column_hint,
    read_csv_table,
    require_rows,
    written_cells_at,
)
from orchestrator.space.pool import Pool, describe
from orchestrator.spec import CampaignSpec
from vocabulary.domain import InvalidCandidate, SetupError, parse_candidate
from vocabulary.events import EventPayload, Observed, Proposed, SurrogateUpdated

__all__ = [
    "HistoryFile",
    "HistoryImportError",
    "ImportedHistory",
    "history_events",
    "import_history",
    "read_history",
    "read_measured_history",
]


class HistoryImportError(SetupError):
    """A history CSV cannot be imported; nothing was written. The message names the line and the fix."""


@dataclass(frozen=True)
class ImportedHistory:
    """What an import added: rows read, results appended, and rows already in the ledger (re-imports are no-ops)."""

    n_rows: int
    n_appended: int
    source: str


def _candidate_columns(spec: CampaignSpec, candidate_column: str | None) -> list[str]:
    if spec.campaign.kind == "conditions":
        return list(spec.space.columns or [])
    return [candidate_column or spec.space.column or ("smiles" if spec.campaign.kind == "molecule" else "formula")]


def read_history(spec: CampaignSpec, pool: Pool, path: str | Path, *, value_column: str | None = None,
                 candidate_column: str | None = None) -> list[tuple[int, object, float]]:
    """Parse and check every row into (CSV line number, candidate, value); any bad row refuses the whole file.
    ``read_measured_history`` adds each row's other measured values.

    Everything an import can refuse is checked here (the file, its columns, each row's candidate and value, a
    candidate outside the space, a repeated candidate), so a caller that reads the file before creating a campaign
    leaves the ledger untouched when it is refused. ``value_column`` defaults to the objective's property name.
    Values are in the objective's unit.
    """
    return [(line, candidate, value) for line, candidate, value, _ in read_measured_history(
        spec, pool, path, value_column=value_column, candidate_column=candidate_column)]


def read_measured_history(spec: CampaignSpec, pool: Pool, path: str | Path, *, value_column: str | None = None,
                          candidate_column: str | None = None) -> list[tuple[int, object, float, dict[str, float]]]:
    """``read_history``'s rows with each row's values of the other measured properties (property -> value, in its
    unit; a constraint left empty is absent). A file without a column for every objective is refused."""
    path = Path(path)
    if not path.is_file():
        raise HistoryImportError(f"history file {path} does not exist")
    columns = _candidate_columns(spec, candidate_column)
    value_column = value_column or spec.objective.property
    objectives, constraints = extra_properties(spec)
    frame = read_csv_table(path, "history file", HistoryImportError, is_rows_required=False,
                           columns=[*columns, value_column, *objectives, *constraints],
                           text_columns=[] if spec.campaign.kind == "conditions" else columns)
    # quote a CSV's header, never another file's first line
    from vocabulary.header_text import columns_text, shown_names

    if value_column not in frame.columns:
        raise HistoryImportError(f"history file {path.name} has no {value_column!r} column (the measured objective); "
                                 f"{columns_text(path, frame.columns)}. Pass --value-column"
                                 f"{missing_column_hint([value_column], shown_names(path, frame.columns))}")
    absent = [c for c in objectives if c not in frame.columns]
    if absent:
        raise HistoryImportError(f"history file {path.name} has no column(s) {absent} (objectives the campaign "
                                 f"measures besides {value_column!r}); {columns_text(path, frame.columns)}. Add a "
                                 "column per objective, in its unit"
                                 f"{missing_column_hint(absent, shown_names(path, frame.columns))}")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise HistoryImportError(f"history file {path.name} has no column(s) {missing}; "
                                 f"{columns_text(path, frame.columns)}. Name the candidate column with "
                                 "--candidate-column (molecules, materials) or use the spec's space.columns "
                                 f"(conditions){missing_column_hint(missing, shown_names(path, frame.columns))}")
    require_rows(frame, path, "history file", HistoryImportError)
    lines = csv_line_numbers(path, len(frame))
    rows, problems, seen = [], [], {}
    blank = [k for k, given in enumerate(frame[value_column].tolist()) if _is_empty(given)]
    written = written_cells_at(path, value_column, blank)  # pandas reads NaN, NA, null as missing: name them
    for k, (line, record) in enumerate(zip(lines, frame.to_dict("records"), strict=True)):
        try:
            candidate, value = _checked_row(spec, pool, record, columns, value_column, seen, written.get(k))
            values, empty = measured_cells(spec, record, _measured_number)
            if empty:
                raise _BadRow(f"{empty[0]} is empty (every objective needs a value in each row)")
        except _BadRow as exc:
            problems.append(f"line {line}: {exc}")
            continue
        seen[candidate.id] = line
        rows.append((line, candidate, value, values))
    if problems:
        shown = "; ".join(problems[:N_SHOWN]) + (f"; and {len(problems) - N_SHOWN} more" if len(problems) > N_SHOWN else "")
        prefix = f"{path.name} " if len(problems) == 1 else f"{path.name}: {len(problems)} bad rows: "
        raise HistoryImportError(f"{prefix}{shown}. Nothing was imported; fix or remove these rows")
    return rows


class _BadRow(Exception):
    """What is wrong with one history row."""


def _is_empty(cell: object) -> bool:
    return cell is None or (isinstance(cell, float) and math.isnan(cell)) or (isinstance(cell, str) and not cell.strip())


def _measured_number(cell: object, column: str) -> float | None:
    """A measured property's cell as a number, None when empty; ``_BadRow`` when it is no finite number."""
    if _is_empty(cell):
        return None
    value = as_float(cell)
    if not math.isfinite(value):
        raise _BadRow(f"{column}={cell!r} is not a finite number")
    return value


def _checked_row(spec: CampaignSpec, pool: Pool, record: dict, columns: list[str], value_column: str,
                 seen: dict[str, int], written: str | None = None) -> tuple[object, float]:
    """One row's candidate and value, or ``_BadRow``; a new candidate of an open space joins the pool. ``written``
    is the value cell as written where pandas read it as missing (``NaN``, ``NA``)."""
    empty = [c for c in columns if _is_empty(record[c])]
    if empty:
        hint = " (write none for an absent component)" if spec.campaign.kind == "conditions" else ""
        raise _BadRow(f"{', '.join(empty)} is empty{hint}")
    raw = {c: record[c] for c in columns} if spec.campaign.kind == "conditions" else record[columns[0]]
    try:
        candidate = parse_candidate(spec.campaign.kind, raw, pool.space)
    except InvalidCandidate as exc:
        raise _BadRow(str(exc).split("; ")[0]) from None
    given = record[value_column]
    value = as_float(given)
    if math.isnan(value) and not _is_empty(given):
        raise _BadRow(f"{value_column}={given!r} is not a number")
    if _is_empty(given):
        raise _BadRow(empty_value_problem(value_column, written).text)
    if not math.isfinite(value):
        raise _BadRow(f"{value_column}={value} is not finite")
    if candidate.id in seen:
        raise _BadRow(f"{describe(candidate)!r} repeats line {seen[candidate.id]} (average replicates into one row)")
    if candidate.id not in pool.index:
        if not spec.space.generate:
            raise _BadRow(f"{describe(candidate)!r} is not in the campaign's design space (import only results for "
                          "members of the pool)")
        pool.extend([candidate])
    return candidate, value


def _warm_surrogate(spec: CampaignSpec, pool: Pool, rows: list) -> SurrogateUpdated | None:
    """The surrogate fitted on the imported results, so the first planning round already uses it."""
    import numpy as np

    from orchestrator.policy.planners import campaign_kernel, campaign_surrogate_state
    from orchestrator.seeding import derive_seed

    arms = {spec.planner.main, spec.planner.control}
    if not {"bo", "llm"} & arms or len(rows) < 2:
        return None
    X = pool.features[[pool.index[candidate.id] for _, candidate, _, _ in rows]]
    values = np.asarray([value for _, _, value, _ in rows], dtype=float)
    hyperparameters = campaign_surrogate_state(spec, X, values, kernel=campaign_kernel(spec, pool),
                                               feature_kinds=getattr(pool, "feature_kinds", None),
                                               seed=derive_seed(spec.campaign.seed, -1, "learn"))
    incumbent = max(spec.objective.utility(value) for value in values)
    return SurrogateUpdated(iteration=-1, model=f"pyro-gp:{hyperparameters['kernel']}:refit", n_train=len(rows),
                            hyperparameters=hyperparameters, incumbent=float(incumbent))


@dataclass(frozen=True)
class HistoryFile:
    """A history CSV to import as a campaign starts (``Campaign.start(history=...)``), with its column choices."""

    path: Path
    value_column: str | None = None
    candidate_column: str | None = None


def history_events(campaign_id: str, spec: CampaignSpec, pool: Pool, path: str | Path, *,
                   value_column: str | None = None,
                   candidate_column: str | None = None) -> tuple[list[tuple[EventPayload, str]], ImportedHistory]:
    """The events that import the CSV's results (``read_history`` checks every row first), and what they add.

    Nothing is written: ``import_history`` appends them to an existing campaign, ``Campaign.start`` in the
    transaction that creates the campaign, so a refused import leaves no campaign behind. Keys derive from the
    file's content hash and line numbers, so importing the same file twice adds nothing.
    """
    rows = read_measured_history(spec, pool, path, value_column=value_column, candidate_column=candidate_column)
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]
    source = f"import:{Path(path).name}@{digest}"
    items: list[tuple[EventPayload, str]] = []
    for line, candidate, value, values in rows:
        proposed = Proposed(iteration=-1, arm="imported", candidate_id=candidate.id,
                            candidate=candidate.model_dump(mode="json"), hypothesis=f"past result, {source} line {line}")
        observed = Observed(iteration=-1, job_key=f"{campaign_id}/imported/{digest}/{line}", candidate_id=candidate.id,
                            arm="imported", value=value, values=values, status="ok", sim_time_s=0.0,
                            provenance="imported", driver=source)
        items += [(proposed, f"{source}:{line}:proposed"), (observed, f"{source}:{line}:observed")]
    surrogate = _warm_surrogate(spec, pool, rows)
    if surrogate is not None:
        items.append((surrogate, f"{source}:surrogate"))
    return items, ImportedHistory(n_rows=len(rows), n_appended=len(rows), source=source)


def import_history(ledger: Ledger, campaign_id: str, spec: CampaignSpec, pool: Pool, path: str | Path, *,
                   value_column: str | None = None, candidate_column: str | None = None) -> ImportedHistory:
    """Append the CSV's results to an existing campaign as imported observations, all in one transaction.

    Importing the same file twice adds nothing (``n_appended`` counts what this call added). A new campaign imports
    its history as it starts (``Campaign.start(history=HistoryFile(path))``), so a refusal leaves no campaign.
    """
    items, imported = history_events(campaign_id, spec, pool, path, value_column=value_column,
                                     candidate_column=candidate_column)
    before = len(ledger.events(campaign_id, types=[Observed.type]))
    ledger.append_many(campaign_id, items, actor="importer")
    after = len(ledger.events(campaign_id, types=[Observed.type]))
    return ImportedHistory(n_rows=imported.n_rows, n_appended=after - before, source=imported.source)
