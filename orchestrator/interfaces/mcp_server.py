"""``closedloop mcp``: the campaigns of one ledger as MCP tools over stdio, so any MCP-speaking agent can drive or watch
them.

The server is the ``mcp`` package's ``MCPServer`` (FastMCP before mcp 2; ``pip install "closedloop[mcp]"``). Its
tools are thin: reads go to the ledger, and everything that drives a campaign goes through
``orchestrator.interfaces.background``, which opens campaigns as ``closedloop run`` does and drives them in background threads,
so a long campaign never blocks the stdio server. An agent starts a campaign, polls ``campaign_status`` or
``campaign_timeline``, answers ``approve_dispatch`` / ``reject_dispatch`` when the approve node waits and
``decide_failed_jobs`` (retry, skip or abort) when failed lab jobs wait for a human, and reads ``campaign_report`` at
the end. With the ``manual`` lab (a person at the bench) ``suggest`` lists the jobs waiting for results (with the
model's predictions), ``add_results`` enters what was measured (``orchestrator.loop.manual_results``; then
``resume_campaign``) and ``export_results`` returns every result. Candidates are named as a chemist reads them
(``candidate``: SMILES, formula or name=value pairs, ``orchestrator.space.pool.describe``) beside their ids. Answers take the CLI's own path (resume, then ``run(approval=...)``), so the spec's approval and failure
policies govern MCP exactly as they govern ``closedloop run``.

Tool errors (a bad spec, an unknown campaign, nothing to approve, a campaign another process runs) come back as MCP
tool errors whose text is the closedloop message, with its fix.

A tool writes files only under the server's ``root`` (``closedloop mcp --root DIR``; default: the directory of a
SQLite ledger file, else the working directory): ``campaign_report``'s ``out_dir`` is resolved against it (``..``
and symlinks included) and refused when it leads outside, and the report never replaces a file that is there (each
file is created exclusively; one that exists refuses the report before anything is written).

Example:
    >>> import asyncio
    >>> server = build_server(":memory:")
    >>> [tool.name for tool in asyncio.run(server.list_tools())]  # doctest: +NORMALIZE_WHITESPACE
    ['list_campaigns', 'start_campaign', 'resume_campaign', 'stop_campaign', 'campaign_status', 'campaign_timeline',
     'approve_dispatch', 'reject_dispatch', 'decide_failed_jobs', 'campaign_report', 'suggest', 'add_results',
     'export_results']
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from orchestrator.interfaces.background import (
    BackgroundRuns,
    pending_approval,
    pending_failure_decision,
)
from orchestrator.interfaces.lab_counts import campaign_counts, imported_counts
from vocabulary.domain import ClosedLoopError, import_optional

if TYPE_CHECKING:
    from orchestrator.ledger import Ledger

__all__ = ["INSTRUCTIONS", "OutsideRoot", "build_server", "default_root", "serve", "writable_dir"]

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "closedloop runs closed-loop lab campaigns (plan, simulate, approve, dispatch to a lab, learn). Start one with "
    "start_campaign (it runs in the background) and poll campaign_status until its run state is finished, "
    "waiting_for_approval or paused; campaign_timeline(after_seq=...) reads new ledger events incrementally. When a "
    "batch awaits approval, approve_dispatch (all, or some job_keys) or reject_dispatch answers it; when failed lab "
    "jobs await a decision (awaiting_decision), decide_failed_jobs answers retry, skip or abort; give these answers "
    "by=<the person's name> for the audit trail. With a manual lab (status waiting_for_results) suggest lists the jobs "
    "at the bench, add_results enters their measured values (and off-plan measurements), then resume_campaign plans "
    "the next batch; export_results returns every result. stop_campaign "
    "pauses a campaign cleanly; resume_campaign continues it. campaign_report summarises one."
)

_PURPOSE = "closedloop mcp"

ByField = Annotated[str | None, Field(
    description="the name of the person answering, for the audit trail (recorded as human:NAME; non-empty, printable, "
                "at most 64 characters); null records only 'human'")]


def candidate_labels(ledger: Ledger, campaign_id: str) -> dict[str, str]:
    """Candidate id -> how a chemist names it (SMILES, formula, name=value pairs), for every candidate the ledger
    holds; an answer names candidates by these, never by an InChIKey alone."""
    from orchestrator.space.pool import describe
    from vocabulary.domain import candidate_from_dict

    return {row.candidate_id: describe(candidate_from_dict(json.loads(row.canonical)))
            for row in ledger.candidates(campaign_id)}


def _named(rows: list[dict[str, Any]] | None, labels: dict[str, str], campaign_id: str) -> list[dict[str, Any]] | None:
    """``rows`` (each with a ``candidate_id`` or a ``job_key``) with a ``candidate`` label added."""
    if rows is None:
        return None
    from orchestrator.loop.jobs import parse_job_key

    named = []
    for row in rows:
        cid = row.get("candidate_id") or parse_job_key(campaign_id, row.get("job_key", ""))[0]
        named.append({**row, "candidate": labels.get(cid, row.get("candidate", cid))})
    return named


def _jsonable(value: Any) -> Any:
    """``value`` as plain JSON types (numpy scalars, datetimes and the like as ``closedloop --json`` prints them)."""
    return json.loads(json.dumps(value, default=str))


class OutsideRoot(ClosedLoopError):
    """A tool was asked to write outside the server's root, or onto files that are already there."""


