"""``closedloop ledger verify|export|import``, ``closedloop replay`` and ``closedloop report``: the commands that read
a campaign's recorded history, to check it, move it, replay it (exactly, or what-if) or write it up.

Registered by ``orchestrator.interfaces.cli``; heavy imports stay inside the commands.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from orchestrator.interfaces.cli_common import (
    DbOption,
    emit_json,
    fail,
    fmt,
    ledger_with,
    open_existing,
    out,
)
from vocabulary.domain import ClosedLoopError

__all__ = ["ledger_app", "replay", "report"]

ledger_app = typer.Typer(help="Inspect and check campaign ledgers.", no_args_is_help=True)


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


def report(
    campaign_id: Annotated[str, typer.Argument(help="campaign to report on")],
    db: DbOption = "closedloop.db",
    out_dir: Annotated[Path, typer.Option("--out", help="directory for index.html and the PNG plots")] = Path("report"),
) -> None:
    """Write an HTML report with plots: best so far, the ladder funnel, the lab Gantt, rewards over steps."""
    from orchestrator.replay.report import write_report

    index = write_report(ledger_with(db, campaign_id), campaign_id, out_dir)
    out.print(f"report written to {index}")


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
