"""The ``closedloop`` command line (typer): ``run``, ``simulate``, ``show`` and ``ls`` here, the other command groups in
their own modules (``cli_serve``, ``cli_ledger``, ``cli_bench``, ``cli_rewards``), all registered on ``app``. Heavy
imports happen inside the commands, so ``--help`` is fast.

Every string a spec, a ledger or the command line put there (a campaign id or name, a label, an arm, a reason, a
path) is printed through ``terminal_text.rich_safe``: its control characters show as escapes and rich markup in it
prints as written; a command line it suggests is quoted for the shell (``shlex.quote``). ``--json`` prints the
strings exact."""

from __future__ import annotations

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
from orchestrator.interfaces.cli_ledger import ledger_app, replay, report
from orchestrator.interfaces.cli_serve import (
    dashboard,
    env_app,
    lab_app,
    mcp_command,
    worker,
)
from orchestrator.interfaces.event_text import campaign_units, describe_event
from orchestrator.interfaces.terminal_text import rich_safe
from vocabulary.domain import ClosedLoopError

__all__ = ["app"]

app = typer.Typer(help="closedloop: closed-loop lab science, from proposal to robot and back.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
app.add_typer(ledger_app, name="ledger")

class _RedactingFilter(logging.Filter):
    """Redacts the credentials of URLs in log records (httpx logs every request URL, userinfo included), and makes
    what a spec or a ledger put in a message inert on the terminal (``terminal_text.terminal_safe_lines``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        from orchestrator.interfaces.terminal_text import terminal_safe_lines
        from vocabulary.domain import redact_urls_in

        message = record.getMessage()
        redacted = terminal_safe_lines(redact_urls_in(message))
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


class _StderrHandler(logging.StreamHandler):
    """Writes each record to ``sys.stderr`` as it is when the record comes: rich's live progress bar redirects it,
    so a log line prints above the bar instead of through it."""

    @property  # type: ignore[override]
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


@app.callback()
def _main(verbose: Annotated[bool, typer.Option("--verbose", "-v", help="log progress details")] = False) -> None:
    # Not logging.basicConfig: once anything has put a handler on the root logger (a test runner, a library, an
    # embedding program) it does nothing at all, not even set the level, and `-v` would print nothing more.
    root = logging.getLogger()
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    if not any(isinstance(handler, _StderrHandler) for handler in root.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    for handler in root.handlers:
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
    reason: Annotated[str | None, typer.Option("--reason", help="with --approve: why the jobs it leaves out are denied (recorded with them)")] = None,
    by: Annotated[str | None, typer.Option("--by", help="who answers approvals and failed-job decisions, recorded as human:NAME (default: your login name)")] = None,
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
    """Run a campaign on its lab (the simulated lab by default) and print a summary.

    Exit codes: 0 the campaign finished (or paused at --max-steps); 1 it stopped on lab failures; 2 an error; 3 it
    waits for approval of a lab batch (answer with --resume ID, which asks, or --resume ID --approve all|none|KEYS);
    4 it waits for lab results entered by hand (a manual lab: `closedloop results add`, then --resume ID).
    """
    from orchestrator.loop.campaign import Campaign
    from orchestrator.spec import load_spec

    try:
        by = _approver(by)  # a bad --by is refused before anything is opened or written
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
                out.print(f"lab budget of {rich_safe(resume)}: {campaign.spec.budget.lab_experiments} experiments")
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
                out.print(f"imported {imported.n_appended} past result(s) from {rich_safe(history)} "
                          f"({rich_safe(imported.source)})")
        with campaign:
            answer = _with_reason(_parse_approval(approve), reason)
            summary = _run_with_progress(campaign, max_steps=max_steps, approval=answer, by=by, quiet=as_json)
            question = campaign.pending_interrupt
            while question is not None and max_steps is None:
                answer = _answer(question, yes=yes, interactive=_is_interactive() and not as_json, by=by)
                if answer is None:
                    break
                summary = _run_with_progress(campaign, max_steps=None, approval=answer, by=by, quiet=as_json)
                question = campaign.pending_interrupt
    except ClosedLoopError as exc:
        fail(str(exc))
    if question is not None and "job_keys" in question:
        summary["status"] = "waiting_for_approval"
        summary["approval"] = question
    if as_json:
        emit_json(summary)
    else:
        _print_summary(summary, db=db)
    _exit_if_lab_failed(summary)
    _exit_if_waiting(summary)


EXIT_LAB_FAILED = 1
"""The exit code of a campaign that ran but stopped on lab failures (2 is an error before or while starting)."""
EXIT_WAITING_FOR_APPROVAL = 3
"""The exit code of a run that returned with a lab batch waiting for a person's approval."""
EXIT_WAITING_FOR_RESULTS = 4
"""The exit code of a run that returned with lab jobs waiting for results a person enters (a manual lab)."""


def _is_interactive() -> bool:
    """Whether a person at a terminal can answer the gate's questions (stdin is a terminal)."""
    return sys.stdin.isatty()


def _exit_if_waiting(summary: dict[str, Any]) -> None:
    """A campaign that waits on a person is not done: exit 3 (an approval) or 4 (results), after the summary."""
    code = {"waiting_for_approval": EXIT_WAITING_FOR_APPROVAL,
            "waiting_for_results": EXIT_WAITING_FOR_RESULTS}.get(summary.get("status"))
    if code is not None:
        raise typer.Exit(code=code)


def _with_reason(answer: Any, reason: str | None) -> Any:
    """``answer`` wrapped with ``reason`` for its denied jobs (contract 2), or as it is without one."""
    if reason is None or answer is None:
        return answer
    if answer is True:
        fail("--reason explains the jobs --approve denies; with --approve all none is denied")
    return {"answer": answer, "reason": reason}


def _exit_if_lab_failed(summary: dict[str, Any]) -> None:
    """A campaign stopped by an unhealthy or aborted lab did not finish its work: say so and exit non-zero."""
    from orchestrator.loop.nodes.decide import is_failure_stop

    if summary["status"] == "stopped" and is_failure_stop(summary.get("stop_reason")):
        fail(f"campaign {summary['campaign_id']} stopped on lab failures ({summary['stop_reason']})",
              code=EXIT_LAB_FAILED)


def _approver(by: str | None) -> str | None:
    """Who answers in this run: ``--by``, checked (``InvalidApprover``, a closedloop error, if it is not a valid
    name), else the OS login name, else no name (recorded as plain ``human``)."""
    import getpass

    from orchestrator.loop.human_answer import InvalidApprover, checked_name

    if by is not None:
        return checked_name(by)
    try:
        return checked_name(getpass.getuser())
    except (OSError, KeyError, ImportError, InvalidApprover):  # no login name here (e.g. a container's unnamed uid)
        return None


def _answer(question: dict[str, Any], *, yes: bool, interactive: bool, by: str | None = None) -> Any:
    """An answer to a pending interrupt: --yes approves, a terminal asks, otherwise None (the campaign waits).
    ``by`` is only shown: the caller passes it to ``Campaign.run`` with the answer."""
    from orchestrator.loop.human_answer import actor

    is_approval = "job_keys" in question
    if yes and is_approval:
        return True
    if not interactive:
        return None
    console.print(f"(your answer is recorded as by {rich_safe(actor(by))}; set the name with --by)", highlight=False)
    if is_approval:
        console.print(_batch_table(question))
        return _ask_approval(question["job_keys"])
    for failure in question.get("failures", []):
        console.print(f"  {rich_safe(failure['job_key'])}: {rich_safe(failure['reason'])}", highlight=False)
    return typer.prompt("what should happen to these failed jobs? [retry/skip/abort]", default="retry")


def _batch_table(question: dict[str, Any]) -> Table:
    """The lab batch a campaign waits on: each job's number, candidate, key and the surrogate's prediction."""
    from orchestrator.loop.predictions import Prediction

    unit = question.get("unit") or ""
    table = Table(title=f"lab batch of iteration {question.get('iteration', '?')} waiting for approval")
    for column in ("#", "candidate", f"predicted{f' ({unit})' if unit else ''}", "job"):
        table.add_column(rich_safe(column), overflow="fold")
    predicted = {p["job_key"]: Prediction(p.get("predicted"), p.get("sd")) for p in question.get("predictions", [])}
    labels = question.get("candidates", [])
    for n, key in enumerate(question["job_keys"], 1):
        label = labels[n - 1] if n <= len(labels) else ""
        table.add_row(str(n), rich_safe(label), predicted.get(key, Prediction()).text(), rich_safe(key))
    return table


def _ask_approval(keys: list[str]) -> Any:
    """Ask until the person makes an explicit choice (all, none, or job numbers or keys; no default), then, when
    some jobs are denied, for an optional reason; the answer in contract 2's form."""
    from orchestrator.loop.human_answer import InvalidReason, denial_reasons

    while True:
        reply = typer.prompt(f"approve which of these {len(keys)} lab job(s)? "
                             f"[all / none / numbers or job keys, comma-separated]", default="", show_default=False)
        try:
            answer = _approval_choice(reply, keys)
            break
        except ValueError as exc:
            console.print(f"[yellow]{rich_safe(str(exc))}[/]", highlight=False)
    denied = keys if answer is False else [] if answer is True else [k for k in keys if k not in answer]
    if not denied:
        return answer
    while True:
        why = typer.prompt(f"why are {len(denied)} job(s) denied? (optional; Enter for no reason)", default="",
                           show_default=False).strip()
        if not why:
            return answer
        try:
            denial_reasons({"answer": answer, "reason": why}, denied)
            return {"answer": answer, "reason": why}
        except InvalidReason as exc:
            console.print(f"[yellow]{rich_safe(str(exc))}[/]", highlight=False)


def _approval_choice(reply: str, keys: list[str]) -> bool | list[str]:
    """``True`` (all), ``False`` (none) or the job keys chosen by number (1-based) or key; ``ValueError`` saying
    what to type for a blank or unknown answer.

    Example:
        >>> _approval_choice("1, c/b", ["c/a", "c/b", "c/c"]), _approval_choice(" None ", ["c/a"])
        (['c/a', 'c/b'], False)
    """
    text = reply.strip()
    if not text:
        raise ValueError("type all, none, or the numbers (or job keys) of the jobs to approve")
    parsed = _parse_approval(text)
    if isinstance(parsed, bool):
        return parsed
    chosen: list[str] = []
    for item in parsed:
        key = keys[int(item) - 1] if item.isdigit() and 1 <= int(item) <= len(keys) else item
        if key not in keys:
            raise ValueError(f"{item!r} is not a job of this batch; type all, none, or numbers 1..{len(keys)}")
        chosen.append(key)
    return list(dict.fromkeys(chosen))


def _parse_approval(text: str | None) -> Any:
    if text is None:
        return None
    if text.strip().lower() in {"all", "yes", "true"}:
        return True
    if text.strip().lower() in {"none", "no", "false"}:
        return False
    keys = [k.strip() for k in text.split(",") if k.strip()]
    if not keys:
        fail("--approve takes all, none, or job keys separated by commas")
    return keys


def _run_with_progress(campaign, *, max_steps, approval, by: str | None = None, quiet: bool) -> dict[str, Any]:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from orchestrator.interfaces.lab_counts import imported_counts

    budget = campaign.spec.budget.lab_experiments
    n_imported = imported_counts(campaign.ledger, campaign.campaign_id).get(campaign.campaign_id, 0)
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[status]}"), TimeElapsedColumn(), console=console, disable=quiet,
                  transient=False) as progress:
        task = progress.add_task(f"{rich_safe(campaign.campaign_id)}: lab experiments", total=budget,
                                 completed=campaign.ledger.campaign(campaign.campaign_id).n_lab - n_imported,
                                 status="starting")
        surveys: dict[str, Any] = {}  # rung -> its rich task: a survey runs minutes before the first lab job

        def on_step(node: str, _update: dict) -> None:
            row = campaign.ledger.campaign(campaign.campaign_id)
            progress.update(task, completed=row.n_lab - n_imported, status=f"{node}")

        def on_progress(report: dict) -> None:
            if report.get("type") != "survey_progress":
                return
            rung = report["rung"]
            if rung not in surveys:
                surveys[rung] = progress.add_task(rich_safe(report["label"]), total=report["n_total"], status="")
                progress.update(task, status="surveying")
            progress.update(surveys[rung], completed=report["n_done"], total=report["n_total"])

        summary = campaign.run(max_steps=max_steps, approval=approval, on_step=on_step, by=by,
                               on_progress=on_progress)
        progress.update(task, completed=summary["n_lab"], status=summary["status"])
    return summary


