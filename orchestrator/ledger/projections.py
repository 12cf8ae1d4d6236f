"""Fold events into the projection tables. The same fold serves live appends, replays and ``verify``.

A ``ProjectionBatch`` holds the projection rows one batch of events touches, as plain dicts: it fetches the rows the
batch refers to with one indexed query per table (``prefetch``), folds every event in memory (``apply``), and writes
what changed with one executemany INSERT and one executemany UPDATE per table (``write``), inside the caller's
transaction. Without a connection it starts from empty tables, which is a replay.

Criterion scores are ``score`` rows: one per criterion of each step of a reward record (``RewardEstimated``,
``RewardFinalised``), keyed by the record's seq and the score's place in it; a record that supersedes another marks
every score of the old one superseded. Ledgers from before scores moved into the records hold one ``Scored`` event
per score, projected at ``ordinal`` 0.

Rung results are ``observation`` rows keyed by the event's seq and the result's place in it (``ordinal``): a
``Screened`` round holds every result and decision of one screening round, in order; ledgers from before it hold one
``Simulated`` per result and one ``Promoted`` per decision, each result projected at ``ordinal`` 0, and fold to the
same rows but for the key. Lab results (``Observed``) are at ``ordinal`` 0.

Every row an event adds or changes is stamped with the event's seq (``updated_seq``), which is what lets a reader
fetch only the rows that changed since it last looked.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Iterable
from functools import cache, lru_cache
from typing import Any

from pydantic_core import PydanticUndefined
from sqlalchemy.engine import Connection

from orchestrator.ledger.driver import column_names, driver_read, row_dicts
from orchestrator.ledger.errors import LedgerConflict
from orchestrator.ledger.tables import (
    PROJECTION_TABLES,
    CampaignRow,
    CandidateRow,
    LabJobRow,
    ObservationRow,
    ScoreRow,
)
from vocabulary.domain import objective_utility
from vocabulary.events import (
    ApprovalRequested,
    Approved,
    CampaignStarted,
    CampaignStopped,
    Dispatched,
    EventPayload,
    Observed,
    Promoted,
    Proposed,
    Rejected,
    ResultsAwaited,
    RewardEstimated,
    RewardFinalised,
    RungDecision,
    RungRun,
    Scored,
    Screened,
    Simulated,
)

__all__ = ["ProjectionBatch", "primary_key", "row_defaults"]

Row = dict[str, Any]
_IN_CHUNK = 500


def primary_key(table: type) -> tuple[str, ...]:
    """Column names of a projection table's primary key."""
    return tuple(column.name for column in table.__table__.primary_key.columns)


def row_defaults(table: type) -> Row:
    """Every column of a projection table with its model default (None where it has none)."""
    out = {}
    for column in table.__table__.columns:
        field = table.model_fields.get(column.name)
        default = None if field is None else field.default
        out[column.name] = None if default is PydanticUndefined else default
    return out


def _key_getter(names: tuple[str, ...]) -> Callable[[Row], tuple]:
    """A C-level getter of a row's key tuple (``itemgetter`` of one name returns the item, not a tuple)."""
    if len(names) == 1:
        return lambda row, name=names[0]: (row[name],)
    return operator.itemgetter(*names)


_PK = {table: primary_key(table) for table in PROJECTION_TABLES}
_DEFAULTS = {table: row_defaults(table) for table in PROJECTION_TABLES}
_KEY = {table: _key_getter(_PK[table]) for table in PROJECTION_TABLES}


