"""``closedloop worker|mcp|dashboard``, ``closedloop lab serve`` and ``closedloop env serve``: the commands that keep
running, serving a ledger's campaigns (to workers, MCP clients, a browser) or a lab or a campaign over the network.

Registered by ``orchestrator.interfaces.cli``; heavy imports stay inside the commands.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from orchestrator.interfaces.cli_common import DbOption, emit_json, fail, out
from vocabulary.domain import ClosedLoopError

__all__ = ["dashboard", "env_app", "lab_app", "mcp_command", "worker"]


def worker(
    db: DbOption = "closedloop.db",
    campaign: Annotated[list[str] | None, typer.Option("--campaign", help="only this campaign (repeatable)")] = None,
    worker_id: Annotated[str | None, typer.Option("--worker-id", help="a name for logs (default: host-pid)")] = None,
    turn_steps: Annotated[int, typer.Option("--turn-steps", min=1, help="graph steps per turn before the lease is offered")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Drive the running campaigns of a shared ledger, taking turns with other workers (no double dispatch)."""
    from orchestrator.scale.workers import run_worker

    try:
        report = run_worker(db, worker_id=worker_id, campaign_ids=campaign or None, turn_steps=turn_steps)
    except ClosedLoopError as exc:
        fail(str(exc))
    if as_json:
        emit_json(report.as_dict())
    else:
        out.print(f"worker {report.worker_id}: {report.n_turns} turns, {report.n_steps} steps; finished "
                  f"{report.campaigns_finished or 'none'}; waiting for a human: {report.campaigns_waiting or 'none'}")


def mcp_command(
    db: DbOption = "closedloop.db",
    root: Annotated[Path | None, typer.Option(
        "--root", help="the directory MCP tools may write under (campaign_report's out_dir); default: the ledger "
                       "file's directory, else the working directory")] = None,
) -> None:
    """Serve the campaigns of a ledger as MCP tools over stdio (list, start, resume, stop, timeline, approve, report).

    Needs the mcp extra: pip install "closedloop\\[mcp]".
    """
    from orchestrator.interfaces.mcp_server import serve

    if root is not None and not root.expanduser().is_dir():
        fail(f"--root {root} is not a directory; give an existing directory for the MCP tools to write under")
    serve(db, root=root)  # a missing mcp package escapes as one error line (cli_main)


def dashboard(
    db: DbOption = "closedloop.db",
    host: Annotated[str, typer.Option(help="interface to bind; another than loopback needs --token")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port (0 picks a free one)")] = 8765,
    token: Annotated[str | None, typer.Option(envvar="CLOSEDLOOP_DASHBOARD_TOKEN", show_envvar=True,
                                              help="secret every request must carry (open the page once with ?token=...)")] = None,
) -> None:
    """Serve a live web view of a ledger's campaigns, with buttons to approve lab batches and decide on failed jobs.

    Needs the dashboard extra: pip install "closedloop\\[dashboard]".
    """
    from orchestrator.interfaces.dashboard import serve

    if "://" not in db and not Path(db).exists():
        fail(f"no ledger database at {db}; run a campaign first or pass --db PATH")
    try:
        serve(db, host=host, port=port, token=token or None)
    except ClosedLoopError as exc:
        fail(str(exc))


# --------------------------------------------------------------------------------------------------- lab
lab_app = typer.Typer(help="Serve a lab over HTTP.", no_args_is_help=True)


@lab_app.command("serve")
def lab_serve(
    host: Annotated[str, typer.Option(help="interface to bind; keep 127.0.0.1 unless you mean it")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port (0 picks a free one)")] = 8000,
    driver: Annotated[str, typer.Option("--driver", help="registered driver name")] = "simlab",
    spec: Annotated[Path | None, typer.Option("--spec", help="serve the simulated lab of this campaign spec")] = None,
    journal: Annotated[Path | None, typer.Option(help="SQLite journal, so a restarted server loses no job")] = None,
    param: Annotated[list[str], typer.Option("--param", help="driver parameter KEY=VALUE (JSON values)")] = [],
    seconds_per_sim_hour: Annotated[float, typer.Option(help="wall seconds per simulated lab hour")] = 0.01,
    ssl_certfile: Annotated[Path | None, typer.Option("--ssl-certfile", help="serve HTTPS with this PEM certificate")] = None,
    ssl_keyfile: Annotated[Path | None, typer.Option("--ssl-keyfile", help="the certificate's PEM private key")] = None,
) -> None:
    """Serve any registered driver over HTTP, with its OpenAPI spec at /openapi.json.

    A bearer token is required when $CLOSEDLOOP_LAB_TOKEN is set; an interface other than loopback needs one.
    """
    import os

    from instruments.server import TOKEN_ENV, build_driver, serve

    params: dict[str, Any] = {}
    for item in param:
        key, sep, value = item.partition("=")
        if not sep:
            fail(f"--param {item!r} must look like KEY=VALUE, e.g. --param noise_sd=0.1")
        try:
            params[key] = json.loads(value)
        except json.JSONDecodeError:
            params[key] = value
    try:
        if spec is not None:
            params = {**_simlab_params_for(spec), **params}
        lab_driver = build_driver(driver, params)
    except ClosedLoopError as exc:
        fail(str(exc))
    try:  # serve refuses a non-loopback host without a token before it binds anything
        serve(lab_driver, host=host, port=port, token=os.environ.get(TOKEN_ENV) or None, journal_path=journal,
              seconds_per_sim_hour=seconds_per_sim_hour, log_level="warning", ssl_certfile=ssl_certfile,
              ssl_keyfile=ssl_keyfile)
    except ClosedLoopError as exc:
        fail(str(exc))


def _simlab_params_for(spec_path: Path) -> dict[str, Any]:
    """The simulated lab a campaign spec describes: its ground truth, noise and seed."""
    from instruments import TableOracle
    from orchestrator.space.pool import load_pool
    from orchestrator.spec import load_spec

    spec = load_spec(spec_path)
    pool = load_pool(spec)
    oracle = TableOracle(pool.column(spec.lab.oracle_column or "_oracle"), property=spec.objective.property)
    return {"oracle": oracle, "noise_sd": spec.lab.noise_sd, "seed": spec.campaign.seed, "unit": spec.objective.unit,
            **spec.lab.parameters}


# --------------------------------------------------------------------------------------------------- env
env_app = typer.Typer(help="Serve a campaign as an RL environment.", no_args_is_help=True)


@env_app.command("serve")
def env_serve(
    spec: Annotated[Path, typer.Argument(help="campaign TOML")],
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    n_offer: Annotated[int, typer.Option(help="candidates on offer per planning step")] = 16,
    max_sessions: Annotated[int, typer.Option(help="concurrent WebSocket sessions (episodes)")] = 4,
    success_bar: Annotated[float | None, typer.Option(
        help="the value an episode must reach to succeed, in the objective's unit (default: the spec's "
             "stop.threshold or target, else a quantile of the pool's known values); an open space with neither "
             "needs it")] = None,
) -> None:
    """Serve SPEC as an OpenEnv environment on 127.0.0.1 (/health, /schema, /reset, /step, /state, /ws).

    Needs the openenv extra: pip install "closedloop\\[openenv]".
    """
    import uvicorn

    from orchestrator.environment.openenv_env import build_app

    try:
        task = {"success_bar": success_bar} if success_bar is not None else {}
        web_app = build_app(spec, n_offer=n_offer, max_concurrent_envs=max_sessions, **task)
    except ClosedLoopError as exc:
        fail(str(exc))
    uvicorn.run(web_app, host="127.0.0.1", port=port, log_level="warning")
