"""What every ``closedloop`` command module shares: the consoles, the ``--db`` option, the one-line ``error:`` and
JSON output, and opening an existing ledger.

Command modules (``cli``, ``cli_bench``, ``cli_rewards``) import this one and never each other, so the command line
has no import circle; ``cli_main`` (the console script) imports ``cli`` for its app.

Example:
    >>> emit_json({"n_lab": 3})
    {
      "n_lab": 3
    }
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from vocabulary.domain import ClosedLoopError, redact_urls_in

__all__ = ["EXIT_ERROR", "DbOption", "console", "emit_json", "fail", "fmt", "ledger_with", "open_existing", "out",
           "print_error", "run_app"]

EXIT_ERROR = 2
"""The exit code of an ``error:`` line: the same for a command's own (``fail``), an escaped closedloop error
(``cli_main``) and a usage error."""

console = Console(stderr=True)
out = Console()

_db_in_use: list[str] = []
"""The ``--db`` of the command running (the option's callback records it), so that ``run_app`` can name the ledger in
an error met below the ledger (a full disk under the LangGraph checkpoints beside it)."""


def _remember_db(value: str) -> str:
    _db_in_use[:] = [value]
    return value


DbOption = Annotated[str, typer.Option("--db", callback=_remember_db,
                                       help="ledger database: a file path (SQLite; taken as it is written, `?` and "
                                            "`%` included) or a postgresql:// URL")]


def print_error(message: str) -> None:
    """Write ``error: message`` to stderr in red, as one line: never wrapped, and brackets printed as they are.

    Rich reads ``[dft]`` in ``pip install "closedloop[dft]"`` as markup and would drop it, so the message is escaped.
    The credentials of any URL in it are redacted, and the text a spec or a ledger put in it can neither act on the
    terminal nor forge a line (``terminal_text.rich_safe_lines``).
    """
    from orchestrator.interfaces.terminal_text import rich_safe_lines

    Console(stderr=True).print(f"[bold red]error:[/] {rich_safe_lines(redact_urls_in(message))}", highlight=False,
                               soft_wrap=True)


def fail(message: str, code: int = EXIT_ERROR) -> None:
    """End the command with ``error: message`` on stderr and exit ``code``."""
    print_error(message)
    raise typer.Exit(code)


def emit_json(data: Any) -> None:
    """Print ``data`` as indented JSON on stdout (values JSON cannot hold are written with ``str``)."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def fmt(value: Any) -> str:
    """A value for a table cell: a dash for none, four significant digits for a float."""
    return "—" if value is None else (f"{value:.4g}" if isinstance(value, float) else str(value))


def open_existing(db: str, *, read_only: bool = True):
    """The ledger at ``db``; a missing file or an unreadable ledger ends the command with one line.

    ``read_only`` (the default: the commands that call this only read) opens it without writing anything to it or
    beside it, so an archive, a snapshot or a read-only mount reads as well as a working copy. A ledger from an
    older closedloop is migrated first where it can be written, as any command did before; where it cannot, the
    command ends with one line saying so.
    """
    from orchestrator.ledger import (
        Ledger,
        LedgerError,
        LedgerNeedsMigration,
        is_url,
        sqlite_file,
    )
    from orchestrator.ledger.integrity import is_writable

    if not is_url(db) and db != ":memory:" and not Path(db).exists():
        fail(f"no ledger database at {db}; run a campaign first or pass --db PATH")
    try:
        try:
            return Ledger.open(db, read_only=read_only)
        except LedgerNeedsMigration:
            path = sqlite_file(db)
            if path is not None and not is_writable(path):
                raise
            return Ledger.open(db)
    except LedgerError as exc:
        fail(str(exc))


def ledger_with(db: str, campaign_id: str, *, read_only: bool = True):
    """The ledger at ``db``, which must hold ``campaign_id`` (``read_only``: as ``open_existing``)."""
    ledger = open_existing(db, read_only=read_only)
    if not ledger.n_events(campaign_id):
        fail(f"campaign {campaign_id!r} has no events in {db}; campaigns there: {ledger.campaign_ids_with_events()}")
    return ledger


def run_app(app: typer.Typer, argv: Sequence[str] | None = None) -> None:
    """Run a typer ``app`` on ``argv`` (default: ``sys.argv[1:]``); a closedloop error that escapes a command ends
    the process as one ``error:`` line and exit code ``EXIT_ERROR``, never a traceback."""
    _db_in_use.clear()
    try:
        app(args=None if argv is None else list(argv))
    except ClosedLoopError as exc:
        print_error(str(exc) or type(exc).__name__)
        sys.exit(EXIT_ERROR)
    except Exception as exc:
        from orchestrator.ledger.errors import is_disk_full

        if not is_disk_full(exc):
            raise
        print_error(disk_full_message(exc, _db_in_use[0] if _db_in_use else None))
        sys.exit(EXIT_ERROR)


def disk_full_message(exc: BaseException, db: str | None) -> str:
    """One line for a full disk met outside the ledger's own writes (the LangGraph checkpoints, a lease file, an
    output file): what could not be written, that the ledger is consistent, and what to do."""
    import shlex

    chain = _chain(exc)
    filename = next((e.filename for e in chain if isinstance(e, OSError) and e.filename), None)
    what = f"{filename}" if filename else (f"the files beside ledger {db} (its LangGraph checkpoints)" if db
                                           else "a database file")
    where = f" --db {shlex.quote(db)}" if db else ""
    cause = next((e for e in chain if isinstance(e, OSError) or hasattr(e, "sqlite_errorcode")), chain[-1])
    detail = " ".join(str(cause).split())
    return (f"the disk is full: {what} could not be written ({detail}). The ledger{f' {db}' if db else ''} stays "
            f"consistent (each step is written whole or not at all): free space on that disk, then run the command "
            f"again; a campaign continues with `closedloop run --resume CAMPAIGN_ID{where}` (`closedloop ls{where}` "
            f"lists them)")


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc``, the driver error it wraps (``orig``) and what it was raised from, outermost first."""
    found: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in found):
        found.append(current)
        current = getattr(current, "orig", None) or current.__cause__ or current.__context__
    return found