class ProjectionBatch:
    """The projection rows of one campaign that a batch of events touches, folded in memory.

    Args:
        campaign_id: the campaign whose events are folded.
        connection: read rows the events refer to from here, and ``write`` back to it; None folds from empty tables.
    """

    def __init__(self, campaign_id: str, connection: Connection | None = None):
        self.campaign_id = campaign_id
        self.connection = connection
        self.rows: dict[type, dict[tuple, Row | None]] = {table: {} for table in PROJECTION_TABLES}
        self._stored: dict[type, set[tuple]] = {table: set() for table in PROJECTION_TABLES}
        self._changed: dict[type, set[tuple]] = {table: set() for table in PROJECTION_TABLES}
        self._record_scores: dict[int, list[tuple]] = {}
        """reward record seq -> the keys of its score rows (those fetched or added by this batch)"""
        self._seq = 0

    # ----------------------------------------------------------------------------------------------- reading
    def prefetch(self, payloads: Iterable[EventPayload]) -> None:
        """Fetch, with one query per table, every stored row the payloads can touch."""
        payloads = list(payloads)
        candidates, jobs, scores, records = set(), set(), set(), set()
        for payload in payloads:
            if (candidate_id := getattr(payload, "candidate_id", None)) is not None:
                candidates.add(candidate_id)
            if isinstance(payload, Screened):
                candidates.update(step.candidate_id for step in payload.steps)
            if isinstance(payload, Observed):
                jobs.add(payload.job_key)
            if isinstance(payload, Scored) and payload.supersedes_seq is not None:
                scores.add(payload.supersedes_seq)
            if isinstance(payload, RewardEstimated | RewardFinalised) and payload.supersedes_seq is not None:
                records.add(payload.supersedes_seq)
        if any(isinstance(p, CampaignStarted | Observed | CampaignStopped) for p in payloads):
            self._fetch(CampaignRow, [(self.campaign_id,)])
        self._fetch(CandidateRow, [(self.campaign_id, c) for c in candidates])
        self._fetch(LabJobRow, [(self.campaign_id, j) for j in jobs])
        self._fetch(ScoreRow, [(self.campaign_id, s, 0) for s in scores])
        self._fetch_record_scores(records)

    def _fetch(self, table: type, keys: list[tuple]) -> None:
        cache = self.rows[table]
        wanted = [key for key in keys if key not in cache]
        if not wanted:
            return
        for key in wanted:
            cache[key] = None
        if self.connection is None:
            return
        pk = _PK[table]
        for start in range(0, len(wanted), _IN_CHUNK):
            chunk = wanted[start:start + _IN_CHUNK]
            # by the key's first column alone (the campaign row), or the campaign and the key's next column
            if len(pk) == 1:
                where, params = f"{pk[0]} IN ({', '.join('?' * len(chunk))})", [k[0] for k in chunk]
            else:
                where = f"{pk[0]} = ? AND {pk[1]} IN ({', '.join('?' * len(chunk))})"
                params = [self.campaign_id, *dict.fromkeys(k[1] for k in chunk)]
            for found in self._select(table, where, params):
                key = tuple(found[name] for name in pk)
                cache[key] = found
                self._stored[table].add(key)

    def _select(self, table: type, where: str, params: list) -> list[Row]:
        """Stored rows of ``table`` matching ``where`` (``?`` placeholders), as column -> value dicts."""
        sql = f"SELECT {', '.join(column_names(table))} FROM {table.__tablename__} WHERE {where}"
        found = driver_read(self.connection, sql, params, is_postgres=self.connection.dialect.name == "postgresql")
        return row_dicts(table, found)

    def _fetch_record_scores(self, seqs: Iterable[int]) -> None:
        """Fetch every score row of the given reward records (one indexed query per chunk)."""
        wanted = [seq for seq in seqs if seq not in self._record_scores]
        for seq in wanted:
            self._record_scores[seq] = []
        if self.connection is None or not wanted:
            return
        for start in range(0, len(wanted), _IN_CHUNK):
            chunk = wanted[start:start + _IN_CHUNK]
            where = f"campaign_id = ? AND seq IN ({', '.join('?' * len(chunk))})"
            for found in self._select(ScoreRow, where, [self.campaign_id, *chunk]):
                key = (found["campaign_id"], found["seq"], found["ordinal"])
                if key not in self.rows[ScoreRow]:
                    self.rows[ScoreRow][key] = found
                    self._stored[ScoreRow].add(key)
                self._record_scores[found["seq"]].append(key)

    def _get(self, table: type, key: tuple) -> Row | None:
        if key not in self.rows[table]:
            self._fetch(table, [key])
        return self.rows[table][key]

    # ----------------------------------------------------------------------------------------------- folding
    def _touch(self, table: type, key: tuple, row: Row) -> Row:
        row["updated_seq"] = self._seq
        self.rows[table][key] = row
        self._changed[table].add(key)
        return row

    def _add(self, table: type, **values: Any) -> Row:
        row = {**_DEFAULTS[table], **values, "updated_seq": self._seq}
        key = _KEY[table](row)
        self.rows[table][key] = row
        self._changed[table].add(key)
        return row

    def _set_candidate_status(self, candidate_id: str | None, status: str, **extra: Any) -> None:
        if candidate_id is None:
            return
        key = (self.campaign_id, candidate_id)
        row = self._get(CandidateRow, key)
        if row is not None:
            row.update(status=status, **extra)
            self._touch(CandidateRow, key, row)

    def apply(self, seq: int, payload: EventPayload) -> None:
        """Fold one event into the rows."""
        self._seq = seq
        cid = self.campaign_id
        match payload:
            case CampaignStarted():
                if self._get(CampaignRow, (cid,)) is not None:
                    raise LedgerConflict(f"campaign {cid!r} has already started; pick a new campaign id or resume it")
                self._add(CampaignRow, id=cid, name=payload.name, seed=payload.seed, started_seq=seq,
                          objective=json.dumps(payload.spec.get("objective", {}), sort_keys=True))
            case Proposed():
                if self._get(CandidateRow, (cid, payload.candidate_id)) is None:
                    self._add(CandidateRow, campaign_id=cid, candidate_id=payload.candidate_id,
                              kind=payload.candidate["type"], canonical=json.dumps(payload.candidate, sort_keys=True),
                              arm=payload.arm, iteration=payload.iteration, status="proposed", first_seq=seq)
            case Rejected():
                row = self._get(CandidateRow, (cid, payload.candidate_id)) if payload.candidate_id else None
                # A duplicate proposal of an already tested candidate must not demote the original.
                if row is not None and row["status"] in {"proposed", "screened"} and row["iteration"] == payload.iteration:
                    self._set_candidate_status(payload.candidate_id, "rejected")
            case Simulated():
                self._fold_rung_run(seq, 0, payload)
            case Promoted():
                self._fold_decision(payload)
            case Screened():
                ordinal = 0
                for step in payload.steps:
                    if isinstance(step, RungRun):
                        self._fold_rung_run(seq, ordinal, step)
                        ordinal += 1
                    else:
                        self._fold_decision(step)
            case Dispatched():
                self._add(LabJobRow, campaign_id=cid, job_key=payload.job_key, candidate_id=payload.candidate_id,
                          arm=payload.arm, iteration=payload.iteration, driver=payload.driver, status="dispatched",
                          dispatched_seq=seq, submitted_s=payload.sim_time_s)
                self._set_candidate_status(payload.candidate_id, "dispatched")
            case Observed():
                self._fold_observed(seq, payload)
                self._fold_waiting("waiting_for_results", "running")
            case ResultsAwaited():
                self._fold_waiting("running", "waiting_for_results")
            case Scored():
                if payload.supersedes_seq is not None:
                    self._supersede_score((cid, payload.supersedes_seq, 0), seq)
                self._add(ScoreRow, campaign_id=cid, seq=seq, ordinal=0, iteration=payload.iteration,
                          stage=payload.stage, subject=payload.subject, rubric_id=payload.rubric_id,
                          rubric_version=payload.rubric_version, criterion_id=payload.criterion_id,
                          value=payload.value, weight=payload.weight, is_provisional=payload.is_provisional)
            case RewardEstimated() | RewardFinalised():
                self._fold_record_scores(seq, payload)
            case ApprovalRequested():
                self._fold_waiting("running", "waiting_for_approval")
            case Approved():
                self._fold_waiting("waiting_for_approval", "running")
            case CampaignStopped():
                campaign = self._get(CampaignRow, (cid,))
                if campaign is not None:
                    campaign.update(status="stopped", stop_reason=payload.reason,
                                    best_candidate_id=payload.best_candidate_id, best_value=payload.best_value)
                    self._touch(CampaignRow, (cid,), campaign)
            case _:
                pass  # events without a projection (ApprovalRequested, SurrogateUpdated, LLMCall, ...)

    def _fold_waiting(self, before: str, after: str) -> None:
        """A running campaign waits for a person: for approval from its ``ApprovalRequested`` until the ``Approved``
        that answers it (a policy's approval is written in the same transaction, so it never shows as waiting), and
        for results entered by hand from a manual lab's ``ResultsAwaited`` until the next ``Observed``."""
        campaign = self._get(CampaignRow, (self.campaign_id,))
        if campaign is not None and campaign["status"] == before:
            campaign.update(status=after)
            self._touch(CampaignRow, (self.campaign_id,), campaign)

    def _fold_rung_run(self, seq: int, ordinal: int, run: Simulated | RungRun) -> None:
        obs = run.observation
        self._add(ObservationRow, campaign_id=self.campaign_id, seq=seq, ordinal=ordinal, candidate_id=run.candidate_id,
                  source=run.rung, fidelity=obs.get("fidelity", 0), is_lab=False, status=obs.get("status", "ok"),
                  properties=json.dumps(obs.get("properties", {}), sort_keys=True), reason=obs.get("reason"),
                  cost_s=obs.get("cost_s", 0.0), provenance="simulator")
        self._set_candidate_status(run.candidate_id, "screened", highest_rung=run.rung)

    def _fold_decision(self, decision: Promoted | RungDecision) -> None:
        if decision.to_rung == "lab":
            status = {"promote": "screened", "hold": "held", "skip": "skipped"}[decision.decision]
            self._set_candidate_status(decision.candidate_id, status)

    def _supersede_score(self, key: tuple, seq: int) -> None:
        old = self._get(ScoreRow, key)
        if old is not None:
            old["superseded_by_seq"] = seq
            self._touch(ScoreRow, key, old)

    def _fold_record_scores(self, seq: int, payload: RewardEstimated | RewardFinalised) -> None:
        """One score row per criterion of each step the record carries; the record it supersedes loses its own."""
        if payload.supersedes_seq is not None:
            self._fetch_record_scores([payload.supersedes_seq])
            for key in self._record_scores[payload.supersedes_seq]:
                self._supersede_score(key, seq)
        keys = self._record_scores.setdefault(seq, [])
        rows, changed, cid = self.rows[ScoreRow], self._changed[ScoreRow], self.campaign_id
        # the columns every score of the record shares; one dict copy per score (the reward node writes many)
        shared = {**_DEFAULTS[ScoreRow], "campaign_id": cid, "seq": seq, "iteration": payload.iteration,
                  "rubric_id": payload.rubric_id, "rubric_version": payload.rubric_version,
                  "is_provisional": isinstance(payload, RewardEstimated), "updated_seq": seq}
        for step in payload.steps:
            stage, subject = step["stage"], step["subject"]
            for score in step.get("scores", ()):
                key = (cid, seq, len(keys))
                row = shared.copy()
                row.update(ordinal=key[2], stage=stage, subject=subject, criterion_id=score["criterion_id"],
                           value=score["value"], weight=score["weight"])
                rows[key] = row
                changed.add(key)
                keys.append(key)

    def _fold_observed(self, seq: int, payload: Observed) -> None:
        cid = self.campaign_id
        self._add(ObservationRow, campaign_id=cid, seq=seq, ordinal=0, candidate_id=payload.candidate_id,
                  source=payload.driver or "lab", fidelity=-1, is_lab=True, status=payload.status, value=payload.value,
                  properties=json.dumps({"value": payload.value, "uncertainty": payload.uncertainty}),
                  reason=payload.reason, provenance=payload.provenance, sim_time_s=payload.sim_time_s)
        job = self._get(LabJobRow, (cid, payload.job_key))
        if job is not None:
            job.update(status="done" if payload.status == "ok" else "failed", observed_seq=seq,
                       completed_s=payload.sim_time_s, value=payload.value)
            self._touch(LabJobRow, (cid, payload.job_key), job)
        self._set_candidate_status(payload.candidate_id, "observed" if payload.status == "ok" else "failed")
        campaign = self._get(CampaignRow, (cid,))
        if campaign is not None:
            campaign["n_lab"] += 1
            utility = _utility(campaign["objective"], payload.value) if payload.status == "ok" else None
            if utility is not None and (campaign["best_value"] is None
                                        or utility > _utility(campaign["objective"], campaign["best_value"])):
                campaign["best_value"], campaign["best_candidate_id"] = payload.value, payload.candidate_id
            self._touch(CampaignRow, (cid,), campaign)

    # ----------------------------------------------------------------------------------------------- writing
    def write(self, connection: Connection | None = None) -> None:
        """INSERT the new rows and UPDATE the changed stored ones, one executemany each per table, on the driver's
        cursor inside the caller's transaction (SQLAlchemy's per-row parameter processing cost more than the write;
        these tables hold only text, numbers and booleans, which both drivers bind as they are)."""
        connection = connection or self.connection
        is_postgres = connection.dialect.name == "postgresql"
        cursor = None
        try:
            for table in PROJECTION_TABLES:
                changed = self._changed[table]
                if not changed:
                    continue
                if cursor is None:
                    cursor = connection.connection.cursor()
                stored, rows = self._stored[table], self.rows[table]
                insert_sql, insert_values, update_sql, update_values = _write_statements(table, is_postgres)
                fresh = [insert_values(rows[key]) for key in changed if key not in stored]
                updated = [update_values(rows[key]) for key in changed if key in stored]
                if fresh:
                    cursor.executemany(insert_sql, fresh)
                if updated:
                    cursor.executemany(update_sql, updated)
                stored.update(changed)
                changed.clear()
        finally:
            if cursor is not None:
                cursor.close()

    def final_rows(self) -> dict[type, dict[tuple, Row]]:
        """Every row that exists after the fold, by table and primary key (a replay's result)."""
        return {table: {k: r for k, r in rows.items() if r is not None} for table, rows in self.rows.items()}


