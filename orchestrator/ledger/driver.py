"""Reads straight from the database driver's cursor, for the ledger's hot paths.

SQLAlchemy's statement machinery costs about 150 us a call on this machine and the driver's cursor about 10 us; the
campaign loop reads the ledger a few hundred times an iteration, so its frequent, fixed-shape reads use these. SQL is
written with ``?`` placeholders (SQLite's) and rewritten to ``%s`` for PostgreSQL (psycopg). On SQLite a read outside a
SQLAlchemy transaction also avoids the write lock that ``BEGIN IMMEDIATE`` takes (see ``ledger.store``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Boolean
from sqlalchemy.engine import Connection

__all__ = ["column_names", "driver_read", "row_dicts"]


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


def row_dicts(table: type, rows: list[tuple]) -> list[dict[str, Any]]:
    """Driver rows of ``SELECT {column_names(table)}`` as column -> value dicts, booleans as bool (SQLite keeps
    them as 0/1), as SQLAlchemy would return them."""
    names, flags = column_names(table), _boolean_positions(table)
    out = []
    for raw in rows:
        values = list(raw)
        for i in flags:
            if values[i] is not None:
                values[i] = bool(values[i])
        out.append(dict(zip(names, values, strict=True)))
    return out
