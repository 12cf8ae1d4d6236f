"""Alembic environment for the closedloop ledger.

closedloop passes an open connection (``config.attributes["connection"]``, see ``orchestrator.ledger.migrations.upgrade``);
the ``alembic`` command line takes the database from ``-x db=URL`` or ``sqlalchemy.url``. Importing this module
outside Alembic (pytest's doctest collection does) does nothing.
"""

from __future__ import annotations

from alembic import context

try:
    config = context.config
except AttributeError:  # imported outside an Alembic run
    config = None


def _target_metadata():
    from sqlmodel import SQLModel

    from orchestrator.ledger import tables  # noqa: F401  (registers the ledger tables)

    return SQLModel.metadata


def _run(connection) -> None:
    context.configure(connection=connection, target_metadata=_target_metadata(), render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def _main() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    from orchestrator.ledger import Ledger

    url = context.get_x_argument(as_dictionary=True).get("db") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise SystemExit("give the ledger database: alembic -x db=postgresql://… (or a SQLite path) upgrade head")
    ledger = Ledger.open(url, migrate=False)
    try:
        with ledger.engine.begin() as connection:
            _run(connection)
    finally:
        ledger.close()


if config is not None:
    if context.is_offline_mode():
        raise SystemExit("closedloop's ledger migrations run online only (they create triggers per dialect)")
    _main()
