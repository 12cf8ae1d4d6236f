"""``Campaign``: the one stateful object users drive, from a notebook or the CLI.

It appends ``CampaignStarted``, compiles the graph with a checkpointer next to the ledger (LangGraph's
``SqliteSaver`` beside a SQLite ledger, its ``PostgresSaver`` in the same database as a PostgreSQL ledger), and
streams the graph step by step. ``Campaign.resume`` picks an interrupted campaign up from its last checkpoint, or
from its ledger alone when the checkpoint is missing or disagrees with it (``orchestrator.loop.position``); because
every node is deterministic and every event is idempotent, the resumed ledger equals an uninterrupted one.

Example:
    >>> from orchestrator.spec import CampaignSpec
    >>> spec = CampaignSpec.model_validate({
    ...     "campaign": {"name": "demo", "kind": "molecule", "seed": 1},
    ...     "objective": {"direction": "maximize"},
    ...     "space": {"inline": ["C", "CC", "CCC", "CCCC", "CCCCC"]},
    ...     "lab": {"oracle": {"C": 1, "CC": 2, "CCC": 3, "CCCC": 4, "CCCCC": 5}},
    ...     "budget": {"lab_experiments": 3}, "planner": {"main": "random", "control": None, "control_share": 0},
    ... })
    >>> with Campaign.start(spec, db=":memory:", campaign_id="demo") as campaign:
    ...     summary = campaign.run()
    >>> summary["n_lab"], summary["status"]
    (3, 'stopped')
"""

from __future__ import annotations

import shlex
import sqlite3
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, get_args

import pandas as pd
from langgraph.types import Command, Durability

from orchestrator.ledger import Ledger, check_sqlite_file
from orchestrator.loop.context import CampaignContext, build_context
from orchestrator.loop.graph import build_graph
from orchestrator.loop.human_answer import actor, checked_name, resume_value
from orchestrator.loop.importing import HistoryFile, ImportedHistory, history_events
from orchestrator.loop.lab import WaitingForResults
from orchestrator.loop.lease import CampaignLease
from orchestrator.loop.manual_results import (
    ResultsReceipt,
    add_results,
    export_results,
    is_waiting_for_results,
    pending_jobs,
)
from orchestrator.loop.position import is_checkpoint_current, ledger_position
from orchestrator.loop.resume_policy import (
    model_has_answered,
    recorded_spec,
    resume_spec,
)
from orchestrator.loop.summary import summarise
from orchestrator.policy.planners import campaign_kernel
from orchestrator.policy.success_bar import fix_success_bar
from orchestrator.space.pool import load_pool
from orchestrator.spec import CampaignSpec
from vocabulary.domain import SetupError, import_optional, redact
from vocabulary.events import (
    BatchRequested,
    CampaignStarted,
    LabBudgetChanged,
    Observed,
    PlannerModelChanged,
)

__all__ = ["DURABILITIES", "Campaign", "checked_durability", "checkpoint_path"]

_RECURSION_LIMIT = 1_000_000
DURABILITIES: tuple[str, ...] = get_args(Durability)  # LangGraph's modes: "sync", "async", "exit"


def checked_durability(durability: Any) -> Durability:
    """``durability`` if it is one of LangGraph's modes, else a ``SetupError`` that names them."""
    if durability not in DURABILITIES:
        raise SetupError(f"{durability=} is not a LangGraph durability mode; use one of {', '.join(DURABILITIES)} "
                         f"(\"sync\", the default, is the one a crashed campaign resumes from exactly)")
    return durability


def checkpoint_path(ledger: Ledger) -> Path | None:
    """Where the LangGraph checkpoints of a file-backed SQLite ledger live: beside it."""
    if ledger.path is None:  # the file itself, never a prefix stripped off its URL (a path may hold ``?`` or ``%20``)
        return None
    return ledger.path.with_name(ledger.path.name + ".checkpoints.sqlite")


# The key of the advisory lock under which LangGraph's checkpoint tables are created (workers may start together).
_CHECKPOINT_SETUP_LOCK = 0x636C6F7365646C70