def _print_summary(summary: dict[str, Any], db: str | None = None) -> None:
    """The run's tables; ``db`` is the ``--db`` the run was given, which a suggested command repeats (default: the
    ledger's URL)."""
    objective = summary["objective"]
    goal = (f"{objective['direction']} {objective['property']}" if objective["direction"] != "target"
            else f"{objective['property']} within {objective['target']} ± {objective['tolerance']}")
    table = Table(title=f"campaign {rich_safe(summary['campaign_id'])}", show_header=False)
    best = summary["best"] or {}
    for name, value in [
        ("status", f"{status_text(summary['status'])} ({summary.get('stop_reason') or 'not stopped'})"),
        ("objective", goal),
        ("best found", f"{fmt(best.get('value'))} {objective['unit']}  {best.get('label', '')}  [{best.get('arm', '')}]"),
        ("lab experiments", f"{summary['n_lab']} of {summary['lab_budget']} ({summary['n_lab_failed']} failed)"
                            + (f", after {summary['n_imported']} imported past results" if summary.get("n_imported") else "")),
        ("hits", str(summary["n_hits"])),
        ("simulated lab time", f"{summary['lab_hours']:.1f} h"),
        ("simulator compute", f"{summary['compute_s']:.1f} s"),
        ("ladder in the GP", _ladder_prior_text(summary.get("ladder_prior"))),
        ("ledger", summary["db"]),
    ]:
        table.add_row(name, rich_safe(value))
    out.print(table)
    arms = Table(title="main arm against control")
    for column in ("arm", "lab experiments", "best value", "experiments to its best"):
        arms.add_column(column)
    for arm, entry in summary["arms"].items():
        role = " (main)" if arm == summary["main_arm"] else " (control)" if arm == summary["control_arm"] else ""
        arms.add_row(rich_safe(arm + role), str(entry["n_lab"]), fmt(entry["best_value"]),
                     fmt(entry["experiments_to_best"]))
    out.print(arms)
    if "main_beats_control" in summary:
        out.print(rich_safe(_comparison_sentence(summary)))
    if summary.get("front"):
        from orchestrator.interfaces.front_text import front_table

        out.print(front_table(summary["front"]))
    if summary.get("approval"):
        keys = summary["approval"]["job_keys"]
        out.print(_batch_table(summary["approval"]))
        resume = resume_command(summary["campaign_id"], db or summary["db"])
        out.print(f"[yellow]waiting for approval of {len(keys)} lab job(s):[/] {rich_safe(resume)}", soft_wrap=True)
        out.print("  (it asks which jobs to approve; or add --approve all, --approve none --reason WHY, or "
                  "--approve KEY,KEY)", soft_wrap=True)


