"""The simulation result cache: a ``simulation_cache`` table in the ledger's own database.

A result is keyed by (candidate id, simulator name, simulator version, sha256 of the canonical JSON of the
simulator's parameters) and stored as the full ``Observation`` JSON. Bumping the version or changing a parameter
therefore makes a new key; old rows stay, unused. A stored result is never overwritten and never recomputed.

What is cached: ``ok`` observations, and failures the calculation itself reported (an unreadable SMILES, an invalid
geometry, an SCF that does not converge), because running the same deterministic calculation again fails the same
way. What is not: failures an executor wrote (``timeout after ...``, ``worker lost: ...``; see
``simulators.executor_batch.is_transient_failure``), because they depend on the machine and the moment.

Writers never conflict: rows are inserted with on-conflict-do-nothing (SQLite ``INSERT OR IGNORE``, Postgres
``ON CONFLICT DO NOTHING``), so two campaigns that compute the same result keep the first copy. A SQLite file is
opened in WAL mode with a busy timeout, as the ledger does.

This module imports no ledger code: pass it the ledger's engine (``Ledger.engine``) or the same path or URL.

Example:
    >>> from vocabulary.domain import Molecule
    >>> from simulators.table import TableSimulator
    >>> ethanol = Molecule.parse("CCO")
    >>> table = TableSimulator("calc", {ethanol.id: -4.9}, "dg_hydration")
    >>> cache = SimulationCache(":memory:")
    >>> [obs], [is_cached] = cache.evaluate(table, [ethanol])
    >>> [again], [is_cached_again] = cache.evaluate(table, [ethanol])
    >>> is_cached, is_cached_again, again == obs
    (False, True, True)
    >>> cache.stats()
    CacheStats(n_hits=1, n_misses=1, n_rows=1)
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Column, Text, func, inspect
from sqlalchemy import event as sa_event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError
from sqlalchemy.pool import StaticPool
from sqlmodel import Field, Session, SQLModel, create_engine, select

from simulators.base import AnyCandidate, Simulator
from simulators.executor import Executor, SerialExecutor
from simulators.executor_batch import check_batch, is_transient_failure
from vocabulary.domain import Observation, SetupError

__all__ = ["CacheStats", "SimulationCache", "SimulationCacheRow", "parameters_sha256"]

# SQLite allows at most 999 host parameters per statement in old builds; stay well below.
_IN_CHUNK = 500


class SimulationCacheRow(SQLModel, table=True):
    """One cached result. The primary key is the cache key."""

    __tablename__ = "simulation_cache"
    candidate_id: str = Field(primary_key=True)
    simulator: str = Field(primary_key=True, description="simulator name")
    version: str = Field(primary_key=True, description="simulator version")
    parameters_sha256: str = Field(primary_key=True, description="sha256 of the canonical JSON of the parameters")
    status: str = Field(description="ok | failed")
    observation: str = Field(sa_column=Column(Text, nullable=False), description="the Observation as JSON")
    stored_at: datetime = Field(description="wall-clock UTC time of the insert; informational")


@dataclass(frozen=True)
class CacheStats:
    """Look-ups answered from the cache (``n_hits``) or not (``n_misses``) by this object, and rows stored in all."""

    n_hits: int
    n_misses: int
    n_rows: int


def parameters_sha256(parameters: dict[str, Any]) -> str:
    """sha256 (hex) of the canonical JSON of a simulator's parameters: sorted keys, no whitespace, no NaN.

    Example:
        >>> parameters_sha256({"b": 1, "a": [1.5]}) == parameters_sha256({"a": [1.5], "b": 1})
        True
    """
    try:
        text = json.dumps(parameters, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise SetupError(
            f"simulator parameters {parameters!r} are not plain JSON, so they cannot key the cache: {exc}"
        ) from exc
    return hashlib.sha256(text.encode()).hexdigest()


class SimulationCache:
    """Simulation results cached in the ledger database.

    Args:
        db: the ledger's SQLAlchemy ``Engine`` (shared, not disposed by ``close``), or a path, ``":memory:"`` or an
            SQLAlchemy URL to open (disposed by ``close``). The ``simulation_cache`` table is created if missing.
    """

    def __init__(self, db: str | Path | Engine) -> None:
        if isinstance(db, Engine):
            self.engine, self._is_owner = db, False
        else:
            self.engine, self._is_owner = _open_engine(db), True
        self._create_table()
        self._lock = threading.Lock()
        self._n_hits = 0
        self._n_misses = 0

    @property
    def url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    # ----------------------------------------------------------------------------------------------- reading
    def get_many(self, simulator: Simulator, candidates: Iterable[AnyCandidate]) -> dict[str, Observation]:
        """Cached observations of ``simulator`` (its name, version and parameters) by candidate id; misses are absent.

        Each distinct candidate id counts once as a hit or a miss in ``stats()``.
        """
        ids = list(dict.fromkeys(candidate.id for candidate in candidates))
        name, version, digest = _key(simulator)
        found: dict[str, Observation] = {}
        with Session(self.engine) as session:
            for start in range(0, len(ids), _IN_CHUNK):
                query = select(SimulationCacheRow.candidate_id, SimulationCacheRow.observation).where(
                    SimulationCacheRow.simulator == name,
                    SimulationCacheRow.version == version,
                    SimulationCacheRow.parameters_sha256 == digest,
                    SimulationCacheRow.candidate_id.in_(ids[start : start + _IN_CHUNK]),
                )
                for candidate_id, text in session.exec(query):
                    found[candidate_id] = Observation.model_validate_json(text)
        with self._lock:
            self._n_hits += len(found)
            self._n_misses += len(ids) - len(found)
        return found

    def stats(self) -> CacheStats:
        """Hits and misses seen by this object, and the rows in the table (for every simulator)."""
        with Session(self.engine) as session:
            n_rows = session.exec(select(func.count()).select_from(SimulationCacheRow)).one()
        with self._lock:
            return CacheStats(n_hits=self._n_hits, n_misses=self._n_misses, n_rows=int(n_rows))

    # ----------------------------------------------------------------------------------------------- writing
    def put_many(self, simulator: Simulator, observations: Iterable[Observation]) -> None:
        """Store observations of ``simulator``; transient failures are skipped and existing keys are kept as they are.

        Raises:
            SetupError: if an observation came from another simulator or another version of it.
        """
        name, version, digest = _key(simulator)
        now = datetime.now(UTC)
        rows: dict[str, dict[str, Any]] = {}
        for obs in observations:
            if (obs.source, obs.source_version) != (name, version):
                raise SetupError(
                    f"observation of {obs.candidate_id} comes from {obs.source!r} version {obs.source_version!r}, "
                    f"not {name!r} version {version!r}; store it under the simulator that made it"
                )
            if is_transient_failure(obs):
                continue
            rows.setdefault(
                obs.candidate_id,
                {
                    "candidate_id": obs.candidate_id,
                    "simulator": name,
                    "version": version,
                    "parameters_sha256": digest,
                    "status": obs.status,
                    "observation": obs.model_dump_json(),
                    "stored_at": now,
                },
            )
        if rows:
            self._insert_ignoring_conflicts(list(rows.values()))

    def _insert_ignoring_conflicts(self, rows: list[dict[str, Any]]) -> None:
        table = SimulationCacheRow.__table__
        dialect = self.engine.dialect.name
        if dialect in ("sqlite", "postgresql"):
            if dialect == "sqlite":
                from sqlalchemy.dialects.sqlite import insert
            else:
                from sqlalchemy.dialects.postgresql import insert
            with self.engine.begin() as conn:
                conn.execute(insert(table).on_conflict_do_nothing(), rows)
            return
        for row in rows:  # another database: one statement per row, a duplicate key is someone else's equal result
            try:
                with self.engine.begin() as conn:
                    conn.execute(table.insert(), [row])
            except IntegrityError:
                continue

    # ----------------------------------------------------------------------------------------------- both
    def evaluate(
        self,
        simulator: Simulator,
        candidates: Sequence[AnyCandidate],
        executor: Executor | None = None,
        *,
        timeout_s: float | None = None,
    ) -> tuple[list[Observation], list[bool]]:
        """One observation per candidate, in order, plus whether each came from the cache.

        Only the misses are computed (each distinct candidate once), through ``executor`` if given and in this
        process otherwise; they are stored before returning. A cached observation comes back exactly as stored,
        ``cost_s`` included: the caller decides what a hit is charged.

        Raises:
            SetupError: before anything is looked up or run, for a batch the simulator cannot take or a bad
                ``timeout_s``.
        """
        batch = check_batch(simulator, candidates, timeout_s=timeout_s)
        cached = self.get_many(simulator, batch)
        misses = list({c.id: c for c in batch if c.id not in cached}.values())
        fresh: dict[str, Observation] = {}
        if misses:
            runner = executor if executor is not None else SerialExecutor()
            computed = runner.map_evaluate(simulator, misses, timeout_s=timeout_s)
            if [obs.candidate_id for obs in computed] != [c.id for c in misses]:
                raise SetupError(
                    f"executor {runner!r} returned observations for {[o.candidate_id for o in computed]} instead of "
                    f"{[c.id for c in misses]}; an executor must return one observation per candidate, in order"
                )
            self.put_many(simulator, computed)
            fresh = {obs.candidate_id: obs for obs in computed}
        observations = [cached[c.id] if c.id in cached else fresh[c.id] for c in batch]
        return observations, [c.id in cached for c in batch]

    def close(self) -> None:
        """Dispose of the engine if this cache opened it."""
        if self._is_owner:
            self.engine.dispose()

    def __enter__(self) -> SimulationCache:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SimulationCache({self.url!r})"

    def _create_table(self) -> None:
        table = SimulationCacheRow.__table__
        try:
            SQLModel.metadata.create_all(self.engine, tables=[table])
        except (IntegrityError, OperationalError, ProgrammingError):
            # Another process created it between the existence check and CREATE TABLE. PostgreSQL reports that race
            # as a unique violation on its catalogue (pg_type_typname_nsp_index), SQLite as an operational error.
            if not inspect(self.engine).has_table(table.name):
                raise


def _key(simulator: Simulator) -> tuple[str, str, str]:
    return simulator.name, simulator.version, parameters_sha256(dict(getattr(simulator, "parameters", None) or {}))


def _open_engine(db: str | Path) -> Engine:
    """An engine for a path, ``:memory:`` or URL, configured like the ledger's (WAL and a busy timeout for SQLite)."""
    text = str(db)
    if "://" in text:
        url = text
    elif text == ":memory:":
        url = "sqlite://"
    else:
        path = Path(text).expanduser().resolve()
        if not path.parent.exists():
            raise SetupError(f"database directory {path.parent} does not exist; create it or use another path")
        url = f"sqlite:///{path}"
    if not url.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True)
    is_memory = url in ("sqlite://", "sqlite:///:memory:")
    if is_memory:
        engine = create_engine(url, connect_args={"check_same_thread": False}, poolclass=StaticPool)
    else:
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

    @sa_event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):  # pragma: no cover - runs on every new connection
        cursor = dbapi_connection.cursor()
        if not is_memory:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    return engine
