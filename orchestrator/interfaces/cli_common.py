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

DbOption = Annotated[str, typer.Option("--db", help="ledger database: a path (SQLite) or an SQLAlchemy URL")]


def print_error(message: str) -> None:
    """Write ``error: message`` to stderr in red, as one line: never wrapped, and brackets printed as they are.

    Rich reads ``[dft]`` in ``pip install "closedloop[dft]"`` as markup and would drop it, so the message is escaped.
    The credentials of any URL in it are redacted.
    """
    from rich.markup import escape

    Console(stderr=True).print(f"[bold red]error:[/] {escape(redact_urls_in(message))}", highlight=False, soft_wrap=True)


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


def open_existing(db: str):
    """The ledger at ``db``; a missing file or an unreadable ledger ends the command with one line."""
    from orchestrator.ledger import Ledger, LedgerError

    if "://" not in db and db != ":memory:" and not Path(db).exists():
        fail(f"no ledger database at {db}; run a campaign first or pass --db PATH")
    try:
        return Ledger.open(db)
    except LedgerError as exc:
        fail(str(exc))


def ledger_with(db: str, campaign_id: str):
    """The ledger at ``db``, which must hold ``campaign_id``."""
    ledger = open_existing(db)
    if not ledger.n_events(campaign_id):
        fail(f"campaign {campaign_id!r} has no events in {db}; campaigns there: {ledger.campaign_ids_with_events()}")
    return ledger


def run_app(app: typer.Typer, argv: Sequence[str] | None = None) -> None:
    """Run a typer ``app`` on ``argv`` (default: ``sys.argv[1:]``); a closedloop error that escapes a command ends
    the process as one ``error:`` line and exit code ``EXIT_ERROR``, never a traceback."""
    try:
        app(args=None if argv is None else list(argv))
    except ClosedLoopError as exc:
        print_error(str(exc) or type(exc).__name__)
        sys.exit(EXIT_ERROR)