def status_text(status: str | None) -> str:
    """A campaign status as a table shows it: ``waiting_for_approval`` reads "waiting for approval"."""
    return (status or "").replace("_", " ")


def resume_command(campaign_id: str, db: str, *options: str) -> str:
    """The ``closedloop run --resume`` line to paste, each argument quoted as the shell needs it (``shlex.quote``),
    so an id or a path with ``$(...)``, spaces or quotes is one argument and runs nothing.

    Example:
        >>> resume_command("screen$(touch PWNED)", "my ledger.db", "--approve", "all")
        "closedloop run --resume 'screen$(touch PWNED)' --db 'my ledger.db' --approve all"
    """
    import shlex

    return shlex.join(["closedloop", "run", "--resume", campaign_id, "--db", db, *options])


def _ladder_prior_text(prior: dict[str, Any] | None) -> str:
    """The GP's last ladder prior in words (``summary.ladder_prior``)."""
    if not prior:
        return "none (the GP plans on lab results alone)"
    role = "an input" if prior["form"] == "feature" else "the prior mean"
    proof = "proved informative" if prior["is_calibrated"] else "not yet proved informative"
    evidence = "" if prior.get("evidence") is None else f", P(informative) {prior['evidence']:.2f}"
    return f"{prior['rung']} as {role}, {proof} on {prior['n_train']} lab results{evidence}"


