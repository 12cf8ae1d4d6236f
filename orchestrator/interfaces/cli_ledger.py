"""``closedloop ledger verify|export|import``, ``closedloop replay`` and ``closedloop report``: the commands that read
a campaign's recorded history, to check it, move it, replay it (exactly, or what-if) or write it up.

``closedloop replay ID`` without a what-if option is an alias of ``closedloop ledger verify ID``: one check
(``orchestrator.ledger.verify``), the same options, verdict, exit status and JSON record, printed as one line that
says the events replayed. Only ``--planner``, ``--rubric`` or ``--model`` give ``replay`` a meaning of its own: a
what-if campaign that re-runs the decisions (orchestrator/interfaces/DECISIONS.md, "Replay and verify").

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
from orchestrator.interfaces.terminal_text import rich_safe, rich_safe_lines
from vocabulary.domain import ClosedLoopError

__all__ = ["ledger_app", "replay", "report"]

ledger_app = typer.Typer(help="Inspect and check campaign ledgers.", no_args_is_help=True)

_HEX = frozenset("0123456789abcdef")


def _checked_head(value: str | None) -> str | None:
    """``--expect-head`` as given: 64 hex digits (the head hash ``ledger verify`` prints), else an input error."""
    if value is None:
        return None
    head = value.strip().lower()
    if len(head) != 64 or not set(head) <= _HEX:
        fail(f"--expect-head {value!r} is not a head hash: give the 64 hex digits `closedloop ledger verify` "
             "printed as the campaign's head")
    return head


ExpectHeadOption = Annotated[str | None, typer.Option(
    "--expect-head", metavar="HASH", help="a head hash kept outside the ledger (printed by `ledger verify`): the chain "
                                          "must reach it, or the command fails naming both heads")]
ForceOption = Annotated[bool, typer.Option("--force", help="overwrite output files of an earlier run (regular files "
                                                           "only; links, FIFOs and devices are always refused)")]


def _verify_record(report) -> dict:
    """One campaign's verify report as ``--json`` prints it, for ``ledger verify`` (a list) and ``replay`` (one)."""
    return {"campaign_id": report.campaign_id, "identical": report.is_identical, "n_events": report.n_events,
            "head_hash": report.head_hash, "chain_break": report.chain_break, "anchor": report.anchor,
            "head_problems": report.head_problems, "notes": report.notes, "differences": report.differences}


def _print_heads(report, *, verbose: bool = True) -> None:
    """A report's head problems, one line each (naming both heads), then where its head is anchored."""
    for problem in report.head_problems:
        out.print(f"  [red]{rich_safe(problem)}[/]", soft_wrap=True, highlight=False)
    if verbose and report.anchor:
        out.print(f"  anchor: {rich_safe(report.anchor)}", soft_wrap=True, highlight=False)


