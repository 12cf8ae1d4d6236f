"""``closedloop dashboard``: serve the dashboard of one ledger with uvicorn until interrupted.

It binds 127.0.0.1 unless told otherwise, and another interface needs a token: the lab server's own check
(``instruments.server.check_exposure``) refuses before anything is bound or opened. Once listening it prints one
line, ``closedloop dashboard: serving <ledger> on http://HOST:PORT``, so a caller that started it as a subprocess
(the browser test) can read the URL, also for ``--port 0``.
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.interfaces.dashboard.app import _require_extra, create_app
from orchestrator.interfaces.dashboard.auth import TOKEN_ENV

__all__ = ["serve"]


def serve(db: str | Path, *, host: str = "127.0.0.1", port: int = 8765, token: str | None = None,
          poll_s: float = 1.0, log_level: str = "warning") -> None:
    """Serve the dashboard of the ledger at ``db`` until Ctrl-C or SIGTERM; blocks.

    On the way out the campaigns that answers started here are stopped after their current node, resumable, as
    ``closedloop mcp`` leaves them.

    Raises:
        SetupError: ``host`` is not loopback and there is no token.
        MissingDependency: the ``dashboard`` extra is not installed.
    """
    import uvicorn

    from instruments.server import _Server, check_exposure
    from orchestrator.interfaces.background import BackgroundRuns
    from orchestrator.ledger import Ledger

    check_exposure(host, token, exposes="watch the campaigns and approve lab jobs",
                   token_hint=f"pass --token or set ${TOKEN_ENV} to a secret (open the page once with ?token=...)")
    _require_extra()
    ledger = Ledger.open(db)
    runs = BackgroundRuns(ledger)
    try:
        app = create_app(ledger, token=token, runs=runs, poll_s=poll_s)

        def announce(server: _Server) -> None:
            print(f"closedloop dashboard: serving {ledger.url} on http://{host}:{server.port}", flush=True)

        # open event streams would hold a graceful shutdown forever: give them a second
        config = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on",
                                timeout_graceful_shutdown=1)
        _Server(config, on_started=announce).run()
    finally:
        runs.stop_all()
        ledger.close()