def _comparison_sentence(summary: dict[str, Any]) -> str:
    """The main arm against the control in one sentence (``summary.comparison_sentence``)."""
    from orchestrator.loop.summary import comparison_sentence

    return comparison_sentence(summary)


# --------------------------------------------------------------------------------------------------- serving (cli_serve)
app.command()(worker)
app.command("mcp")(mcp_command)
app.command()(dashboard)
app.add_typer(lab_app, name="lab")
app.add_typer(env_app, name="env")


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
        table.add_row(rich_safe(r["input"]), rich_safe(r["rung"]), r["status"], f"{r['wall_s']:.3f}", rich_safe(shown))
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
    from orchestrator.replay.candidates import candidate_labels

    labels = candidate_labels(ledger, campaign_id)  # candidates by SMILES, formula or conditions, not by their ids
    units = campaign_units(ledger, campaign_id)
    table = Table(title=f"{rich_safe(campaign_id)}: {len(events)} events")
    for column in ("seq", "type", "actor", "what"):
        table.add_column(column)
    for e in events:
        table.add_row(str(e.seq), rich_safe(e.type), rich_safe(e.actor),
                      rich_safe(describe_event(e.type, e.payload, labels, units)))
    out.print(table)


@app.command("ls")
def list_campaigns(
    db: DbOption = "closedloop.db",
    as_json: Annotated[bool, typer.Option("--json", help="print a JSON list")] = False,
) -> None:
    """List the campaigns in a ledger database: n_lab is the lab experiments each ran; past results imported with
    --history are counted apart, as imported, and best_value is the best of the campaign's own lab results."""
    from orchestrator.interfaces.lab_counts import campaign_counts, imported_counts

    ledger = open_existing(db)
    imported = imported_counts(ledger)
    rows = [{"campaign_id": c.id, "name": c.name, "status": c.status, **campaign_counts(ledger, c, imported),
             "stop_reason": c.stop_reason} for c in ledger.campaigns()]
    if as_json:
        emit_json(rows)
        return
    table = Table(title=f"campaigns in {rich_safe(db)}")
    longest = max((len(row["campaign_id"]) for row in rows), default=0)
    table.add_column("campaign_id", no_wrap=True, min_width=longest)  # an id is copied whole: never cut or folded
    # column -> its least width; a status reads whole ("waiting for approval"), a long name folds
    for column, least in {"name": 12, "status": 20, "n_lab": 5, "imported": 8, "best_value": 10}.items():
        table.add_column(column, overflow="fold", min_width=least, no_wrap=column == "status")
    for row in rows:
        table.add_row(rich_safe(row["campaign_id"]), rich_safe(row["name"]), rich_safe(status_text(row["status"])),
                      str(row["n_lab"]), str(row["n_imported"]), fmt(row["best_value"]))
    from rich.measure import Measurement

    needed = Measurement.get(out, out.options.update_width(10_000), table).minimum
    if needed <= out.width:
        out.print(table)
    else:  # a console wide enough for the ids: a narrow terminal wraps the lines rather than cutting an id
        from rich.console import Console

        Console(file=out.file, width=needed, color_system=out.color_system, no_color=out.no_color).print(table)


# --------------------------------------------------------------------------------------------------- history (cli_ledger)
app.command()(report)
app.command()(replay)


# Sub-commands that live in their own modules (they share cli_common's options and helpers, never this module's).
from orchestrator.interfaces.cli_bench import bench  # noqa: E402
from orchestrator.interfaces.cli_rewards import export_command, rewards_app  # noqa: E402

app.command("bench")(bench)
app.add_typer(rewards_app, name="rewards")
app.command("export")(export_command)

from orchestrator.interfaces.cli_spec import spec_app  # noqa: E402

app.add_typer(spec_app, name="spec")

from orchestrator.interfaces.cli_results import results_app, suggest  # noqa: E402

app.command("suggest")(suggest)
app.add_typer(results_app, name="results")


if __name__ == "__main__":  # pragma: no cover
    from orchestrator.interfaces.cli_common import run_app

    run_app(app)  # as the console script does: an escaped closedloop error is one line, not a traceback
