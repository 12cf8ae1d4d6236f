"""``closedloop mcp``: the campaigns of one ledger as MCP tools over stdio, so any MCP-speaking agent can drive or watch
them.

The server is the ``mcp`` package's ``MCPServer`` (FastMCP before mcp 2; ``pip install "closedloop[mcp]"``). Its
tools are thin: reads go to the ledger, and everything that drives a campaign goes through
``orchestrator.interfaces.background``, which opens campaigns as ``closedloop run`` does and drives them in background threads,
so a long campaign never blocks the stdio server. An agent starts a campaign, polls ``campaign_status`` or
``campaign_timeline``, answers ``approve_dispatch`` / ``reject_dispatch`` when the approve node waits and
``decide_failed_jobs`` (retry, skip or abort) when failed lab jobs wait for a human, and reads ``campaign_report`` at
the end. Answers take the CLI's own path (resume, then ``run(approval=...)``), so the spec's approval and failure
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
     'approve_dispatch', 'reject_dispatch', 'decide_failed_jobs', 'campaign_report']
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
    "awaiting_approval or paused; campaign_timeline(after_seq=...) reads new ledger events incrementally. When a "
    "batch awaits approval, approve_dispatch (all, or some job_keys) or reject_dispatch answers it; when failed lab "
    "jobs await a decision (awaiting_decision), decide_failed_jobs answers retry, skip or abort; give these answers "
    "by=<the person's name> for the audit trail. stop_campaign "
    "pauses a campaign cleanly; resume_campaign continues it. campaign_report summarises one."
)

_PURPOSE = "closedloop mcp"

ByField = Annotated[str | None, Field(
    description="the name of the person answering, for the audit trail (recorded as human:NAME; non-empty, printable, "
                "at most 64 characters); null records only 'human'")]


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
        return _jsonable({
            "campaign_id": campaign_id, "name": row.name, "status": row.status, "stop_reason": row.stop_reason,
            **counts,
            "n_events": n_events, "last_event": {"seq": last[0].seq, "type": last[0].type} if last else None,
            "run": None if run is None else run.as_dict(),
            "pending_approval": None if is_running_here or row.status == "stopped"
            else pending_approval(ledger, campaign_id),
            "pending_failures": None if is_running_here or row.status == "stopped"
            else pending_failure_decision(ledger, campaign_id),
        })

    @server.tool()
    def list_campaigns() -> dict[str, Any]:
        """The campaigns in the ledger: id, name, status (running or stopped), lab experiments (n_lab; past results
        imported from a CSV apart, as n_imported), best value, and the state of this server's background run of each
        (null when this server has not driven it)."""
        rows = []
        imported = imported_counts(ledger)
        for c in ledger.campaigns():
            run = runs.get(c.id)
            rows.append({"campaign_id": c.id, "name": c.name, "status": c.status, **campaign_counts(ledger, c, imported),
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
        campaign_status until its run state is finished, awaiting_approval or paused."""
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
        (starting, running, stopping, paused, awaiting_approval, awaiting_decision, finished, failed) with the
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
        from orchestrator.interfaces.event_text import describe_event

        known(campaign_id)
        events = (ledger.read_events(campaign_id, types, after_seq=after_seq) if types
                  else ledger.events(campaign_id, after_seq=after_seq))[:limit]
        rows = []
        for e in events:
            row = {"seq": e.seq, "type": e.type, "actor": e.actor, "at": e.at.isoformat(),
                   "what": describe_event(e.type, e.payload)}
            if include_payload:
                row["payload"] = e.payload
            rows.append(row)
        return _jsonable({"campaign_id": campaign_id, "events": rows,
                          "last_seq": events[-1].seq if events else after_seq,
                          "n_events": ledger.n_events(campaign_id)})

    def answer(campaign_id: str, approval: bool | list[str], by: str | None) -> dict[str, Any]:
        known(campaign_id)
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
    ) -> dict[str, Any]:
        """Approve the lab batch a campaign waits on (all of it, or the job_keys given) and keep running it in the
        background. Only a batch the approve node is waiting on can be approved, as with `closedloop run --approve`;
        the answer is recorded as an Approved event (denied jobs as Rejected), approved by human:BY (human without
        by)."""
        return answer(campaign_id, True if job_keys is None else list(job_keys), by)

    @server.tool()
    def reject_dispatch(campaign_id: str, by: ByField = None) -> dict[str, Any]:
        """Deny the whole lab batch a campaign waits on (its candidates are rejected for good; retries are skipped)
        and keep running the campaign in the background; recorded as by human:BY (human without by)."""
        return answer(campaign_id, False, by)

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
            if out_dir is not None:
                summary["report_html"] = str(write_report_new(ledger, campaign_id, writable_dir(root, out_dir)))
        return _jsonable(summary)

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