def default_root(ledger: Ledger) -> Path:
    """Where the tools of a server on ``ledger`` may write by default: the directory of its SQLite file, else (an
    in-memory or a server database) the working directory."""
    database = ledger.engine.url.database if ledger.engine.dialect.name == "sqlite" else None
    if database and database != ":memory:" and not database.startswith("file:"):
        return Path(database).expanduser().resolve().parent
    return Path.cwd().resolve()


def writable_dir(root: Path, out_dir: str | Path) -> Path:
    """``out_dir`` (relative: to ``root``) resolved, ``..`` and symlinks followed; ``OutsideRoot`` when the result is
    not ``root`` or below it.

    Example:
        >>> writable_dir(Path("/srv/mcp"), "reports/run1").as_posix()
        '/srv/mcp/reports/run1'
        >>> writable_dir(Path("/srv/mcp"), "../etc")
        Traceback (most recent call last):
        ...
        orchestrator.interfaces.mcp_server.OutsideRoot: out_dir '../etc' resolves to /srv/etc, outside this server's root /srv/mcp; give a directory under the root (relative paths start there), or start the server with --root
    """
    root = root.resolve()
    target = Path(out_dir).expanduser()
    resolved = (target if target.is_absolute() else root / target).resolve()
    if not resolved.is_relative_to(root):
        raise OutsideRoot(f"out_dir {str(out_dir)!r} resolves to {resolved}, outside this server's root {root}; give "
                          "a directory under the root (relative paths start there), or start the server with --root")
    return resolved


def write_report_new(ledger: Ledger, campaign_id: str, out: Path) -> Path:
    """``replay.report.write_report`` into ``out``, creating each file exclusively: when one of the report's files
    is already there (or turns up while it is written) nothing there is replaced, and ``OutsideRoot`` says which."""
    from orchestrator.replay.report import write_report

    try:
        out.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise OutsideRoot(f"out_dir {out} is not a directory; give a new or an existing directory") from None
    with tempfile.TemporaryDirectory(prefix="closedloop-report-") as scratch:
        index = write_report(ledger, campaign_id, scratch)
        names = sorted(p.name for p in Path(scratch).iterdir())
        there = [name for name in names if os.path.lexists(out / name)]
        if there:
            raise OutsideRoot(f"out_dir {out} already holds {there}; a report never replaces files: give a new or an "
                              "empty directory, or move those away")
        written: list[Path] = []
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
            for name in names:
                with os.fdopen(os.open(out / name, flags, 0o644), "wb") as target:
                    written.append(out / name)
                    with open(Path(scratch) / name, "rb") as source:
                        shutil.copyfileobj(source, target)
        except FileExistsError:
            for path in written:
                path.unlink(missing_ok=True)
            raise OutsideRoot(f"a file of the report appeared in {out} while it was written; nothing there was "
                              "replaced; give a new or an empty directory") from None
        return out / index.name


