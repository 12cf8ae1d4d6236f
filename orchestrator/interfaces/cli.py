"""The ``closedloop`` command line (typer). Heavy imports happen inside the commands, so ``--help`` is fast."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from orchestrator.interfaces.cli_common import (
    DbOption,
    console,
    emit_json,
    fail,
    fmt,
    ledger_with,
    open_existing,
    out,
)
from orchestrator.interfaces.event_text import describe_event
from vocabulary.domain import ClosedLoopError

__all__ = ["app"]

app = typer.Typer(help="closedloop: closed-loop lab science, from proposal to robot and back.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
ledger_app = typer.Typer(help="Inspect and check campaign ledgers.", no_args_is_help=True)
app.add_typer(ledger_app, name="ledger")

class _RedactingFilter(logging.Filter):
    """Redacts the credentials of URLs in log records (httpx logs every request URL, userinfo included)."""

    def filter(self, record: logging.LogRecord) -> bool:
        from vocabulary.domain import redact_urls_in

        message = record.getMessage()
        redacted = redact_urls_in(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


@app.callback()
def _main(verbose: Annotated[bool, typer.Option("--verbose", "-v", help="log progress details")] = False) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, _RedactingFilter) for f in handler.filters):
            handler.addFilter(_RedactingFilter())


# --------------------------------------------------------------------------------------------------- run
@app.command()
def run(
    spec: Annotated[Path | None, typer.Argument(help="campaign TOML file")] = None,
    db: DbOption = "closedloop.db",
    seed: Annotated[int | None, typer.Option(help="override the spec's seed")] = None,
    lab_budget: Annotated[int | None, typer.Option("--lab-budget", help="override the lab experiment budget")] = None,
    resume: Annotated[str | None, typer.Option("--resume", help="continue this interrupted campaign")] = None,
    campaign_id: Annotated[str | None, typer.Option("--campaign-id", help="id for a new campaign")] = None,
    max_steps: Annotated[int | None, typer.Option("--max-steps", help="stop after N graph steps (resumable)")] = None,
    approve: Annotated[str | None, typer.Option(help="answer a pending approval: 'all', 'none' or job keys, comma-separated")] = None,
    lab_url: Annotated[str | None, typer.Option("--lab-url", help="run against a remote lab server (token from $CLOSEDLOOP_LAB_TOKEN)")] = None,
    planner: Annotated[str | None, typer.Option("--planner", help="main arm: llm, llm-shuffled, bo, bo-sf, cheap-first, botorch, random or a registered arm")] = None,
    model: Annotated[str | None, typer.Option("--model", help="llm arm: provider:model or a .gguf path (default: embedded)")] = None,
    control_share: Annotated[float | None, typer.Option(
        "--control-share", help="share of the lab budget for the control arm (overrides [planner] control_share; 0 turns the control off)")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="approve every lab batch without asking")] = False,
    history: Annotated[Path | None, typer.Option("--history", help="CSV of past lab results to start warm from")] = None,
    value_column: Annotated[str | None, typer.Option("--value-column", help="--history: the measured column (default: the objective's property)")] = None,
    candidate_column: Annotated[str | None, typer.Option("--candidate-column", help="--history: the SMILES/formula column (default: the spec's)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object instead of tables")] = False,
) -> None:
    """Run a campaign on its lab (the simulated lab by default) and print a summary."""
    from orchestrator.loop.campaign import Campaign
    from orchestrator.spec import load_spec

    try:
        if resume:
            if spec is not None:
                fail("give either SPEC (a new campaign) or --resume CAMPAIGN_ID, not both")
            if history is not None:
                fail("--history seeds a new campaign; import it when you start one, not on --resume")
            if control_share is not None:
                fail("--control-share applies to a new campaign; a resumed one keeps the share it started with")
            # resume_policy: a new lab budget is applied and recorded; another seed, planner, lab or model is refused
            campaign = Campaign.resume(resume, db=db, lab_budget=lab_budget, seed=seed, planner=planner,
                                       lab_url=lab_url, model=model)
            if lab_budget is not None and not as_json:
                out.print(f"lab budget of {resume}: {campaign.spec.budget.lab_experiments} experiments")
        else:
            if spec is None:
                fail("give a campaign spec, e.g. `closedloop run campaigns/freesolv/campaign.toml`, or --resume ID")
            parsed = load_spec(spec).with_overrides(seed=seed, lab_budget=lab_budget, lab_url=lab_url,
                                                    planner=planner, model=model, control_share=control_share)
            past = None
            if history is not None:
                from orchestrator.loop.importing import HistoryFile, read_history
                from orchestrator.space.pool import load_pool

                # check the whole file before the ledger is even opened: a bad row refuses the import and the campaign
                read_history(parsed, load_pool(parsed).copy(), history, value_column=value_column,
                             candidate_column=candidate_column)
                past = HistoryFile(history, value_column=value_column, candidate_column=candidate_column)
            # the history is imported in the transaction that creates the campaign: all of it, or no campaign at all
            campaign = Campaign.start(parsed, db=db, campaign_id=campaign_id, history=past)
            if campaign.imported is not None and not as_json:
                imported = campaign.imported
                out.print(f"imported {imported.n_appended} past result(s) from {history} ({imported.source})")
        with campaign:
            answer = _parse_approval(approve)
            summary = _run_with_progress(campaign, max_steps=max_steps, approval=answer, quiet=as_json)
            question = campaign.pending_interrupt
            while question is not None and max_steps is None:
                answer = _answer(question, yes=yes, interactive=sys.stdin.isatty() and not as_json)
                if answer is None:
                    break
                summary = _run_with_progress(campaign, max_steps=None, approval=answer, quiet=as_json)
                question = campaign.pending_interrupt
    except ClosedLoopError as exc:
        fail(str(exc))
    if question is not None:
        summary["status"] = "awaiting_approval"
        summary["approval"] = question
    if as_json:
        emit_json(summary)
    else:
        _print_summary(summary)
    _exit_if_lab_failed(summary)


EXIT_LAB_FAILED = 1
"""The exit code of a campaign that ran but stopped on lab failures (2 is an error before or while starting)."""


def _exit_if_lab_failed(summary: dict[str, Any]) -> None:
    """A campaign stopped by an unhealthy or aborted lab did not finish its work: say so and exit non-zero."""
    from orchestrator.loop.nodes.decide import is_failure_stop

    if summary["status"] == "stopped" and is_failure_stop(summary.get("stop_reason")):
        fail(f"campaign {summary['campaign_id']} stopped on lab failures ({summary['stop_reason']})",
              code=EXIT_LAB_FAILED)


def _answer(question: dict[str, Any], *, yes: bool, interactive: bool) -> Any:
    """An answer to a pending interrupt: --yes approves, a terminal asks, otherwise None (the campaign waits)."""
    is_approval = "job_keys" in question
    if yes and is_approval:
        return True
    if not interactive:
        return None
    if is_approval:
        for key, label in zip(question["job_keys"], question.get("candidates", []), strict=False):
            console.print(f"  {key}  {label}", highlight=False)
        reply = typer.prompt(f"approve these {len(question['job_keys'])} lab job(s)? [all/none/comma-separated keys]",
                             default="all")
        return _parse_approval(reply)
    for failure in question.get("failures", []):
        console.print(f"  {failure['job_key']}: {failure['reason']}", highlight=False)
    return typer.prompt("what should happen to these failed jobs? [retry/skip/abort]", default="retry")


def _parse_approval(text: str | None) -> Any:
    if text is None:
        return None
    if text.lower() in {"all", "yes", "true"}:
        return True
    if text.lower() in {"none", "no", "false"}:
        return False
    return [k.strip() for k in text.split(",") if k.strip()]


def _run_with_progress(campaign, *, max_steps, approval, quiet: bool) -> dict[str, Any]:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    budget = campaign.spec.budget.lab_experiments
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[status]}"), TimeElapsedColumn(), console=console, disable=quiet,
                  transient=False) as progress:
        task = progress.add_task(f"{campaign.campaign_id}: lab experiments", total=budget,
                                 completed=campaign.ledger.campaign(campaign.campaign_id).n_lab, status="")

        def on_step(node: str, _update: dict) -> None:
            row = campaign.ledger.campaign(campaign.campaign_id)
            progress.update(task, completed=row.n_lab, status=f"{node}")

        summary = campaign.run(max_steps=max_steps, approval=approval, on_step=on_step)
        progress.update(task, completed=summary["n_lab"], status=summary["status"])
    return summary


def _print_summary(summary: dict[str, Any]) -> None:
    objective = summary["objective"]
    goal = (f"{objective['direction']} {objective['property']}" if objective["direction"] != "target"
            else f"{objective['property']} within {objective['target']} ± {objective['tolerance']}")
    table = Table(title=f"campaign {summary['campaign_id']}", show_header=False)
    best = summary["best"] or {}
    for name, value in [
        ("status", f"{summary['status']} ({summary.get('stop_reason') or 'not stopped'})"),
        ("objective", goal),
        ("best found", f"{fmt(best.get('value'))} {objective['unit']}  {best.get('label', '')}  [{best.get('arm', '')}]"),
        ("lab experiments", f"{summary['n_lab']} of {summary['lab_budget']} ({summary['n_lab_failed']} failed)"
                            + (f", after {summary['n_imported']} imported past results" if summary.get("n_imported") else "")),
        ("hits", str(summary["n_hits"])),
        ("simulated lab time", f"{summary['lab_hours']:.1f} h"),
        ("simulator compute", f"{summary['compute_s']:.1f} s"),
        ("ledger", summary["db"]),
    ]:
        table.add_row(name, value)
    out.print(table)
    arms = Table(title="main arm against control")
    for column in ("arm", "lab experiments", "best value", "experiments to its best"):
        arms.add_column(column)
    for arm, entry in summary["arms"].items():
        role = " (main)" if arm == summary["main_arm"] else " (control)" if arm == summary["control_arm"] else ""
        arms.add_row(arm + role, str(entry["n_lab"]), fmt(entry["best_value"]), fmt(entry["experiments_to_best"]))
    out.print(arms)
    if "main_beats_control" in summary:
        out.print(_comparison_sentence(summary))
    if summary.get("approval"):
        keys = summary["approval"]["job_keys"]
        out.print(f"[yellow]waiting for approval of {len(keys)} lab job(s):[/] "
                  f"closedloop run --resume {summary['campaign_id']} --db {summary['db']} --approve all")


def _comparison_sentence(summary: dict[str, Any]) -> str:
    """The main arm against the control in one sentence (``summary.arm_comparison``)."""
    verdict = f"main arm {'beat' if summary['main_beats_control'] else 'did not beat'} the control"
    if summary.get("acceleration") is None:
        return f"{verdict}: no lab results of both arms to pair."
    reached = summary["experiments_to_best_level"]
    n = summary["paired_experiments"]

    def after(arm: str) -> str:
        return f"after {reached[arm]}" if reached[arm] <= n else f"not in {n}"

    return (f"{verdict}: on {n} results each, paired by dispatch, it reached the best level either arm reached "
            f"(utility {fmt(summary['best_level'])}) {after(summary['main_arm'])} experiments, the control "
            f"{after(summary['control_arm'])}; acceleration {summary['acceleration']:.2f}×.")


@app.command()
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


@app.command("mcp")
def mcp_command(db: DbOption = "closedloop.db") -> None:
    """Serve the campaigns of a ledger as MCP tools over stdio (list, start, resume, stop, timeline, approve, report).

    Needs the mcp extra: pip install "closedloop\\[mcp]".
    """
    from orchestrator.interfaces.mcp_server import serve

    serve(db)  # a missing mcp package escapes as one error line (cli_main)


@app.command()
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
app.add_typer(lab_app, name="lab")


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
    return {"oracle": oracle, "noise_sd": spec.lab.noise_sd, "seed": spec.campaign.seed, **spec.lab.parameters}


# --------------------------------------------------------------------------------------------------- env
env_app = typer.Typer(help="Serve a campaign as an RL environment.", no_args_is_help=True)
app.add_typer(env_app, name="env")


@env_app.command("serve")
def env_serve(
    spec: Annotated[Path, typer.Argument(help="campaign TOML")],
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    n_offer: Annotated[int, typer.Option(help="candidates on offer per planning step")] = 16,
    max_sessions: Annotated[int, typer.Option(help="concurrent WebSocket sessions (episodes)")] = 4,
) -> None:
    """Serve SPEC as an OpenEnv environment on 127.0.0.1 (/health, /schema, /reset, /step, /state, /ws).

    Needs the openenv extra: pip install "closedloop\\[openenv]".
    """
    import uvicorn

    from orchestrator.environment.openenv_env import build_app

    try:
        web_app = build_app(spec, n_offer=n_offer, max_concurrent_envs=max_sessions)
    except ClosedLoopError as exc:
        fail(str(exc))
    uvicorn.run(web_app, host="127.0.0.1", port=port, log_level="warning")


# --------------------------------------------------------------------------------------------------- simulate
@app.command()
def simulate(
    inputs: Annotated[list[str], typer.Argument(help="SMILES (molecules) or formulas (materials)")],
    kind: Annotated[str, typer.Option("--kind", help="molecule or material")] = "molecule",
    ladder: Annotated[str | None, typer.Option("--ladder", help="built-in ladder name (default: the kind's)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print a JSON list of results")] = False,
) -> None:
    """Run every rung of a ladder on the inputs and print, per input and rung, the properties, status and seconds."""
    import time

    from simulators import load_simulator
    from simulators.named_ladders import ladder_rungs
    from vocabulary.domain import InvalidCandidate, parse_candidate

    if kind not in {"molecule", "material"}:
        fail(f"--kind {kind!r} is not supported here; use 'molecule' or 'material'")
    candidates = []
    for text in inputs:
        try:
            candidates.append(parse_candidate(kind, text))
        except InvalidCandidate as exc:
            fail(f"input {text!r}: {exc}")
    try:
        rungs = [load_simulator(name) for name in ladder_rungs(kind, ladder)]
    except ClosedLoopError as exc:
        fail(str(exc))
    rows = []
    for rung in rungs:
        for text, candidate in zip(inputs, candidates, strict=True):
            start = time.perf_counter()
            [observation] = rung.evaluate([candidate])
            rows.append({"input": text, "candidate_id": candidate.id, "rung": rung.name, "fidelity": rung.fidelity,
                         "status": observation.status, "reason": observation.reason,
                         "properties": observation.properties, "cost_model_s": observation.cost_s,
                         "wall_s": time.perf_counter() - start})
    rows.sort(key=lambda r: (inputs.index(r["input"]), r["fidelity"]))
    if as_json:
        emit_json(rows)
        return
    table = Table(title=f"{kind} ladder: {' → '.join(r.name for r in rungs)}")
    for column in ("input", "rung", "status", "seconds", "properties"):
        table.add_column(column, overflow="fold")
    for r in rows:
        shown = ", ".join(f"{k}={v:.4g}" for k, v in r["properties"].items()) or (r["reason"] or "")
        table.add_row(r["input"], r["rung"], r["status"], f"{r['wall_s']:.3f}", shown)
    out.print(table)


# --------------------------------------------------------------------------------------------------- show / ls
@app.command()
def show(
    campaign_id: Annotated[str, typer.Argument(help="campaign id (see `closedloop ls`)")],
    db: DbOption = "closedloop.db",
    as_json: Annotated[bool, typer.Option("--json", help="print the events as a JSON list")] = False,
) -> None:
    """Print a campaign's event timeline."""
    ledger = ledger_with(db, campaign_id)
    events = ledger.events(campaign_id)
    if as_json:
        emit_json([{"seq": e.seq, "type": e.type, "schema_version": e.schema_version, "actor": e.actor,
                     "at": e.at.isoformat(), "payload": e.payload} for e in events])
        return
    table = Table(title=f"{campaign_id}: {len(events)} events")
    for column in ("seq", "type", "actor", "what"):
        table.add_column(column)
    for e in events:
        table.add_row(str(e.seq), e.type, e.actor, describe_event(e.type, e.payload))
    out.print(table)