@cache
def _write_statements(table: type, is_postgres: bool) -> tuple[str, Callable[[Row], tuple], str,
                                                                Callable[[Row], tuple]]:
    """(INSERT of every column, its values getter, UPDATE of the non-key columns by key, its values getter) of a
    projection table, with the driver's placeholders (``?`` for sqlite3, ``%s`` for psycopg)."""
    mark = "%s" if is_postgres else "?"
    names = column_names(table)
    values = [name for name in names if name not in _PK[table]]
    insert_sql = f"INSERT INTO {table.__tablename__} ({', '.join(names)}) VALUES ({', '.join([mark] * len(names))})"
    update_sql = (f"UPDATE {table.__tablename__} SET {', '.join(f'{name} = {mark}' for name in values)} "
                  f"WHERE {' AND '.join(f'{name} = {mark}' for name in _PK[table])}")
    return insert_sql, operator.itemgetter(*names), update_sql, operator.itemgetter(*values, *_PK[table])


def _utility(objective_json: str, value: float | None) -> float | None:
    if value is None:
        return None
    direction, target = _objective(objective_json)
    return objective_utility(direction, value, target)


@lru_cache(maxsize=64)
def _objective(objective_json: str) -> tuple[str, float | None]:
    """(direction, target) of a campaign row's objective JSON (parsed once per text: every lab result asks)."""
    objective = json.loads(objective_json or "{}")
    return objective.get("direction", "maximize"), objective.get("target")