@ledger_app.command("verify")
def ledger_verify(
    campaign_id: Annotated[str | None, typer.Argument(help="one campaign; all of them when omitted")] = None,
    db: DbOption = "closedloop.db",
    as_json: Annotated[bool, typer.Option("--json")] = False,
    expect_head: ExpectHeadOption = None,
) -> None:
    """Check each event against the hash chain, rebuild the projections from the events and compare, and check the
    chain against the head anchored outside the event table (and --expect-head); exit 1 if the chain breaks, stops
    short of a kept head, or anything differs. Prints each campaign's head hash: keep it outside the ledger to prove
    later that nothing was rewritten or removed. `closedloop replay ID` is the same check for one campaign."""
    from orchestrator.ledger import verify

    expected = _checked_head(expect_head)
    ledger = ledger_with(db, campaign_id) if campaign_id else open_existing(db)
    ids = [campaign_id] if campaign_id else ledger.campaign_ids_with_events()
    if expected is not None and len(ids) != 1:
        fail(f"--expect-head checks one campaign, and {db} holds {len(ids)}: name the campaign, e.g. "
             f"`closedloop ledger verify {ids[0] if ids else 'ID'} --expect-head HASH`")
    reports = [verify(ledger, cid, expect_head=expected) for cid in ids]
    if as_json:
        emit_json([_verify_record(r) for r in reports])
    else:
        for r in reports:
            table_differences = [d for d in r.differences if d["table"] != "head"]
            mark = "[green]ok[/]" if not table_differences else f"[red]{len(table_differences)} difference(s)[/]"
            if r.chain_break:
                chain = f"[red]broken: {rich_safe(r.chain_break)}[/]"
            elif r.head_problems:
                chain = "[red]disagrees with the head kept for it[/]"
            else:
                chain = f"[green]ok[/], head {rich_safe(r.head_hash)}"
            out.print(f"{rich_safe(r.campaign_id)}: {r.n_events} events, hash chain {chain}, projections {mark}")
            _print_heads(r)
            for note in r.notes:
                out.print(f"  note: {rich_safe_lines(note)}")
            for d in table_differences[:10]:
                out.print(f"  {rich_safe(d['table'])} {rich_safe(d['key'])}: stored={rich_safe(d['stored'])} "
                          f"rebuilt={rich_safe(d['rebuilt'])}")
    if not all(r.is_identical for r in reports):
        raise typer.Exit(1)


@ledger_app.command("export")
def ledger_export(
    campaign_id: Annotated[str, typer.Argument(help="campaign to export")],
    db: DbOption = "closedloop.db",
    out_path: Annotated[Path, typer.Option("--out", help="JSONL file to write")] = Path("campaign.jsonl"),
    force: ForceOption = False,
) -> None:
    """Write a campaign's events as JSONL, one schema-versioned event per line, its header carrying the campaign's
    signed head (keyed when CLOSEDLOOP_LEDGER_KEY is set)."""
    from orchestrator.ledger import export_jsonl

    ledger = ledger_with(db, campaign_id)
    try:
        n = export_jsonl(ledger, campaign_id, out_path, force=force)
    except ClosedLoopError as exc:
        fail(str(exc))
    out.print(f"{rich_safe(campaign_id)}: {n} events written to {rich_safe(out_path)}")


@ledger_app.command("import")
def ledger_import(
    path: Annotated[Path, typer.Argument(help="JSONL file from `closedloop ledger export`")],
    db: DbOption = "closedloop.db",
    unverified: Annotated[bool, typer.Option(
        "--unverified", help="accept an export written before exports carried a hash chain; the ledger records the "
                             "import as unverified")] = False,
    expect_head: ExpectHeadOption = None,
) -> None:
    """Read an exported campaign into a ledger. The file's hash chain must verify, its signed head must match (and,
    with CLOSEDLOOP_LEDGER_KEY set, verify), and it must reach --expect-head: a bad, altered or cut file is refused
    with one line, and nothing is imported."""
    from orchestrator.ledger import Ledger, LedgerError, LedgerImportError, import_jsonl

    expected = _checked_head(expect_head)
    if not path.is_file():
        fail(f"no file {path}; give the JSONL written by `closedloop ledger export`")
    try:
        report = import_jsonl(path, Ledger.open(db), unverified=unverified, expect_head=expected)
    except (LedgerImportError, LedgerError) as exc:
        fail(str(exc))
    how = (f"hash chain verified, {rich_safe(report.head_signature)}" if report.is_verified else
           "[yellow]unverified[/] (no hash chain in the file)")
    if report.expected_head:
        how += f", {rich_safe(report.expected_head)}"
    out.print(f"{rich_safe(report.campaign_id)}: {report.n_added} events added, {report.n_present} already present; {how}",
              soft_wrap=True)


def report(
    campaign_id: Annotated[str, typer.Argument(help="campaign to report on")],
    db: DbOption = "closedloop.db",
    out_dir: Annotated[Path, typer.Option("--out", help="directory for index.html and the PNG plots")] = Path("report"),
    force: ForceOption = False,
) -> None:
    """Write an HTML report with plots: best so far, the ladder funnel, the lab Gantt, rewards over steps."""
    from orchestrator.replay.report import write_report

    ledger = ledger_with(db, campaign_id)
    try:
        index = write_report(ledger, campaign_id, out_dir, force=force)
    except ClosedLoopError as exc:
        fail(str(exc))
    out.print(f"report written to {rich_safe(index)}")


