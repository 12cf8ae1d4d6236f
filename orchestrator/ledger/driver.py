"""Reads straight from the database driver's cursor, for the ledger's hot paths.

SQLAlchemy's statement machinery costs about 150 us a call on this machine and the driver's cursor about 10 us; the
campaign loop reads the ledger a few hundred times an iteration, so its frequent, fixed-shape reads use these. SQL is
written with ``?`` placeholders (SQLite's) and rewritten to ``%s`` for PostgreSQL (psycopg). On SQLite a read outside a
SQLAlchemy transaction also avoids the write lock that ``BEGIN IMMEDIATE`` takes (see ``ledger.store``).
"""

from __future__ import annotations

import collections
import functools
import sys
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Boolean
from sqlalchemy.engine import Connection

__all__ = ["column_names", "driver_read", "row_dicts", "row_view", "row_views", "typed_rows"]


def driver_read(conn: Connection, sql: str, params: Sequence[Any], *, is_postgres: bool) -> list[tuple]:
    """Run one read on ``conn``'s driver connection (inside its transaction, if it has one)."""
    cursor = conn.connection.cursor()
    try:
        cursor.execute(sql.replace("?", "%s") if is_postgres else sql, tuple(params))
        return cursor.fetchall()
    finally:
        cursor.close()


@functools.cache
def column_names(table: type) -> tuple[str, ...]:
    """A table model's columns, in the order ``SELECT {columns}`` returns them."""
    return tuple(c.name for c in table.__table__.columns)


@functools.cache
def _boolean_positions(table: type) -> tuple[int, ...]:
    return tuple(i for i, c in enumerate(table.__table__.columns) if isinstance(c.type, Boolean))


_SHARED_TEXT_COLUMNS = frozenset({"campaign_id", "arm", "driver", "status", "kind", "source", "provenance", "stage",
                                   "rubric_id", "rubric_version", "criterion_id", "highest_rung"})
"""Text columns with a handful of values each: a read cache holding every job and observation of a long campaign
keeps one copy of each value (``sys.intern``) instead of a string per row (about a third of a cached row's bytes)."""


@functools.cache
def _shared_text_positions(table: type) -> tuple[int, ...]:
    return tuple(i for i, name in enumerate(column_names(table)) if name in _SHARED_TEXT_COLUMNS)


def _typed(table: type, raw: tuple) -> list[Any]:
    values = list(raw)
    for i in _boolean_positions(table):
        if values[i] is not None:
            values[i] = bool(values[i])  # SQLite keeps booleans as 0/1
    return values


def _viewed(table: type, raw: tuple) -> list[Any]:
    values = _typed(table, raw)
    for i in _shared_text_positions(table):
        if type(values[i]) is str:
            values[i] = sys.intern(values[i])
    return values


def typed_rows(table: type, rows: list[tuple]) -> list[tuple]:
    """Driver rows with booleans as bool; rows of a table without boolean columns are returned as they are."""
    return [tuple(_typed(table, raw)) for raw in rows] if _boolean_positions(table) else rows


def row_dicts(table: type, rows: list[tuple]) -> list[dict[str, Any]]:
    """Driver rows of ``SELECT {column_names(table)}`` as column -> value dicts, as SQLAlchemy would return them."""
    names = column_names(table)
    return [dict(zip(names, _typed(table, raw), strict=True)) for raw in rows]


@functools.cache
def row_view(table: type) -> type:
    """The read-only view of a projection table's rows that ledger reads return: a named tuple of its columns (a
    tenth of an ORM instance's memory; a 10,000-experiment campaign keeps every job and observation in its read
    cache), with ``model_dump()`` as the model has."""
    base = collections.namedtuple(f"{table.__name__}View", column_names(table))
    return type(base.__name__, (base,), {"__slots__": (), "__doc__": f"A read-only row of ``{table.__tablename__}``.",
                                         "model_dump": lambda self: dict(self._asdict())})


def row_views(table: type, rows: list[tuple]) -> list[Any]:
    """Driver rows of ``SELECT {column_names(table)}`` as ``row_view(table)`` instances."""
    view = row_view(table)
    return [view(*_viewed(table, raw)) for raw in rows]
