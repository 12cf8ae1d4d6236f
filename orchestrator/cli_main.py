"""The ``closedloop`` console script: the typer app, with a closedloop error that escapes a command ending it as one
``error:`` line and exit code 2, never a traceback.

Commands catch the errors they expect and word them themselves (``cli._fail``). This is the net under all of them:
a ``MissingDependency`` met deep inside any command (a rung's simulator, a report's plots, an export format, the
ledger's migrations) reads as the one line that names the extra to install. Anything that is not a
``ClosedLoopError`` is a bug and keeps its traceback.

Example:
    >>> main(["--help"])
    Traceback (most recent call last):
    ...
    SystemExit: 0
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .domain import ClosedLoopError, redact_urls_in

__all__ = ["EXIT_ERROR", "main", "print_error"]

EXIT_ERROR = 2
"""The exit code of an ``error:`` line: the same as a command's own (``cli._fail``) and a usage error's."""


def print_error(message: str) -> None:
    """Write ``error: message`` to stderr in red, as one line: never wrapped, and brackets printed as they are.

    Rich reads ``[dft]`` in ``pip install "closedloop[dft]"`` as markup and would drop it, so the message is escaped.
    The credentials of any URL in it are redacted.
    """
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True).print(f"[bold red]error:[/] {escape(redact_urls_in(message))}", highlight=False, soft_wrap=True)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the ``closedloop`` command line on ``argv`` (default: ``sys.argv[1:]``); exits the process."""
    try:
        from .cli import app

        app(args=None if argv is None else list(argv))
    except ClosedLoopError as exc:
        print_error(str(exc) or type(exc).__name__)
        sys.exit(EXIT_ERROR)


if __name__ == "__main__":  # pragma: no cover
    main()