def build_server(db: str | Path | Ledger, *, runs: BackgroundRuns | None = None, root: str | Path | None = None):
    """The MCP server (an ``MCPServer``) whose tools drive and read the campaigns of the ledger at ``db``.

    Args:
        db: a ledger path (SQLite, created if missing) or an SQLAlchemy URL, as ``--db`` everywhere, or an open
            ``Ledger``.
        runs: the background runs to drive campaigns with (default: new ones on the same ``Ledger``, which they
            must share: see ``BackgroundRuns``); ``serve`` stops them on exit.
        root: the directory the tools may write under (``campaign_report``'s ``out_dir``); default
            ``default_root``.

    Raises:
        MissingDependency: the ``mcp`` package is not installed (``pip install "closedloop[mcp]"``).
    """
    mcpserver = import_optional("mcp.server.mcpserver", "mcp", _PURPOSE)
    ToolError = import_optional("mcp.server.mcpserver.exceptions", "mcp", _PURPOSE).ToolError
    from orchestrator.ledger import Ledger

    ledger = db if isinstance(db, Ledger) else Ledger.open(db)
    db = ledger.url
    root = Path(root).expanduser().resolve() if root is not None else default_root(ledger)
    runs = runs or BackgroundRuns(ledger)
    server = mcpserver.MCPServer("closedloop", instructions=INSTRUCTIONS, log_level="WARNING")

    @contextmanager
    def closedloop_errors():
        """A closedloop error is the tool's error text; anything else is a bug and keeps its traceback in the log."""
        try:
            yield
        except ClosedLoopError as exc:
            raise ToolError(str(exc) or type(exc).__name__) from exc

    def known(campaign_id: str) -> None:
        if not ledger.n_events(campaign_id):
            raise ToolError(f"campaign {campaign_id!r} has no events in {db}; campaigns there: "
                            f"{ledger.campaign_ids_with_events()}")

    def status(campaign_id: str) -> dict[str, Any]:
        row = ledger.campaign(campaign_id)
        counts = campaign_counts(ledger, row, imported_counts(ledger, campaign_id))
        run = runs.get(campaign_id)
        n_events = ledger.n_events(campaign_id)
        last = ledger.events(campaign_id, after_seq=n_events - 1)
        is_running_here = run is not None and run.is_active
        labels = candidate_labels(ledger, campaign_id)
        approval = None if is_running_here or row.status == "stopped" else pending_approval(ledger, campaign_id)
        if approval is not None and approval.get("predictions"):
            approval = {**approval, "predictions": _named(approval["predictions"], labels, campaign_id)}
        failures = None if is_running_here or row.status == "stopped" else pending_failure_decision(ledger, campaign_id)
        if failures is not None:
            failures = {**failures, "failures": _named(failures["failures"], labels, campaign_id)}
        return _jsonable({
            "campaign_id": campaign_id, "name": row.name, "status": _row_status(row), "stop_reason": row.stop_reason,
            **counts, "best_candidate": labels.get(counts.get("best_candidate_id")),
            "n_events": n_events, "last_event": {"seq": last[0].seq, "type": last[0].type} if last else None,
            "run": None if run is None else run.as_dict(),
            "pending_approval": approval,
            "pending_failures": failures,
        })

    def _row_status(row) -> str:
        """The row's status, or ``waiting_for_results`` where a manual lab's last run ended waiting on a person."""
        if row.status != "running":
            return row.status
        from orchestrator.loop.manual_results import is_waiting_for_results

        return "waiting_for_results" if is_waiting_for_results(ledger, row.id) else row.status

    @server.tool()
    def list_campaigns() -> dict[str, Any]:
        """The campaigns in the ledger: id, name, status (running or stopped), lab experiments (n_lab; past results
        imported from a CSV apart, as n_imported), best value, and the state of this server's background run of each
        (null when this server has not driven it)."""
        rows = []
        imported = imported_counts(ledger)
        for c in ledger.campaigns():
            run = runs.get(c.id)
            counts = campaign_counts(ledger, c, imported)
            best = counts.get("best_candidate_id")
            rows.append({"campaign_id": c.id, "name": c.name, "status": _row_status(c), **counts,
                         "best_candidate": None if best is None else candidate_labels(ledger, c.id).get(best, best),
                         "stop_reason": c.stop_reason,
                         "run_state": None if run is None else run.state})
        return _jsonable({"db": db, "campaigns": rows})

    @server.tool()
    def start_campaign(
        spec: Annotated[str, Field(description="path of a campaign TOML file, as for `closedloop run SPEC`")],
        lab_budget: Annotated[int | None, Field(description="override the lab experiment budget", gt=0)] = None,
        seed: Annotated[int | None, Field(description="override the spec's seed")] = None,
        planner: Annotated[str | None, Field(description="main arm: llm, bo, random, ...")] = None,
        model: Annotated[str | None, Field(description="llm arm's model: provider:model or a .gguf path")] = None,
        control_share: Annotated[float | None, Field(description="control arm's share of the lab budget (0: none)",
                                                     ge=0, le=1)] = None,
        campaign_id: Annotated[str | None, Field(description="id for the new campaign (default: name-random)")] = None,
    ) -> dict[str, Any]:
        """Start a new campaign and run it in the background; returns once CampaignStarted is recorded. Poll
        campaign_status until its run state is finished, waiting_for_approval or paused."""
        from orchestrator.spec import load_spec

        with closedloop_errors():
            parsed = load_spec(Path(spec).expanduser()).with_overrides(
                seed=seed, lab_budget=lab_budget, planner=planner, model=model, control_share=control_share)
            run = runs.start(parsed, campaign_id=campaign_id)
        return status(run.campaign_id)

    @server.tool()
    def resume_campaign(
        campaign_id: str,
        lab_budget: Annotated[int | None, Field(description="a new lab budget (recorded as LabBudgetChanged)",
                                                gt=0)] = None,
    ) -> dict[str, Any]:
        """Continue a paused or interrupted campaign from its last checkpoint, in the background. A campaign waiting
        for approval is answered with approve_dispatch or reject_dispatch instead."""
        known(campaign_id)
        with closedloop_errors():
            runs.resume(campaign_id, lab_budget=lab_budget)
        return status(campaign_id)

    @server.tool()
    def stop_campaign(
        campaign_id: str,
        wait_s: Annotated[float, Field(description="how long to wait for the current node to end", ge=0)] = 120.0,
    ) -> dict[str, Any]:
        """Stop this server's background run of a campaign after the node it is in. The ledger and checkpoint stay
        consistent, the campaign stays resumable (resume_campaign), and its ledger status stays running."""
        known(campaign_id)
        with closedloop_errors():
            runs.stop(campaign_id, timeout_s=wait_s)
        return status(campaign_id)

    @server.tool()
    def campaign_status(campaign_id: str) -> dict[str, Any]:
        """A campaign's status: ledger status, lab experiments, best value, event count, this server's run state
        (starting, running, stopping, paused, waiting_for_approval, awaiting_decision, finished, failed) with the
        pending question, and, for a campaign not running here, the lab batch awaiting approval per its ledger."""
        known(campaign_id)
        return status(campaign_id)

    @server.tool()
    def campaign_timeline(
        campaign_id: str,
        after_seq: Annotated[int, Field(description="only events after this seq (poll with the last seq seen)",
                                        ge=0)] = 0,
        limit: Annotated[int, Field(description="at most this many events", gt=0, le=5000)] = 200,
        types: Annotated[list[str] | None, Field(description="only these event types, e.g. ['Observed']")] = None,
        include_payload: Annotated[bool, Field(description="include each event's full payload")] = True,
    ) -> dict[str, Any]:
        """A campaign's ledger events in order (what `closedloop show` prints): seq, type, actor, time, a one-line
        description and the payload. Page with after_seq = the returned last_seq."""
        from orchestrator.interfaces.event_text import campaign_units, describe_event
        from orchestrator.replay.candidates import candidate_labels

        known(campaign_id)
        events = (ledger.read_events(campaign_id, types, after_seq=after_seq) if types
                  else ledger.events(campaign_id, after_seq=after_seq))[:limit]
        labels = candidate_labels(ledger, campaign_id)  # molecules by SMILES, as `closedloop show` names them
        units = campaign_units(ledger, campaign_id)
        rows = []
        for e in events:
            row = {"seq": e.seq, "type": e.type, "actor": e.actor, "at": e.at.isoformat(),
                   "what": describe_event(e.type, e.payload, labels, units)}
            if include_payload:
                row["payload"] = e.payload
            rows.append(row)
        return _jsonable({"campaign_id": campaign_id, "events": rows,
                          "last_seq": events[-1].seq if events else after_seq,
                          "n_events": ledger.n_events(campaign_id)})

    def answer(campaign_id: str, approval: bool | list[str], by: str | None, reason: str | None = None,
               reasons: dict[str, str] | None = None) -> dict[str, Any]:
        known(campaign_id)
        if reason is not None or reasons:  # contract 2's wrapped answer; the plain one otherwise, as before
            approval = {"answer": approval, **({"reason": reason} if reason is not None else {}),
                        **({"reasons": dict(reasons)} if reasons else {})}
        with closedloop_errors():
            run = runs.approve(campaign_id, approval, by=by)
        # the approve node has run (or the run failed): report what it recorded
        recorded = ledger.last_event(campaign_id, "Approved")
        result = status(campaign_id)
        result["approved"] = None if recorded is None else _jsonable(recorded.payload)
        if run.state == "failed":
            result["error"] = run.error
        return result

    @server.tool()
    def approve_dispatch(
        campaign_id: str,
        job_keys: Annotated[list[str] | None, Field(
            description="approve only these job keys of the pending batch (the others are denied); all when null")
        ] = None,
        by: ByField = None,
        reasons: Annotated[dict[str, str] | None, Field(
            description="why each denied job key was denied (job key -> one line), recorded on its Rejected event")
        ] = None,
        reason: Annotated[str | None, Field(
            description="why the denied jobs were denied, for those without their own reason")] = None,
    ) -> dict[str, Any]:
        """Approve the lab batch a campaign waits on (all of it, or the job_keys given) and keep running it in the
        background. Only a batch the approve node is waiting on can be approved, as with `closedloop run --approve`;
        the answer is recorded as an Approved event (denied jobs as Rejected, with their reason), approved by
        human:BY (human without by). The pending batch's predictions are in campaign_status's pending_approval."""
        return answer(campaign_id, True if job_keys is None else list(job_keys), by, reason, reasons)

    @server.tool()
    def reject_dispatch(
        campaign_id: str,
        by: ByField = None,
        reason: Annotated[str | None, Field(description="why the batch was denied (one line), recorded")] = None,
    ) -> dict[str, Any]:
        """Deny the whole lab batch a campaign waits on (its candidates are rejected, and kept from the planners for
        a few iterations before they may be proposed again; retries are skipped) and keep running the campaign in
        the background; recorded as by human:BY (human without by), with the reason given."""
        return answer(campaign_id, False, by, reason)

    @server.tool()
    def decide_failed_jobs(
        campaign_id: str,
        action: Annotated[Literal["retry", "skip", "abort"] | None, Field(
            description="one decision for every failed job the campaign waits on")] = None,
        actions: Annotated[dict[str, Literal["retry", "skip", "abort"]] | None, Field(
            description="a decision per job key instead (jobs left out are skipped)")] = None,
        by: ByField = None,
    ) -> dict[str, Any]:
        """Decide what happens to the failed lab jobs a campaign waits on (lab failure_policy 'ask'): retry them
        (under a new job key, up to the spec's max_retries; beyond it they are skipped), skip them, or abort the
        campaign; then keep running it in the background. As with `closedloop run`'s retry/skip/abort prompt, each
        decision is recorded as a FailureHandled event decided by human:BY (human without by)."""
        if (action is None) == (actions is None):
            raise ToolError("give either action (one decision for all failed jobs) or actions (per job key)")
        known(campaign_id)
        before = ledger.count_events(campaign_id, "FailureHandled")
        with closedloop_errors():
            run = runs.decide(campaign_id, action if action is not None else dict(actions), by=by)
        recorded = ledger.read_events(campaign_id, ["FailureHandled"])[before:]
        result = status(campaign_id)
        result["decided"] = _jsonable([e.payload for e in recorded])
        if run.state == "failed":
            result["error"] = run.error
        return result

    @server.tool()
    def campaign_report(
        campaign_id: str,
        out_dir: Annotated[str | None, Field(
            description="also write the HTML report with plots into this directory, under the server's root "
                        "(a relative path starts there); it must not hold a report's files already")] = None,
    ) -> dict[str, Any]:
        """A campaign's summary from its ledger (what `closedloop run --json` prints): status, best found, lab use,
        hits, each arm's results and the main arm against the control. With out_dir, also writes the HTML report
        (`closedloop report`) there and returns its path; the report never replaces a file, and never goes outside
        the root this server was started with."""
        from orchestrator.loop.summary import summarise

        known(campaign_id)
        with closedloop_errors():
            summary = summarise(ledger, campaign_id)
            labels = candidate_labels(ledger, campaign_id)
            summary["measured_candidates"] = [labels.get(cid, cid) for cid in summary.get("measured", [])]
            if out_dir is not None:
                summary["report_html"] = str(write_report_new(ledger, campaign_id, writable_dir(root, out_dir)))
        return _jsonable(summary)

    @server.tool()
    def suggest(campaign_id: str) -> dict[str, Any]:
        """The jobs of a manual lab waiting at the bench for their results: job (its key), candidate (SMILES,
        formula or name=value pairs), the candidate's own columns, and predicted / sd (the model's prediction, in
        the objective's unit; null where none). Enter what was measured with add_results."""
        from orchestrator.loop.manual_results import pending_jobs
        from orchestrator.loop.resume_policy import recorded_spec

        known(campaign_id)
        with closedloop_errors():
            jobs = pending_jobs(ledger, campaign_id)
            spec = recorded_spec(ledger, campaign_id)
        labels = candidate_labels(ledger, campaign_id)
        rows = _named([{"job_key": r["job"], **r} for r in jobs.to_dict("records")], labels, campaign_id)
        return _jsonable({"campaign_id": campaign_id, "property": spec.objective.property,
                          "unit": spec.objective.unit, "jobs": [{k: v for k, v in r.items() if k != "job_key"}
                                                                for r in rows or []]})

    @server.tool()
    def add_results(
        campaign_id: str,
        rows: Annotated[list[dict[str, Any]], Field(
            description="one object per result: 'job' (a key from suggest) or the candidate's own columns (e.g. "
                        "'smiles'), the objective's property (its unit), and optionally 'uncertainty' (one sd), "
                        "'status' ('ok' or 'failed'), 'reason' (required for a failed run), 'measured_at' (ISO "
                        "8601)")],
        by: ByField = None,
    ) -> dict[str, Any]:
        """Enter lab results measured by hand. A result for a job of suggest is recorded for it; one for a
        candidate without an open job is an off-plan measurement (it informs the model, not the lab budget); an
        identical result again is a duplicate (nothing written), a different one for a job that has one is refused.
        A malformed row refuses them all (the error names the row and the field). Then resume_campaign plans on."""
        from orchestrator.loop.manual_results import add_results as enter

        known(campaign_id)
        with closedloop_errors():
            receipt = enter(ledger, campaign_id, rows, by=by, source="mcp")
        return _jsonable({"campaign_id": campaign_id, "rows": receipt.as_dicts(),
                          "n_written": receipt.n_written, "n_refused": receipt.n("refused"),
                          "status": status(campaign_id)["status"]})

    @server.tool()
    def export_results(campaign_id: str) -> dict[str, Any]:
        """Every lab result of a campaign, in the order recorded (what `closedloop results export` writes): job,
        candidate, the objective's property, uncertainty, status, reason, measured_at, provenance (lab, entered,
        off-plan, imported), by, arm, iteration."""
        from orchestrator.loop.manual_results import export_results as export

        known(campaign_id)
        with closedloop_errors():
            frame = export(ledger, campaign_id)
        records = frame.astype(object).where(frame.notna(), None).to_dict("records")
        return _jsonable({"campaign_id": campaign_id, "results": records, "n_results": len(records)})

    return server


def serve(db: str | Path, *, root: str | Path | None = None) -> None:
    """Serve the MCP tools of the ledger at ``db`` over stdio until the client closes the connection, then stop the
    background runs cleanly (each after its current node, leaving them resumable). The tools write only under
    ``root`` (default ``default_root``)."""
    from orchestrator.ledger import Ledger

    ledger = Ledger.open(db)
    runs = BackgroundRuns(ledger)
    try:
        build_server(ledger, runs=runs, root=root).run("stdio")
    finally:
        runs.stop_all()
        ledger.close()
