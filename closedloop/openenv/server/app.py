"""The OpenEnv server entry: ``app`` (what ``openenv.yaml`` names) and ``main`` (the ``server`` script).

The campaign spec comes from ``$CLOSEDLOOP_ENV_SPEC`` (default: this checkout's FreeSolv campaign).
``closedloop env serve SPEC --port P`` is the same app with the spec on the command line.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from orchestrator.environment.openenv_env import build_app

SPEC_ENV = "CLOSEDLOOP_ENV_SPEC"
DEFAULT_SPEC = Path(__file__).resolve().parents[3] / "campaigns" / "freesolv" / "campaign.toml"

app = build_app(os.environ.get(SPEC_ENV) or DEFAULT_SPEC)


def main(argv: list[str] | None = None) -> None:
    """Serve the app with uvicorn (``--host``, default 127.0.0.1; ``--port``, default 8000)."""
    import uvicorn

    parser = argparse.ArgumentParser(description="Serve a closedloop campaign as an OpenEnv environment.")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind; keep 127.0.0.1 unless you mean it")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