@app.command("ls")
def list_campaigns(
    db: DbOption = "closedloop.db",
    as_json: Annotated[bool, typer.Option("--json", help="print a JSON list")] = False,
) -> None:
    """List the campaigns in a ledger database."""
    ledger = open_existing(db)
    rows = [{"campaign_id": c.id, "name": c.name, "status": c.status, "n_lab": c.n_lab, "best_value": c.best_value,
             "stop_reason": c.stop_reason} for c in ledger.campaigns()]
    if as_json:
        emit_json(rows)
        return
    table = Table(title=f"campaigns in {db}")
    for column in ("campaign_id", "name", "status", "n_lab", "best_value"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["campaign_id"], row["name"], row["status"], str(row["n_lab"]), fmt(row["best_value"]))
    out.print(table)


# --------------------------------------------------------------------------------------------------- ledger
@ledger_app.command("verify")
def ledger_verify(
    campaign_id: Annotated[str | None, typer.Argument(help="one campaign; all of them when omitted")] = None,
    db: DbOption = "closedloop.db",
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Check each event against the hash chain, rebuild the projections from the events and compare; exit 1 if the
    chain breaks or anything differs. Prints each campaign's head hash: keep it outside the ledger to prove later
    that nothing was rewritten."""
    from orchestrator.ledger import verify

    ledger = ledger_with(db, campaign_id) if campaign_id else open_existing(db)
    ids = [campaign_id] if campaign_id else ledger.campaign_ids_with_events()
    reports = [verify(ledger, cid) for cid in ids]
    if as_json:
        emit_json([{"campaign_id": r.campaign_id, "identical": r.is_identical, "n_events": r.n_events,
                     "head_hash": r.head_hash, "chain_break": r.chain_break, "notes": r.notes,
                     "differences": r.differences} for r in reports])
    else:
        for r in reports:
            mark = "[green]ok[/]" if r.is_identical else f"[red]{len(r.differences)} difference(s)[/]"
            chain = f"[red]broken: {r.chain_break}[/]" if r.chain_break else f"[green]ok[/], head {r.head_hash}"
            out.print(f"{r.campaign_id}: {r.n_events} events, hash chain {chain}, projections {mark}")
            for note in r.notes:
                out.print(f"  note: {note}")
            for d in r.differences[:10]:
                out.print(f"  {d['table']} {d['key']}: stored={d['stored']} rebuilt={d['rebuilt']}")
    if not all(r.is_identical for r in reports):
        raise typer.Exit(1)


@ledger_app.command("export")
def ledger_export(
    campaign_id: Annotated[str, typer.Argument(help="campaign to export")],
    db: DbOption = "closedloop.db",
    out_path: Annotated[Path, typer.Option("--out", help="JSONL file to write")] = Path("campaign.jsonl"),
) -> None:
    """Write a campaign's events as JSONL, one schema-versioned event per line."""
    from orchestrator.ledger import export_jsonl

    n = export_jsonl(ledger_with(db, campaign_id), campaign_id, out_path)
    out.print(f"{campaign_id}: {n} events written to {out_path}")


@ledger_app.command("import")
def ledger_import(
    path: Annotated[Path, typer.Argument(help="JSONL file from `closedloop ledger export`")],
    db: DbOption = "closedloop.db",
    unverified: Annotated[bool, typer.Option(
        "--unverified", help="accept an export written before exports carried a hash chain; the ledger records the "
                             "import as unverified")] = False,
) -> None:
    """Read an exported campaign into a ledger. The file's hash chain must verify: a bad or altered file is refused
    with its line number, and nothing is imported."""
    from orchestrator.ledger import Ledger, LedgerError, LedgerImportError, import_jsonl

    if not path.is_file():
        fail(f"no file {path}; give the JSONL written by `closedloop ledger export`")
    try:
        report = import_jsonl(path, Ledger.open(db), unverified=unverified)
    except (LedgerImportError, LedgerError) as exc:
        fail(str(exc))
    how = "hash chain verified" if report.is_verified else "[yellow]unverified[/] (no hash chain in the file)"
    out.print(f"{report.campaign_id}: {report.n_added} events added, {report.n_present} already present; {how}")


@app.command()
def report(
    campaign_id: Annotated[str, typer.Argument(help="campaign to report on")],
    db: DbOption = "closedloop.db",
    out_dir: Annotated[Path, typer.Option("--out", help="directory for index.html and the PNG plots")] = Path("report"),
) -> None:
    """Write an HTML report with plots: best so far, the ladder funnel, the lab Gantt, rewards over steps."""
    from orchestrator.replay.report import write_report

    index = write_report(ledger_with(db, campaign_id), campaign_id, out_dir)
    out.print(f"report written to {index}")


@app.command()
def replay(
    campaign_id: Annotated[str, typer.Argument(help="campaign to replay")],
    db: DbOption = "closedloop.db",
    planner: Annotated[str | None, typer.Option("--planner", help="what-if: re-run the decisions with this main arm (llm, bo, random)")] = None,
    rubric: Annotated[str | None, typer.Option("--rubric", help="what-if: score with this rubric (a TOML file or a built-in name)")] = None,
    model: Annotated[str | None, typer.Option("--model", help="what-if: the llm arm's model (provider:model or .gguf)")] = None,
    out_db: Annotated[str | None, typer.Option("--out-db", help="what-if: keep its ledger here (default: a temporary file)")] = None,
    recorded_lab: Annotated[bool, typer.Option("--recorded-lab", help="what-if: reuse recorded results only, even from a simulated lab (others are unknown)")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """Exact replay (fold every event into a fresh database and prove the projections equal; exit 1 if not), or
    with --planner/--rubric/--model a what-if replay on the recorded history, compared side by side."""
    from orchestrator.ledger import verify

    ledger = ledger_with(db, campaign_id)
    if planner is not None or rubric is not None or model is not None:
        _what_if(ledger, campaign_id, planner=planner, rubric=rubric, model=model, out_db=out_db,
                 recorded_lab=recorded_lab, as_json=as_json)
        return
    report = verify(ledger, campaign_id)
    if as_json:
        emit_json({"identical": report.is_identical, "n_events": report.n_events, "differences": report.differences})
    else:
        verdict = "[green]identical[/]" if report.is_identical else f"[red]{len(report.differences)} difference(s)[/]"
        out.print(f"{campaign_id}: replayed {report.n_events} events into a fresh database: {verdict}")
    if not report.is_identical:
        raise typer.Exit(1)


def _what_if(ledger, campaign_id: str, *, planner, rubric, model, out_db, recorded_lab: bool, as_json: bool) -> None:
    from orchestrator.replay.whatif import what_if

    try:
        result = what_if(ledger, campaign_id, planner=planner, rubric=rubric, model=model, out_db=out_db,
                         recorded_lab=recorded_lab)
    except ClosedLoopError as exc:
        fail(str(exc))
    if as_json:
        emit_json(result)
        return
    table = Table(title=f"what-if replay of {campaign_id}")
    for column in ("", "original", "what-if"):
        table.add_column(column)
    rewards = result["rewards"]
    rows = [
        ("main arm", result["planner"]["original"], result["planner"]["what_if"]),
        ("rubric", result["rubric"]["original"], result["rubric"]["what_if"]),
        ("proposals", result["proposals"]["n_original"], result["proposals"]["n_what_if"]),
        ("lab experiments", result["lab_experiments"]["original"], result["lab_experiments"]["what_if"]),
        ("mean trajectory reward", rewards["original"]["mean"], rewards["what_if"]["mean"]),
        ("experiments to the best either found", result["experiments_to_best"]["original"],
         result["experiments_to_best"]["what_if"]),
        ("experiments to the original's best", result["experiments_to_original_best"]["original"],
         result["experiments_to_original_best"]["what_if"]),
    ]
    for name, a, b in rows:
        table.add_row(name, fmt(a), fmt(b))
    out.print(table)
    differ = result["proposals"]["differ_by_iteration"]
    out.print(f"lab: {result['lab']}; {result['proposals']['n_common']} proposals in common; "
              f"{len(differ)} iteration(s) with different proposals; {result['n_unknown']} unknown lab result(s)")
    for row in differ[:10]:
        out.print(f"  it{row['iteration']}: only original {row['only_original'][:4]}, only what-if {row['only_what_if'][:4]}")
    out.print(f"what-if ledger: {result['what_if_db']} (campaign {result['what_if_campaign_id']})")


# Sub-commands that live in their own modules (they share cli_common's options and helpers, never this module's).
from orchestrator.interfaces.cli_bench import bench  # noqa: E402
from orchestrator.interfaces.cli_rewards import export_command, rewards_app  # noqa: E402

app.command("bench")(bench)
app.add_typer(rewards_app, name="rewards")
app.command("export")(export_command)


if __name__ == "__main__":  # pragma: no cover
    from orchestrator.interfaces.cli_common import run_app

    run_app(app)  # as the console script does: an escaped closedloop error is one line, not a traceback
