"""The ``closedloop`` console script: the typer app, with a closedloop error that escapes a command ending it as one
``error:`` line and exit code 2, never a traceback.

Commands catch the errors they expect and word them themselves (``cli_common.fail``). This is the net under all of them:
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

from collections.abc import Sequence

from orchestrator.interfaces.cli_common import EXIT_ERROR, print_error, run_app

__all__ = ["EXIT_ERROR", "main", "print_error"]


def main(argv: Sequence[str] | None = None) -> None:
    """Run the ``closedloop`` command line on ``argv`` (default: ``sys.argv[1:]``); exits the process."""
    from orchestrator.interfaces.cli import app

    run_app(app, argv)


if __name__ == "__main__":  # pragma: no cover
    main()
