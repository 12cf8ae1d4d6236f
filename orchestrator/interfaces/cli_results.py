"""``closedloop suggest``, ``closedloop results add`` and ``closedloop results export``: ask/tell from the shell.

A campaign on the ``manual`` lab driver dispatches its batch and returns ``waiting for results``; ``suggest`` prints
the jobs at the bench (with the model's prediction), ``results add`` enters what the bench measured (a CSV, or ``-``
for stdin), ``closedloop run --resume`` then plans the next batch, and ``results export`` writes every result as CSV.
The logic is ``orchestrator.loop.manual_results``; a missing CAMPAIGN_ID means the ledger's only campaign.

Registered by ``orchestrator.interfaces.cli``; heavy imports stay inside the commands.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.table import Table

from orchestrator.interfaces.cli_common import (
    DbOption,
    fail,
    fmt,
    ledger_with,
    open_existing,
    out,
)
from orchestrator.interfaces.terminal_text import rich_safe
from vocabulary.domain import ClosedLoopError

__all__ = ["results_app", "suggest"]

results_app = typer.Typer(help="Enter results measured by hand (manual lab) and export every result.",
                          no_args_is_help=True)

CampaignArgument = Annotated[str | None, typer.Argument(help="campaign id (default: the ledger's only campaign)")]


def _campaign(db: str, campaign_id: str | None, *, read_only: bool = True):
    """(ledger, campaign id): the one named, or the ledger's only campaign."""
    if campaign_id is not None:
        return ledger_with(db, campaign_id, read_only=read_only), campaign_id
    ledger = open_existing(db, read_only=read_only)
    known = ledger.campaign_ids_with_events()
    if len(known) != 1:
        fail(f"{db} holds {len(known)} campaigns ({', '.join(known) or 'none'}); name one: CAMPAIGN_ID"
             if known else f"{db} holds no campaign; start one with `closedloop run SPEC --db {db}`")
    return ledger, known[0]


def suggest(
    campaign_id: CampaignArgument = None,
    db: DbOption = "closedloop.db",
    format: Annotated[Literal["csv", "table"], typer.Option(
        "--format", help="csv (fill in the value column and give it to `results add`) or table")] = "csv",
) -> None:
    """Print the jobs waiting at the bench: job, the candidate's own columns, predicted and sd (the objective's unit),
    and an empty column for the measured value. Run `closedloop run` first to plan a batch."""
    from orchestrator.loop.manual_results import pending_jobs
    from orchestrator.loop.resume_policy import recorded_spec

    ledger, campaign_id = _campaign(db, campaign_id)
    try:
        jobs = pending_jobs(ledger, campaign_id)
        value_column = recorded_spec(ledger, campaign_id).objective.property
    except ClosedLoopError as exc:
        fail(str(exc))
    if format == "csv":
        jobs[value_column] = None
        sys.stdout.write(jobs.to_csv(index=False))
        return
    table = Table(title=f"{len(jobs)} job(s) at the bench: {rich_safe(campaign_id)}")
    for column in jobs.columns:
        table.add_column(str(column), overflow="fold")
    for row in jobs.itertuples(index=False):
        table.add_row(*(rich_safe(fmt(cell)) for cell in row))
    out.print(table)


@results_app.command("add")
def add(
    source: Annotated[str, typer.Argument(metavar="[CAMPAIGN_ID] FILE", help="a results CSV, or - for stdin")],
    more: Annotated[str | None, typer.Argument(hidden=True)] = None,
    db: DbOption = "closedloop.db",
    by: Annotated[str | None, typer.Option("--by", help="who measured them (recorded as human:NAME)")] = None,
) -> None:
    """Enter results: a CSV with `job` (from `closedloop suggest`) or the candidate's own columns, and the
    objective's property column; optional uncertainty, status (ok|failed), reason, measured_at (ISO 8601). A bad
    row refuses the file (one line naming the row and column; nothing is written). Then `closedloop run --resume`."""
    from orchestrator.loop.manual_results import add_results, read_results_csv

    campaign_id, path = (source, more) if more is not None else (None, source)
    ledger, campaign_id = _campaign(db, campaign_id, read_only=False)
    try:
        frame = read_results_csv(sys.stdin if path == "-" else Path(path))
        receipt = add_results(ledger, campaign_id, frame, by=by)
    except ClosedLoopError as exc:
        fail(str(exc))
    for line in receipt.text().splitlines():
        out.print(rich_safe(line), highlight=False, soft_wrap=True)
    if receipt.n("refused"):
        raise typer.Exit(1)


@results_app.command("export")
def export(
    campaign_id: CampaignArgument = None,
    db: DbOption = "closedloop.db",
    out_file: Annotated[Path | None, typer.Option("--out", help="write the CSV here instead of stdout")] = None,
) -> None:
    """Write every lab result (lab, entered by hand, off-plan, imported) as CSV."""
    from orchestrator.loop.manual_results import export_results

    ledger, campaign_id = _campaign(db, campaign_id)
    try:
        frame = export_results(ledger, campaign_id)
    except ClosedLoopError as exc:
        fail(str(exc))
    text = frame.to_csv(index=False)
    if out_file is None:
        sys.stdout.write(text)
        return
    try:
        out_file.write_text(text, encoding="utf-8")
    except OSError as exc:
        fail(f"cannot write {out_file}: {exc.strerror or exc}")
    out.print(f"{len(frame)} result(s) written to {rich_safe(out_file)}")