def replay(
    campaign_id: Annotated[str, typer.Argument(help="campaign to replay")],
    db: DbOption = "closedloop.db",
    planner: Annotated[str | None, typer.Option("--planner", help="what-if: re-run the decisions with this main arm (llm, bo, random)")] = None,
    rubric: Annotated[str | None, typer.Option("--rubric", help="what-if: score with this rubric (a TOML file or a built-in name)")] = None,
    model: Annotated[str | None, typer.Option("--model", help="what-if: the llm arm's model (provider:model or .gguf)")] = None,
    out_db: Annotated[str | None, typer.Option("--out-db", help="what-if: keep its ledger here (default: a temporary file)")] = None,
    recorded_lab: Annotated[bool, typer.Option("--recorded-lab", help="what-if: reuse recorded results only, even from a simulated lab (others are unknown)")] = False,
    expect_head: ExpectHeadOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """Exact replay, an alias of `closedloop ledger verify ID`: fold every event into a fresh database, prove the
    projections equal and the hash chain sound up to its kept head (and --expect-head); exit 1 if not. --json prints
    the one record `ledger verify --json` lists. With --planner/--rubric/--model: a what-if campaign that re-runs the
    decisions on the recorded history, compared side by side."""
    is_what_if = planner is not None or rubric is not None or model is not None
    if is_what_if and expect_head is not None:
        fail("--expect-head checks the recorded chain, which a what-if does not: run `closedloop replay "
             f"{campaign_id} --expect-head HASH` (or `closedloop ledger verify`) without --planner, --rubric or --model")
    if not is_what_if and (out_db is not None or recorded_lab):
        given = " and ".join(name for name, on in (("--out-db", out_db is not None), ("--recorded-lab", recorded_lab)) if on)
        verb = "shape" if " and " in given else "shapes"
        fail(f"{given} {verb} only a what-if replay: add --planner, --rubric or --model, or leave {given} out for the "
             "exact replay")
    expected = _checked_head(expect_head)
    ledger = ledger_with(db, campaign_id)
    if is_what_if:
        _what_if(ledger, campaign_id, planner=planner, rubric=rubric, model=model, out_db=out_db,
                 recorded_lab=recorded_lab, as_json=as_json)
        return
    from orchestrator.ledger import verify

    report = verify(ledger, campaign_id, expect_head=expected)
    if as_json:
        emit_json(_verify_record(report))
    else:
        verdict = "[green]identical[/]" if report.is_identical else f"[red]{len(report.differences)} difference(s)[/]"
        out.print(f"{rich_safe(campaign_id)}: replayed {report.n_events} events into a fresh database: {verdict}")
        if report.chain_break:
            out.print(f"  [red]hash chain broken: {rich_safe(report.chain_break)}[/]", soft_wrap=True, highlight=False)
        _print_heads(report, verbose=False)
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
    table = Table(title=f"what-if replay of {rich_safe(campaign_id)}")
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
        table.add_row(name, rich_safe(fmt(a)), rich_safe(fmt(b)))
    out.print(table)
    differ = result["proposals"]["differ_by_iteration"]
    out.print(f"lab: {rich_safe(result['lab'])}; {result['proposals']['n_common']} proposals in common; "
              f"{len(differ)} iteration(s) with different proposals; {result['n_unknown']} unknown lab result(s)")
    for row in differ[:10]:
        out.print(f"  it{row['iteration']}: only original {rich_safe(row['only_original'][:4])}, "
                  f"only what-if {rich_safe(row['only_what_if'][:4])}")
    out.print(f"what-if ledger: {rich_safe(result['what_if_db'])} (campaign {rich_safe(result['what_if_campaign_id'])})")