def _make_checkpointer(ledger: Ledger):
    """LangGraph's Postgres saver in the ledger's database, SQLite beside a file ledger, memory for ``:memory:``.

    Returns the saver and the connection to close with the campaign (or None).
    """
    if ledger.is_postgres:
        return _postgres_checkpointer(ledger)
    path = checkpoint_path(ledger)
    if path is None:
        from langgraph.checkpoint.memory import InMemorySaver

        return InMemorySaver(), None
    from langgraph.checkpoint.sqlite import SqliteSaver

    check_sqlite_file(path, what="LangGraph checkpoint file")
    # The busy timeout (30 s, as the ledger's) before WAL: campaigns sharing one file (Ray fan-out) switch it to WAL
    # together, and sqlite3's default 5 s ran out under load ("database is locked", 2026-11-29).
    connection = sqlite3.connect(path, check_same_thread=False, timeout=30.0)
    connection.execute("PRAGMA journal_mode=WAL")
    # As for the ledger: in WAL mode, NORMAL survives a killed process (the SIGKILL tests) and skips an fsync per
    # checkpoint; a power cut may lose the newest checkpoints, which resume re-derives from the ledger.
    connection.execute("PRAGMA synchronous=NORMAL")
    return SqliteSaver(connection), connection


def _postgres_checkpointer(ledger: Ledger):
    purpose = "a PostgreSQL ledger (its LangGraph checkpoints are kept in PostgreSQL too)"
    psycopg = import_optional("psycopg", "postgres", purpose)
    PostgresSaver = import_optional("langgraph.checkpoint.postgres", "postgres", purpose).PostgresSaver
    dict_row = import_optional("psycopg.rows", "postgres", purpose).dict_row
    conninfo = ledger.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    try:
        # the settings PostgresSaver.from_conn_string uses: autocommit, no prepared statements, dict rows
        connection = psycopg.Connection.connect(conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    except psycopg.OperationalError as exc:
        raise SetupError(f"cannot connect to {ledger.url} for the LangGraph checkpoints: {exc}") from None
    saver = PostgresSaver(connection)
    connection.execute("SELECT pg_advisory_lock(%s)", (_CHECKPOINT_SETUP_LOCK,))
    try:
        saver.setup()  # creates or migrates LangGraph's own tables; idempotent
    finally:
        connection.execute("SELECT pg_advisory_unlock(%s)", (_CHECKPOINT_SETUP_LOCK,))
    return saver, connection


def _check_planner_models(ctx: CampaignContext) -> None:
    """Refuse, before anything is dispatched, a planner model that could never answer (an unknown provider, a
    missing or foreign .gguf file): the lab work of a campaign whose planner cannot plan would be stranded. Each arm
    checks itself (``Planner.check_ready``, e.g. ``LLMPlanner.check_ready``)."""
    from orchestrator.policy.planners.base import check_planner_ready

    for planner in ctx.planners.values():
        check_planner_ready(planner)


def _take_lease(ledger: Ledger, campaign_id: str, held: CampaignLease | None) -> CampaignLease | None:
    """The lease a new ``Campaign`` takes and owns: None when the caller holds one, or for an in-memory ledger."""
    if held is not None or ledger.url == "sqlite://":
        return None
    lease = CampaignLease(ledger, campaign_id)
    lease.acquire()
    return lease


def _give_up(ledger: Ledger | None, lease: CampaignLease | None) -> None:
    if lease is not None:
        lease.release()
    if ledger is not None:
        ledger.close()


class Campaign:
    """A running campaign: its ledger, its context and its compiled graph."""

    def __init__(self, ledger: Ledger, campaign_id: str, spec: CampaignSpec, *, owns_ledger: bool = False,
                 lease: CampaignLease | None = None, durability: Durability = "sync", check_models: bool = True):
        self.durability: Durability = checked_durability(durability)
        """When ``run`` saves LangGraph's checkpoint: ``"sync"`` (the default) before each next node, so a crashed
        campaign resumes exactly; ``"async"`` while the next node runs; ``"exit"`` only when ``run`` returns (at an
        interrupt, a stop or ``max_steps``). The cheaper two suit a ledger no one resumes, such as ``:memory:``."""
        self.ledger, self.campaign_id, self.spec = ledger, campaign_id, spec
        self._owns_ledger = owns_ledger
        self._lease = lease  # the lease this campaign took and releases on close (None: its caller holds one)
        self._checkpointer, self._connection = _make_checkpointer(ledger)
        try:
            self.ctx: CampaignContext = build_context(spec, ledger, campaign_id)
        except BaseException:
            if self._connection is not None:
                self._connection.close()
            raise
        try:
            if check_models:
                _check_planner_models(self.ctx)
        except BaseException:
            self.close_runtime()
            raise
        self.graph = build_graph(self.ctx, self._checkpointer)
        self.config = {"configurable": {"thread_id": campaign_id}, "recursion_limit": _RECURSION_LIMIT}
        self.imported: ImportedHistory | None = None
        """What ``start(history=...)`` imported; None when it imported nothing."""

    # ------------------------------------------------------------------------------------------- construction
    @classmethod
    def start(cls, spec: CampaignSpec, *, db: str | Path | Ledger, campaign_id: str | None = None,
              lease: CampaignLease | None = None, history: HistoryFile | None = None,
              durability: Durability = "sync", check_models: bool = True) -> Campaign:
        """Record ``CampaignStarted`` and return a campaign ready to ``run``.

        The campaign takes its lease (``orchestrator.loop.lease``) unless the caller passes one it holds, and releases it
        on ``close``; a campaign another process is running is refused with ``CampaignBusy``.

        ``history`` imports past lab results (``orchestrator.loop.importing``) in the same transaction as
        ``CampaignStarted``: a history that is refused, or an import that fails for any reason, leaves no campaign in
        the ledger. What was imported is ``campaign.imported``.

        ``durability`` is when ``run`` saves LangGraph's checkpoint (``Campaign.durability``); it is checked before
        the ledger is opened.

        ``check_models=False`` skips the planner model check (``llm_models.check_chat_model``): for a what-if replay
        whose model calls are answered from the recording, where the model need not be installed here.

        The recorded spec has the credentials of its URLs (lab, model endpoint) redacted; this campaign keeps the
        real ones for its connections.
        """
        checked_durability(durability)
        campaign_kernel(spec, load_pool(spec))  # a bad pool, or a kernel it cannot take, is refused before the
        # ledger is opened (the loaded pool is cached)
        ledger, owns = (db, False) if isinstance(db, Ledger) else (Ledger.open(db), True)
        campaign_id = campaign_id or f"{spec.campaign.name}-{uuid.uuid4().hex[:8]}"
        taken = None
        try:
            if ledger.n_events(campaign_id):
                raise SetupError(f"campaign {campaign_id!r} already exists in {ledger.url}; "
                                 f"resume it with --resume {shlex.quote(campaign_id)}")
            taken = _take_lease(ledger, campaign_id, lease)
            if ledger.n_events(campaign_id):  # started by another process between the check and the lease
                raise SetupError(f"campaign {campaign_id!r} was just started by another process in {ledger.url}")
            campaign = cls(ledger, campaign_id, spec, owns_ledger=owns, lease=taken, durability=durability,
                           check_models=check_models)
        except BaseException:
            _give_up(ledger if owns else None, taken)
            raise
        try:
            imports: list[tuple] = []
            if history is not None:
                imports, campaign.imported = history_events(
                    campaign_id, spec, campaign.ctx.pool, history.path, value_column=history.value_column,
                    candidate_column=history.candidate_column)
            # the process reward's success bar, fixed now from what is known before any lab result of this campaign
            known = [p.value for p, _ in imports if isinstance(p, Observed) and p.status == "ok" and p.value is not None]
            bar = fix_success_bar(spec, campaign.ctx.pool, history=known, on_unknown="first_results")
            items: list[tuple] = [(CampaignStarted(name=spec.campaign.name, seed=spec.campaign.seed,
                                                   spec=redact(spec.model_dump(mode="json")),
                                                   pool_rows_skipped=list(campaign.ctx.pool.skipped_rows),
                                                   success_bar=bar.record()), "started")]
            now = datetime.now(UTC)
            items += [(payload, key, "importer", now) for payload, key in imports]
            ledger.append_many(campaign_id, items)  # one transaction: the campaign exists with its history or not at all
        except BaseException:
            campaign.close()  # releases the lease, the checkpointer and a ledger it opened
            raise
        return campaign

    @classmethod
    def resume(cls, campaign_id: str, *, db: str | Path | Ledger, lease: CampaignLease | None = None,
               durability: Durability = "sync", **options: Any) -> Campaign:
        """Re-open a campaign from its ledger; ``run()`` then continues from the last checkpoint.

        Like ``start``, it takes the campaign's lease unless given one, so a campaign another process is running is
        refused with ``CampaignBusy`` before anything is written.

        ``options`` (``lab_budget``, ``seed``, ``planner``, ``lab_url``, ``model``) follow ``resume_policy``: a new
        lab budget is applied and recorded as ``LabBudgetChanged``, a different seed or planner is refused, a
        lab URL or model whose credentials the ledger redacted must be given again, and another model is refused
        unless the recorded one never answered (then it is recorded as ``PlannerModelChanged``). ``durability`` is
        as for ``start``.
        """
        checked_durability(durability)
        ledger, owns = (db, False) if isinstance(db, Ledger) else (Ledger.open(db), True)
        taken = None
        try:
            recorded = recorded_spec(ledger, campaign_id)
            taken = _take_lease(ledger, campaign_id, lease)
            row = ledger.campaign(campaign_id)
            spec, changes = resume_spec(recorded, campaign_id=campaign_id,
                                        n_dispatched=len(ledger.lab_jobs(campaign_id)),
                                        is_stopped=row.status == "stopped",
                                        has_model_answered=model_has_answered(ledger, campaign_id), **options)
            campaign = cls(ledger, campaign_id, spec, owns_ledger=owns, lease=taken, durability=durability)
        except BaseException:
            _give_up(ledger if owns else None, taken)
            raise
        n_events = ledger.n_events(campaign_id)
        keys = {LabBudgetChanged.type: "lab-budget-changed", PlannerModelChanged.type: "planner-model-changed"}
        ledger.append_many(campaign_id, [(change, f"{keys[change.type]}:{n_events}") for change in changes])
        return campaign

    # ------------------------------------------------------------------------------------------------ running
    @property
    def pending_interrupt(self) -> Any | None:
        """The question the graph is waiting on (an approval), or None."""
        snapshot = self.graph.get_state(self.config)
        for task in snapshot.tasks:
            for item in task.interrupts:
                return item.value
        return None

    @property
    def is_finished(self) -> bool:
        return self.ledger.campaign(self.campaign_id).status == "stopped"

    def run(
        self,
        *,
        max_steps: int | None = None,
        approval: Any = None,
        on_step: Callable[[str, dict[str, Any]], None] | None = None,
        summary: bool = True,
        by: str | None = None,
        on_progress: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Run (or continue) the loop until it stops, waits for approval, or ``max_steps`` node runs have passed.

        Args:
            max_steps: stop after this many node executions (the campaign stays resumable).
            approval: the answer to a pending interrupt: to an approval True, False or a list of job keys; to failed
                lab jobs "retry", "skip", "abort" or a mapping of job key to one of them.
            on_step: called with (node name, its state update) after every node.
            on_progress: called with each progress report a node makes while it runs (the graph's ``custom``
                stream; the survey's ``{"type": "survey_progress", "label", "n_done", "n_total", ...}``).
            summary: return the full summary; False returns only ``status()``, which a caller that runs the
                campaign a step at a time (the environment) reads without folding the whole ledger each time.
            by: the name of the person giving ``approval`` (non-empty, printable, at most 64 characters), recorded
                as ``human:NAME`` in ``approved_by`` / ``decided_by`` and as the events' actor; without it, ``human``.

        Raises:
            InvalidApprover: ``by`` is not a valid name (``orchestrator.loop.human_answer``); nothing is recorded.

        Returns:
            The campaign summary (see ``orchestrator.loop.summary.summarise``), or ``status()``.
        """
        done = self.summary if summary else self.status
        checked_name(by)  # a bad name is refused before the graph runs
        if self.is_finished:
            return done()
        self._align_with_ledger()
        if approval is not None:  # resuming an interrupt: the checkpoint's snapshot decides nothing here
            graph_input: Any = Command(resume=resume_value(approval, by=by))
        elif (snapshot := self.graph.get_state(self.config)).next:
            if self.pending_interrupt is not None:
                return done()
            graph_input = None
        elif snapshot.values:
            # A kill between a node's saved writes and the next checkpoint leaves no task "next" in the snapshot;
            # streaming from the checkpoint applies those pending writes and carries on from there.
            graph_input = None
        else:
            graph_input = {"campaign_id": self.campaign_id, "iteration": 0, "is_done": False,
                           "ledger_seq": self.ledger.head_seq(self.campaign_id)}
        n_steps = 0
        modes = ["updates", "custom"] if on_progress is not None else ["updates"]
        for mode, chunk in self._stream(graph_input, self.config, stream_mode=modes,
                                             durability=self.durability):
            if mode == "custom":
                on_progress(chunk)  # type: ignore[misc]  # only streamed when on_progress is given
                continue
            for node, update in chunk.items():
                if node == "__interrupt__":
                    continue
                n_steps += 1
                if on_step is not None:
                    on_step(node, update or {})
            if max_steps is not None and n_steps >= max_steps:
                break
        return done()

    def _stream(self, *args: Any, **kwargs: Any):
        """The graph's stream, ending where a manual lab's jobs wait on a person (``observe`` raised
        ``WaitingForResults`` before writing anything more, so the next ``run`` starts at ``observe`` again)."""
        try:
            yield from self.graph.stream(*args, **kwargs)
        except WaitingForResults:
            return

    # ------------------------------------------------------------------------------------------------ ask/tell
    def suggest(self, n: int | None = None, by: str | None = None) -> pd.DataFrame:
        """The jobs waiting at the bench: ``job``, the candidate's own columns, ``predicted``, ``sd`` (the
        objective's unit). On a manual lab with nothing left to measure it runs the campaign first, which records
        the results entered so far and plans and dispatches the next batch, so ``suggest`` / ``add_results`` /
        ``suggest`` is the whole ask-tell loop (an empty frame: the campaign stopped or waits for approval).

        ``n`` sizes that next batch (at most the lab's free capacity and the budget left; default ``[planner]
        batch_size``), recorded in the ledger as ``BatchRequested`` by ``by`` so a replay plans the same. It applies
        only when a batch is planned here: jobs already at the bench are returned as they are.
        """
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise SetupError(f"suggest(n={n!r}): n is the number of jobs in the next batch, a whole number >= 1")
        jobs = pending_jobs(self.ledger, self.campaign_id)
        if jobs.empty and self.ctx.lab.is_manual and self.status()["status"] != "stopped":
            if n is not None:
                who = actor(by)
                self.ledger.append(self.campaign_id, BatchRequested(n=n, by=who),
                                   key=f"batch-requested:{self.ledger.head_seq(self.campaign_id)}", actor=who)
            self.run()
            jobs = pending_jobs(self.ledger, self.campaign_id)
        return jobs

    def add_results(self, frame: pd.DataFrame | Any, by: str | None = None) -> ResultsReceipt:
        """Enter results by hand (``orchestrator.loop.manual_results.add_results``); ``run`` then records them and
        plans on. Returns what became of each row."""
        return add_results(self.ledger, self.campaign_id, frame, by=by)

    def export_results(self) -> pd.DataFrame:
        """Every lab result so far, as ``closedloop results export`` writes it."""
        return export_results(self.ledger, self.campaign_id)

    def _align_with_ledger(self) -> None:
        """Put the graph where the ledger says it is when the checkpoint disagrees: missing (only the database was
        copied, or the ledger imported elsewhere), behind (a power cut, a kill between a commit and its checkpoint)
        or ahead (an older ledger). The ledger is the truth (``orchestrator.loop.position``)."""
        snapshot = self.graph.get_state(self.config)
        if is_checkpoint_current(self.ledger, self.campaign_id, snapshot.values, tuple(snapshot.next)):
            return
        position = ledger_position(self.ctx)
        self._checkpointer.delete_thread(self.campaign_id)
        if position is not None:  # else no node has written yet: the run starts afresh
            self.graph.update_state(self.config, position.state, as_node=position.as_node)

    def summary(self) -> dict[str, Any]:
        return summarise(self.ledger, self.campaign_id)

    def status(self) -> dict[str, Any]:
        """The campaign's id, ``status`` (``running`` or ``stopped``) and ``stop_reason``: the part of ``summary()``
        that says whether and why it stopped, from one ledger row."""
        row = self.ledger.campaign(self.campaign_id)
        status = row.status
        if status == "running" and self.ctx.lab.is_manual and is_waiting_for_results(self.ledger, self.campaign_id):
            status = "waiting_for_results"
        return {"campaign_id": self.campaign_id, "status": status, "stop_reason": row.stop_reason}

    # ------------------------------------------------------------------------------------------------ closing
    def close_runtime(self) -> None:
        """Close the context and the checkpointer's connection (not the ledger, not the lease)."""
        try:
            self.ctx.close()
        finally:
            if self._connection is not None:
                self._connection.close()

    def close(self) -> None:
        try:
            self.close_runtime()
        finally:
            _give_up(self.ledger if self._owns_ledger else None, self._lease)
            self._lease = None

    def __enter__(self) -> Campaign:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
