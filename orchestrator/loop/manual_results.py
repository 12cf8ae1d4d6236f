"""Results entered by hand (ask/tell): the pending jobs of a manual lab, their results, off-plan measurements, export.

Used without a running graph, from the CLI (``closedloop suggest`` / ``results add`` / ``results export``), Python
(``Campaign.suggest``, ``Campaign.add_results``), the dashboard and MCP. Everything entered is a ledger event, so
nothing lives outside the ledger and a restart loses nothing:

- a result for an open job is a ``ResultEntered`` (actor ``human`` or ``human:NAME``); the campaign's next run
  (``closedloop run --resume``) records it as the job's ``Observed`` and plans on.
- a measurement of a candidate with no open job (off-plan: the chemist ran something else too) is recorded at once,
  as ``--history`` records a past result: an ``Observed`` with provenance ``imported`` (driver ``manual:NAME``) that
  feeds the surrogate and never counts against the lab budget.
- a late result (its job ended without one, cancelled or expired, or the campaign stopped before it came) is kept
  as an off-plan measurement, and the receipt says so.
- a result identical to one recorded is a no-op the receipt calls a duplicate; a different result for a job that has
  one is refused (enter a replicate without the ``job`` column: it is recorded as an off-plan measurement).

A row is a mapping with ``job`` (the job key from ``suggest``) or the candidate's own columns, the objective's
property column (its unit), a column per other measured property (every further objective's, required with the
first; an outcome constraint's, optional), and optionally ``uncertainty`` (one sd, same unit), ``status`` (``ok`` |
``failed`` | ``infeasible``: a failed run that says the point cannot work, learned and never retried), ``reason``
(required for a failed run) and ``measured_at`` (ISO 8601, UTC when no zone is given; default: now). Other
columns (``predicted``, ``sd`` of a ``suggest`` file) are ignored. A malformed row (an unknown job, a missing value
column, a value that is not a number) refuses the whole entry with one line naming the row and the column, and
nothing is written.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal

import pandas as pd

from orchestrator.loop.human_answer import checked_name
from orchestrator.loop.measured_columns import extra_properties, measured_cells
from orchestrator.loop.predictions import predictions
from orchestrator.loop.resume_policy import recorded_spec
from vocabulary.domain import (
    InvalidCandidate,
    SetupError,
    candidate_from_dict,
    parse_candidate,
)
from vocabulary.events import (
    CampaignStarted,
    CampaignStopped,
    Dispatched,
    Observed,
    Proposed,
    ResultEntered,
    ResultsAwaited,
)

__all__ = [
    "ResultsEntryError",
    "ResultsReceipt",
    "RowOutcome",
    "add_results",
    "candidate_columns",
    "export_results",
    "is_waiting_for_results",
    "pending_jobs",
    "read_results_csv",
]

Outcome = Literal["recorded", "off_plan", "duplicate", "refused", "skipped"]
_IGNORED = {"predicted", "sd"}
_OPTIONAL = ("uncertainty", "status", "reason", "measured_at")


class ResultsEntryError(SetupError):
    """Results that cannot be entered; nothing was written. The message names the row, the column and the fix."""


@dataclass(frozen=True)
class RowOutcome:
    """What became of one entered row: ``recorded`` (for its job), ``off_plan`` (a measurement outside the plan),
    ``duplicate`` (identical to one recorded: nothing written), ``refused`` (``detail`` says why) or ``skipped`` (no
    value yet)."""

    row: str
    job: str | None
    candidate: str
    outcome: Outcome
    detail: str = ""


@dataclass(frozen=True)
class ResultsReceipt:
    """Per row, what an ``add_results`` call did.

    Example:
        >>> receipt = ResultsReceipt("c1", (RowOutcome("line 2", "c1/K", "CCO", "recorded"),
        ...                                 RowOutcome("line 3", None, "CCN", "duplicate", "nothing written")))
        >>> print(receipt.text())
        line 2: recorded CCO (c1/K)
        line 3: duplicate CCN: nothing written
        1 recorded, 1 duplicate
        >>> receipt.n_written
        1
    """

    campaign_id: str
    rows: tuple[RowOutcome, ...] = field(default_factory=tuple)

    def n(self, outcome: Outcome) -> int:
        return sum(r.outcome == outcome for r in self.rows)

    @property
    def n_written(self) -> int:
        """Rows that added a result to the ledger (for a job, or off-plan)."""
        return self.n("recorded") + self.n("off_plan")

    def text(self) -> str:
        """One line per row, then the counts."""
        lines = [f"{r.row}: {r.outcome.replace('_', '-')} {r.candidate}" + (f" ({r.job})" if r.job else "")
                 + (f": {r.detail}" if r.detail else "") for r in self.rows]
        counts = ", ".join(f"{self.n(o)} {o.replace('_', '-')}" for o in
                           ("recorded", "off_plan", "duplicate", "refused", "skipped") if self.n(o))
        return "\n".join([*lines, counts or "nothing entered"])

    def as_dicts(self) -> list[dict[str, Any]]:
        return [dict(r.__dict__) for r in self.rows]


# ------------------------------------------------------------------------------------------------ what is known
@dataclass
class _Known:
    """The campaign as ``add_results`` needs it, read from the ledger once."""

    spec: Any
    started_at: datetime
    candidates: dict[str, Any]
    """Candidate id -> candidate, for every candidate the ledger names."""
    jobs: dict[str, Any]
    """Job key -> its ``Dispatched`` payload."""
    observed: dict[str, dict]
    """Job key -> its ``Observed`` payload."""
    entered: dict[str, tuple[dict, str]]
    """Job key -> (``ResultEntered`` payload, actor)."""
    off_plan_keys: set[str]


def _started_at(ledger, campaign_id: str) -> datetime:
    at = ledger.events(campaign_id, types=[CampaignStarted.type])[0].at
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def _known(ledger, campaign_id: str) -> _Known:
    spec = recorded_spec(ledger, campaign_id)
    candidates = {row.candidate_id: candidate_from_dict(json.loads(row.canonical))
                  for row in ledger.candidates(campaign_id)}
    jobs, observed, entered, keys = {}, {}, {}, set()
    for event in ledger.events(campaign_id, types=[Dispatched.type, Observed.type, ResultEntered.type]):
        p = event.payload
        if event.type == Dispatched.type:
            jobs[p["job_key"]] = p
        elif event.type == Observed.type:
            observed[p["job_key"]] = p
            keys.add(event.idempotency_key.removeprefix(f"{campaign_id}:"))
        else:
            entered.setdefault(p["job_key"], (p, event.actor))
    return _Known(spec, _started_at(ledger, campaign_id), candidates, jobs, observed, entered, keys)


def candidate_columns(spec) -> list[str]:
    """The columns that name a candidate of ``spec``'s kind: the space's parameters, or its SMILES/formula column."""
    if spec.campaign.kind == "conditions":
        return list(spec.space.columns or [])
    return [spec.space.column or ("smiles" if spec.campaign.kind == "molecule" else "formula")]


def _candidate_cells(spec, candidate) -> dict[str, Any]:
    if spec.campaign.kind == "conditions":
        return dict(candidate.values)
    column = candidate_columns(spec)[0]
    return {column: getattr(candidate, "smiles", None) or getattr(candidate, "formula", "")}


def _label(candidate) -> str:
    from orchestrator.space.pool import describe

    return describe(candidate)


def _open_keys(known: _Known) -> list[str]:
    """Job keys at the bench: dispatched, not observed, no result entered."""
    return [k for k in known.jobs if k not in known.observed and k not in known.entered]


# ------------------------------------------------------------------------------------------------ reading rows
def read_results_csv(source: str | Path | io.TextIOBase) -> pd.DataFrame:
    """A results CSV (a path, or an open text stream such as stdin) as text cells, rows labelled by their line.

    Raises:
        ResultsEntryError: the file is missing, empty or not a CSV.
    """
    name = getattr(source, "name", None) or str(source)
    try:
        if isinstance(source, (str, Path)):
            if not Path(source).is_file():
                raise ResultsEntryError(f"results file {source} does not exist; give a CSV path or - for stdin")
            frame = pd.read_csv(source, dtype=str, keep_default_na=False, encoding="utf-8-sig", index_col=False)
        else:
            frame = pd.read_csv(source, dtype=str, keep_default_na=False, index_col=False)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ResultsEntryError(f"results file {name} is not a readable CSV with a header row: "
                                f"{str(exc).splitlines()[0]}") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    frame.attrs["row_labels"] = [f"line {i + 2}" for i in range(len(frame))]
    frame.attrs["source"] = f"csv:{Path(name).name}"
    return frame


def _rows(rows: pd.DataFrame | Iterable[Mapping[str, Any]]) -> tuple[list[str], list[dict[str, Any]], list[str]]:
    """(row labels, rows as dicts, the column names they use)."""
    if isinstance(rows, pd.DataFrame):
        records = rows.to_dict("records")
        labels = rows.attrs.get("row_labels") or [f"row {i + 1}" for i in range(len(records))]
        return list(labels), records, [str(c) for c in rows.columns]
    records = [dict(r) for r in rows]
    columns = list(dict.fromkeys(str(c) for r in records for c in r))
    return [f"row {i + 1}" for i in range(len(records))], records, columns


def _is_blank(cell: Any) -> bool:
    return cell is None or (isinstance(cell, float) and math.isnan(cell)) or (isinstance(cell, str) and not cell.strip())


def _number(cell: Any, where: str) -> float | None:
    if _is_blank(cell):
        return None
    try:
        value = float(cell.strip() if isinstance(cell, str) else cell)
    except (TypeError, ValueError):
        raise ResultsEntryError(f"{where}: {cell!r} is not a number; write the value in the objective's unit "
                                "(nothing was entered)") from None
    if not math.isfinite(value):
        raise ResultsEntryError(f"{where}: {cell!r} is not a finite number (nothing was entered)")
    return value


@dataclass(frozen=True)
class _Row:
    label: str
    job_key: str | None
    candidate: Any
    value: float | None
    uncertainty: float | None
    status: str
    reason: str | None
    sim_time_s: float
    has_time: bool = False
    """Whether the row said when it was measured (else it was stamped on entry)."""
    values: dict[str, float] = field(default_factory=dict)
    """The other measured properties (``LabResult.values``)."""
    infeasible: bool = False


def _parse_row(label: str, record: dict, known: _Known, pool, campaign_id: str, columns: list[str],
               value_column: str, now_s: float) -> _Row | None:
    spec = known.spec

    def where(column: str) -> str:
        return f"{label}, column {column}"

    job_key = None
    cell = record.get("job")
    if not _is_blank(cell):
        given = str(cell).strip()
        job_key = given if given in known.jobs else f"{campaign_id}/{given}"
        if job_key not in known.jobs:
            raise ResultsEntryError(f"{where('job')}: no job {given!r} in campaign {campaign_id!r}; "
                                    "`closedloop suggest` lists the pending jobs (nothing was entered)")
        candidate = known.candidates.get(known.jobs[job_key]["candidate_id"]) or pool.get(
            known.jobs[job_key]["candidate_id"])
    else:
        names = candidate_columns(spec)
        missing = [c for c in names if c not in columns]
        if missing:
            raise ResultsEntryError(f"{label}: no job and no candidate column(s) {missing}; give the job key from "
                                    "`closedloop suggest` or the candidate's own columns (nothing was entered)")
        empty = [c for c in names if _is_blank(record.get(c))]
        if empty:
            raise ResultsEntryError(f"{where(empty[0])}: empty; give the job or the candidate (nothing was entered)")
        raw = {c: record[c] for c in names} if spec.campaign.kind == "conditions" else str(record[names[0]]).strip()
        try:
            candidate = parse_candidate(spec.campaign.kind, raw, pool.space)
        except InvalidCandidate as exc:
            raise ResultsEntryError(f"{where(names[0])}: {str(exc).split('; ')[0]} (nothing was entered)") from None
        if candidate.id not in pool.index and candidate.id not in known.candidates:
            raise ResultsEntryError(f"{where(names[0])}: {_label(candidate)!r} is not in the campaign's design space "
                                    "(enter results only for members of the pool; nothing was entered)")
    status = "ok" if _is_blank(record.get("status")) else str(record["status"]).strip().lower()
    if status not in {"ok", "failed", "infeasible"}:
        raise ResultsEntryError(f"{where('status')}: {record.get('status')!r} is not ok, failed or infeasible "
                                "(nothing was entered)")
    is_infeasible, status = status == "infeasible", "failed" if status == "infeasible" else status
    reason = None if _is_blank(record.get("reason")) else str(record["reason"]).strip()
    value = _number(record.get(value_column), where(value_column))
    values, missing = measured_cells(spec, record, lambda cell, column: _number(cell, where(column)))
    if status == "failed":
        if reason is None:
            raise ResultsEntryError(f"{where('reason')}: a failed run needs a reason, e.g. 'no product formed' "
                                    "(nothing was entered)")
        value, values = None, {}
    elif value is None and len(missing) == len(extra_properties(spec)[0]):
        return None  # no value yet: the job stays pending
    elif value is None or missing:
        column = value_column if value is None else missing[0]
        raise ResultsEntryError(f"{where(column)}: no value for the objective {column!r}; a run measures every "
                                "objective, so give them all (or none, to leave the job pending; nothing was "
                                "entered)")
    uncertainty = _number(record.get("uncertainty"), where("uncertainty")) if status == "ok" else None
    if uncertainty is not None and uncertainty < 0:
        raise ResultsEntryError(f"{where('uncertainty')}: {uncertainty} is negative; give one standard deviation "
                                "(nothing was entered)")
    sim_time_s, has_time = now_s, not _is_blank(record.get("measured_at"))
    if has_time:
        try:
            at = pd.Timestamp(str(record["measured_at"]).strip()).to_pydatetime()
        except (ValueError, TypeError):
            raise ResultsEntryError(f"{where('measured_at')}: {record['measured_at']!r} is not a date and time; "
                                    "write ISO 8601, e.g. 2026-12-02T14:30 (nothing was entered)") from None
        at = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
        sim_time_s = (at - known.started_at).total_seconds()
        if sim_time_s < 0:
            raise ResultsEntryError(f"{where('measured_at')}: {record['measured_at']} is before the campaign started "
                                    f"({known.started_at.isoformat()}); enter older results with --history "
                                    "(nothing was entered)")
    return _Row(label, job_key, candidate, value, uncertainty, status, reason, sim_time_s, has_time, values,
                is_infeasible)


# ------------------------------------------------------------------------------------------------ entering
def _same(payload: Mapping[str, Any], row: _Row) -> bool:
    return (payload.get("status") == row.status and payload.get("value") == row.value
            and (row.uncertainty is None or payload.get("uncertainty") == row.uncertainty)
            and (payload.get("values") or {}) == row.values and bool(payload.get("infeasible")) == row.infeasible)


def _off_plan_items(row: _Row, campaign_id: str, known: _Known, actor: str, by_name: str,
                    now: datetime) -> tuple[list[tuple], str]:
    """The events recording ``row`` as an off-plan measurement, and its key (identical rows share it)."""
    measured = [row.values, row.infeasible] if row.values or row.infeasible else []  # older keys stay as they were
    digest = hashlib.sha256(json.dumps([row.candidate.id, row.value, row.uncertainty, row.status, row.reason,
                                        round(row.sim_time_s, 3) if row.has_time else None, *measured],
                                       sort_keys=True).encode()).hexdigest()[:16]
    key = f"offplan:{digest}:observed"
    items: list[tuple] = []
    if row.candidate.id not in known.candidates:
        items.append((Proposed(iteration=-1, arm="imported", candidate_id=row.candidate.id,
                               candidate=row.candidate.model_dump(mode="json"),
                               hypothesis=f"off-plan measurement entered by {by_name}"),
                      f"offplan:{digest}:proposed", actor, now))
        known.candidates[row.candidate.id] = row.candidate
    items.append((Observed(iteration=-1, job_key=f"{campaign_id}/offplan/{digest}", candidate_id=row.candidate.id,
                           arm="imported", value=row.value, uncertainty=row.uncertainty, status=row.status,
                           reason=row.reason, values=row.values, infeasible=row.infeasible,
                           sim_time_s=row.sim_time_s, provenance="imported", driver=f"manual:{by_name}"),
                  key, actor, now))
    return items, key


def add_results(ledger, campaign_id: str, rows: pd.DataFrame | Iterable[Mapping[str, Any]], *,
                by: str | None = None, source: str | None = None) -> ResultsReceipt:
    """Enter lab results by hand; every row checked first, then all written in one transaction.

    Args:
        ledger: the campaign's ``Ledger``.
        campaign_id: the campaign.
        rows: a DataFrame (``read_results_csv``) or mappings, as the module says.
        by: who entered them (recorded as ``human:NAME``); None records ``human``.
        source: where they come from, recorded on each entry (default: the CSV's name, or ``python``).

    Returns:
        A ``ResultsReceipt`` saying per row what happened.

    Raises:
        ResultsEntryError: a malformed row or a missing value column; nothing is written.
        InvalidApprover: ``by`` is not a valid name.
    """
    from orchestrator.space.pool import load_pool

    name = checked_name(by)
    actor = f"human:{name}" if name else "human"
    by_name = name or "human"
    known = _known(ledger, campaign_id)
    spec = known.spec
    pool = load_pool(spec)
    labels, records, columns = _rows(rows)
    source = source or (rows.attrs.get("source") if isinstance(rows, pd.DataFrame) else None) or "python"
    value_column = spec.objective.property
    if not records:
        raise ResultsEntryError("no rows to enter; give at least one result (nothing was entered)")
    if value_column not in columns and not all(str(r.get("status")).strip().lower() == "failed" for r in records):
        shown = ", ".join(c for c in columns) or "none"
        raise ResultsEntryError(f"the results have no {value_column!r} column (the objective's property); their "
                                f"columns: {shown}. Add it, or rename the value column to {value_column!r} "
                                "(nothing was entered)")
    now = datetime.now(UTC)
    now_s = (now - known.started_at).total_seconds()
    parsed = [(label, _parse_row(label, record, known, pool, campaign_id, columns, value_column, now_s))
              for label, record in zip(labels, records, strict=True)]
    items: list[tuple] = []
    outcomes: list[RowOutcome] = []
    taken: dict[str, _Row] = {}  # job key -> the row of this call that answers it
    is_manual = spec.lab.driver == "manual"
    open_keys = _open_keys(known) if is_manual else []
    stopped = ledger.campaign(campaign_id)
    stop_reason = stopped.stop_reason if stopped.status == "stopped" else None

    def off_plan(row: _Row, label: str, job_key: str | None, text: str, detail: str) -> None:
        offplan, key = _off_plan_items(row, campaign_id, known, f"importer:{actor}", by_name, now)
        if key in known.off_plan_keys:
            outcomes.append(RowOutcome(label, job_key, text, "duplicate",
                                       "identical off-plan measurement recorded before; nothing written"))
            return
        known.off_plan_keys.add(key)
        items.extend(offplan)
        outcomes.append(RowOutcome(label, job_key, text, "off_plan",
                                   f"{detail}: kept as an off-plan measurement (it informs the model, not the lab "
                                   "budget)"))

    for label, row in parsed:
        if row is None:
            job = records[labels.index(label)].get("job")
            outcomes.append(RowOutcome(label, None if _is_blank(job) else str(job), "", "skipped",
                                       f"no {value_column} value yet: the job stays pending"))
            continue
        text = _label(row.candidate)
        job_key = row.job_key
        if job_key is None and stop_reason is None:  # by the candidate's columns: its one open job, if any
            mine = [k for k in open_keys if known.jobs[k]["candidate_id"] == row.candidate.id and k not in taken]
            job_key = mine[0] if len(mine) == 1 else None
        if job_key is None:
            off_plan(row, label, None, text, "no open job for it")
            continue
        earlier = taken.get(job_key)
        recorded = known.entered.get(job_key, (None, ""))[0] or known.observed.get(job_key)
        if not is_manual and recorded is None:
            outcomes.append(RowOutcome(label, job_key, text, "refused",
                                       f"the campaign's {spec.lab.driver!r} lab reports this job's result itself; "
                                       "enter a measurement of your own without the job column (off-plan)"))
            continue
        if earlier is None and recorded is None and stop_reason is not None:
            off_plan(row, label, job_key, text, f"late: the campaign had stopped ({stop_reason})")
            continue
        if recorded is not None and recorded.get("status") == "failed" and job_key not in known.entered:
            # the job ended without a person's result (cancelled, expired): a late result is kept off-plan
            off_plan(row, label, job_key, text, f"late: the job had ended ({recorded.get('reason') or 'failed'})")
            continue
        if earlier is not None or recorded is not None:
            first = earlier.__dict__ if earlier is not None else recorded
            if _same(first, row):
                outcomes.append(RowOutcome(label, job_key, text, "duplicate",
                                           "identical to the result already entered; nothing written"))
            else:
                shown = first.get("value") if first.get("status") == "ok" else f"failed ({first.get('reason')})"
                outcomes.append(RowOutcome(label, job_key, text, "refused",
                                           f"the job already has the result {shown}; a different one is not "
                                           "overwritten. To add a replicate, enter it without the job column "
                                           "(an off-plan measurement)"))
            continue
        taken[job_key] = row
        entry = ResultEntered(job_key=job_key, candidate_id=row.candidate.id, value=row.value,
                              uncertainty=row.uncertainty, status=row.status, reason=row.reason, values=row.values,
                              infeasible=row.infeasible,
                              sim_time_s=max(row.sim_time_s, known.jobs[job_key]["sim_time_s"]), by=actor,
                              source=f"{source} {label}")
        items.append((entry, f"entered:{job_key}", actor, now))
        outcomes.append(RowOutcome(label, job_key, text, "recorded",
                                   "failed run recorded" if row.status == "failed" else ""))
    ledger.append_many(campaign_id, items)
    return ResultsReceipt(campaign_id, tuple(outcomes))


# ------------------------------------------------------------------------------------------------ reading back
def pending_jobs(ledger, campaign_id: str) -> pd.DataFrame:
    """The jobs at the bench (dispatched, no result entered yet), oldest first: ``job``, the candidate's own columns,
    ``predicted`` and ``sd`` (the surrogate's last prediction, in the objective's unit; empty where none)."""
    known = _known(ledger, campaign_id)
    keys = [] if ledger.campaign(campaign_id).status == "stopped" else _open_keys(known)
    ids = [known.jobs[k]["candidate_id"] for k in keys]
    predicted = predictions(SimpleNamespace(ledger=ledger, campaign_id=campaign_id), ids)
    columns = ["job", *candidate_columns(known.spec), "predicted", "sd"]
    rows = []
    for key, cid in zip(keys, ids, strict=True):
        candidate = known.candidates.get(cid)
        cells = _candidate_cells(known.spec, candidate) if candidate is not None else {}
        rows.append({"job": key, **cells, "predicted": predicted[cid].mean, "sd": predicted[cid].sd})
    return pd.DataFrame(rows, columns=columns)


def export_results(ledger, campaign_id: str) -> pd.DataFrame:
    """Every lab result of the campaign, in the order recorded: ``job``, the candidate's columns, the objective's
    property, a column per other measured property, ``uncertainty``, ``status`` (``infeasible`` for a failed run the
    lab called infeasible), ``reason``, ``measured_at`` (ISO 8601, UTC), ``provenance`` (``lab``,
    ``entered``: by hand, ``entered, not yet run``, ``off-plan`` or ``imported``), ``by``, ``arm``, ``iteration``.

    Entering the exported file again changes nothing (every row is a duplicate)."""
    known = _known(ledger, campaign_id)
    spec = known.spec
    value_column = spec.objective.property
    names = candidate_columns(spec)
    others = [p for group in extra_properties(spec) for p in group]
    columns = ["job", *names, value_column, *others, "uncertainty", "status", "reason", "measured_at", "provenance",
               "by", "arm", "iteration"]
    rows = []
    events = ledger.events(campaign_id, types=[Observed.type, ResultEntered.type])
    observed_keys = {e.payload["job_key"] for e in events if e.type == Observed.type}
    for event in events:
        p = event.payload
        if event.type == ResultEntered.type and p["job_key"] in observed_keys:
            continue
        candidate = known.candidates.get(p["candidate_id"])
        driver = p.get("driver", "")
        if event.type == ResultEntered.type:
            provenance, who = "entered, not yet run", event.actor
        elif p.get("provenance") == "imported":
            provenance = "off-plan" if driver.startswith("manual:") else "imported"
            who = event.actor.removeprefix("importer:") if provenance == "off-plan" else ""
        else:
            is_entered = event.actor.startswith("human")
            provenance, who = ("entered" if is_entered else "lab"), (event.actor if is_entered else "")
        is_job = provenance in {"lab", "entered", "entered, not yet run"}
        at = known.started_at + timedelta(seconds=p["sim_time_s"])
        rows.append({"job": p["job_key"] if is_job else "",
                     **(_candidate_cells(spec, candidate) if candidate is not None else {}),
                     value_column: p["value"], **{o: (p.get("values") or {}).get(o) for o in others},
                     "uncertainty": p.get("uncertainty"),
                     "status": "infeasible" if p.get("infeasible") else p["status"],
                     "reason": p.get("reason"), "measured_at": at.isoformat() if provenance != "imported" else "",
                     "provenance": provenance, "by": who, "arm": p.get("arm", ""),
                     "iteration": p.get("iteration", -1)})
    return pd.DataFrame(rows, columns=columns)


def is_waiting_for_results(ledger, campaign_id: str) -> bool:
    """Whether the campaign's last run ended waiting on a person (a ``ResultsAwaited`` after its last lab event)."""
    types = [ResultsAwaited.type, Observed.type, Dispatched.type, CampaignStopped.type]
    last = None
    for event in ledger.events(campaign_id, types=types):
        if event.type == Observed.type and event.payload.get("provenance") == "imported":
            continue
        last = event.type
    return last == ResultsAwaited.type
