"""Campaigns driven in background threads, for a server that must keep answering while they run (``closedloop mcp``).

A run opens its campaign exactly as ``closedloop run`` does (``Campaign.start`` or ``Campaign.resume``, which take the
campaign's lease, so a campaign another process drives is refused) and drives it with ``Campaign.run`` in a daemon
thread until the campaign stops, waits for a human, or is asked to stop.

- **Approval** takes the CLI's path, not a copy of it: like ``closedloop run --resume ID --approve ...``, the campaign
  is resumed and ``run(approval=answer)`` re-enters the graph's approve node, which records ``Approved`` (and a
  ``Rejected`` per denied job). The spec's policy decides, as it does for the CLI, whether there is anything to
  answer: a batch the policy approved never waits, and only the job keys the graph asked about can be approved.
- **Failed lab jobs** under ``failure_policy = "ask"`` are answered the same way (``decide``), like the CLI's
  retry/skip/abort prompt: ``run(approval=decision)`` re-enters the graph's recover node, which records one
  ``FailureHandled`` per job. Only a graph that waits for that decision can get one, and only about the jobs it names.
- **Stopping** is cooperative: the run finishes the node it is in and lets go of the campaign. The checkpoint is
  saved after every node, so the ledger stays consistent, and ``resume`` continues from where it stopped.

Example:
    >>> import pathlib, tempfile
    >>> from orchestrator.spec import CampaignSpec
    >>> spec = CampaignSpec.model_validate({
    ...     "campaign": {"name": "demo", "kind": "molecule", "seed": 1},
    ...     "objective": {"direction": "maximize"},
    ...     "space": {"inline": ["C", "CC", "CCC", "CCCC"]},
    ...     "lab": {"oracle": {"C": 1, "CC": 2, "CCC": 3, "CCCC": 4}},
    ...     "budget": {"lab_experiments": 2}, "planner": {"main": "random", "control": None, "control_share": 0},
    ... })
    >>> runs = BackgroundRuns(pathlib.Path(tempfile.mkdtemp()) / "bg.db")
    >>> run = runs.start(spec, campaign_id="bg")
    >>> run.join(timeout_s=60).state
    'finished'
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from vocabulary.domain import ClosedLoopError, SetupError

if TYPE_CHECKING:
    from orchestrator.ledger import Ledger
    from orchestrator.loop.campaign import Campaign
    from orchestrator.spec import CampaignSpec

__all__ = [
    "FAILURE_ACTIONS",
    "BackgroundRun",
    "BackgroundRuns",
    "FailureAction",
    "NotAwaitingApproval",
    "NotAwaitingDecision",
    "RunState",
    "check_approval",
    "check_decision",
    "pending_approval",
    "pending_failure_decision",
]

log = logging.getLogger(__name__)

RunState = Literal["starting", "running", "stopping", "paused", "waiting_for_approval", "awaiting_decision", "finished",
                   "failed"]
"""Where a background run is. ``paused``: stopped on request (or its stream ended) and resumable; ``waiting_for_approval``:
the approve node waits for an answer; ``awaiting_decision``: failed lab jobs wait for a human (retry/skip/abort);
``finished``: the campaign stopped (budget, target or criterion); ``failed``: an error ended the run."""

_ACTIVE: frozenset[str] = frozenset({"starting", "running", "stopping"})

FailureAction = Literal["retry", "skip", "abort"]
"""What a human may decide about a failed lab job (the recover node's actions)."""
FAILURE_ACTIONS: tuple[str, ...] = ("retry", "skip", "abort")


class NotAwaitingApproval(SetupError):
    """An approval was given to a campaign whose graph is not waiting for one."""


class NotAwaitingDecision(SetupError):
    """A retry/skip/abort decision was given to a campaign whose graph is not waiting for one."""


class _StopRequested(Exception):
    """Raised from the step callback to leave ``Campaign.run`` between two nodes (as its ``max_steps`` does)."""


@dataclass
class BackgroundRun:
    """One campaign driven in a thread of this process. The fields are read by other threads; only the run writes."""

    campaign_id: str
    state: RunState = "starting"
    error: str | None = None
    """Why a ``failed`` run failed."""
    question: dict[str, Any] | None = None
    """The graph's pending question (``job_keys`` and ``candidates`` for an approval) when the run waits for one."""
    n_steps: int = 0
    """Graph nodes run by this run."""
    last_node: str | None = None
    _thread: threading.Thread | None = field(default=None, repr=False)
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _ready: threading.Event = field(default_factory=threading.Event, repr=False)
    _open_error: BaseException | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def is_active(self) -> bool:
        return self.state in _ACTIVE

    def as_dict(self) -> dict[str, Any]:
        return {"state": self.state, "error": self.error, "question": self.question, "n_steps": self.n_steps,
                "last_node": self.last_node}

    def join(self, timeout_s: float | None = None) -> BackgroundRun:
        """Wait up to ``timeout_s`` for the thread to end (the run may still be active after a timeout)."""
        if self._thread is not None:
            self._thread.join(timeout_s)
        return self

    def _on_step(self, node: str, _update: dict[str, Any]) -> None:
        self.n_steps += 1
        self.last_node = node
        self._ready.set()
        if self._stop.is_set():
            raise _StopRequested

    def _drive(self, open_campaign: Callable[[], Campaign], approval: Any,
               check: Callable[[Campaign, Any], None] | None = None, by: str | None = None) -> None:
        try:
            campaign = open_campaign()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller, who waits on _ready
            self._open_error = exc
            self._ready.set()
            return
        try:
            with campaign:
                if approval is not None and check is not None:
                    check(campaign, approval)  # before anything is written, like the lease
                with self._lock:
                    if self.state == "starting":
                        self.state = "running"
                if approval is None:
                    self._ready.set()  # with an answer, the caller waits for the approve node (the first step)
                try:
                    campaign.run(approval=approval, on_step=self._on_step, by=by)
                except _StopRequested:
                    pass
                settled = self._settled(campaign)
            # published once the campaign is closed and its lease released: an answer sent as soon as the state
            # says the run waits must find the campaign free to resume
            with self._lock:
                self.state, question = settled
                if question is not None:
                    self.question = question
        except BaseException as exc:
            if not self._ready.is_set():
                self._open_error = exc
            else:
                with self._lock:
                    self.state, self.error = "failed", str(exc) or type(exc).__name__
                if not isinstance(exc, ClosedLoopError):
                    log.exception("background run of campaign %s failed", self.campaign_id)
        finally:
            self._ready.set()

    @staticmethod
    def _settled(campaign: Campaign) -> tuple[RunState, dict[str, Any] | None]:
        """The state the run ends in and the question it waits on, from the campaign itself (a stop requested
        meanwhile does not hide it)."""
        if campaign.is_finished:
            return "finished", None
        question = campaign.pending_interrupt
        if question is not None:
            return ("waiting_for_approval" if "job_keys" in question else "awaiting_decision"), question
        return "paused", None

    def _request_stop(self) -> bool:
        """Ask an active run to stop after its current node; False if it was not active."""
        with self._lock:
            if not self.is_active:
                return False
            self._stop.set()
            self.state = "stopping"
            return True


def check_approval(campaign: Campaign, approval: Any) -> None:
    """Refuse an answer the campaign's graph did not ask for: no pending approval, or job keys it did not name (to
    approve, or in ``reasons``); ``approval`` is plain or wrapped with reasons (``loop.human_answer``)."""
    from orchestrator.loop.human_answer import denial_reasons, plain_answer

    wrapped, approval = approval, plain_answer(approval)
    question = campaign.pending_interrupt
    if question is None or "job_keys" not in question:
        what = "is not waiting for an approval" if question is None else "waits for a decision on failed lab jobs"
        raise NotAwaitingApproval(f"campaign {campaign.campaign_id!r} {what}; there is no lab batch to approve "
                                  f"(the spec's approval policy is {campaign.spec.approval.policy!r})")
    if isinstance(approval, list):
        unknown = [k for k in approval if k not in set(question["job_keys"])]
        if unknown:
            raise NotAwaitingApproval(f"job keys {unknown} are not in the pending batch of campaign "
                                      f"{campaign.campaign_id!r}; approve some of {question['job_keys']}")
    reasons = wrapped.get("reasons") if isinstance(wrapped, dict) else None
    unknown = [k for k in (reasons or {}) if k not in set(question["job_keys"])]
    if unknown:
        raise NotAwaitingApproval(f"reasons given for job keys {unknown}, which are not in the pending batch of "
                                  f"campaign {campaign.campaign_id!r}; give reasons for some of {question['job_keys']}")
    denial_reasons(wrapped, list(question["job_keys"]))  # a reason that is not one printable line is refused here


def check_decision(campaign: Campaign, decision: str | dict[str, str]) -> None:
    """Refuse a decision the campaign's graph did not ask for: no failed jobs waiting, an action other than retry,
    skip or abort, or job keys it did not name (the recover node would silently skip unknown actions and keys)."""
    question = campaign.pending_interrupt
    if question is None or "failures" not in question:
        what = "is not waiting for a decision" if question is None else "waits for an approval of a lab batch"
        raise NotAwaitingDecision(
            f"campaign {campaign.campaign_id!r} {what}; there are no failed lab jobs to decide on (the spec's "
            f"failure policy is {campaign.spec.lab.failure_policy!r}; only 'ask' leaves the decision to a human)")
    actions = [decision] if isinstance(decision, str) else list(decision.values())
    bad = [a for a in actions if a not in FAILURE_ACTIONS]
    if bad or not actions:
        raise NotAwaitingDecision(f"decide {list(FAILURE_ACTIONS)} for failed lab jobs, not {bad or actions}")
    if isinstance(decision, dict):
        waiting = [f["job_key"] for f in question["failures"]]
        unknown = [k for k in decision if k not in set(waiting)]
        if unknown:
            raise NotAwaitingDecision(f"job keys {unknown} are not among the failed jobs campaign "
                                      f"{campaign.campaign_id!r} waits on; decide on some of {waiting}")


def pending_approval(ledger: Ledger, campaign_id: str) -> dict[str, Any] | None:
    """The lab batch a campaign last asked approval for and has no answer to, from its ledger alone (or None).

    While a campaign runs this can name a batch for the moment between ``ApprovalRequested`` and the policy's
    ``Approved``; the graph's own checkpoint, which ``approve`` consults, is the authority.
    """
    requested = ledger.last_event(campaign_id, "ApprovalRequested")
    if requested is None:
        return None
    iteration = requested.payload["iteration"]
    if ledger.iteration_events(campaign_id, "Approved", iteration):
        return None
    from types import SimpleNamespace

    from orchestrator.loop.jobs import parse_job_key
    from orchestrator.loop.predictions import predictions

    keys = requested.payload["job_keys"]
    candidate_ids = [parse_job_key(campaign_id, k)[0] for k in keys]
    predicted = predictions(SimpleNamespace(ledger=ledger, campaign_id=campaign_id), candidate_ids)
    return {"iteration": iteration, "job_keys": keys, "policy": requested.payload["policy"],
            "requested_seq": requested.seq,
            "predictions": [{"job_key": k, "predicted": predicted[cid].mean, "sd": predicted[cid].sd}
                            for k, cid in zip(keys, candidate_ids, strict=True)]}


def pending_failure_decision(ledger: Ledger, campaign_id: str) -> dict[str, Any] | None:
    """The failed lab jobs of a campaign under ``failure_policy = "ask"`` that no ``FailureHandled`` answers yet, from
    its ledger alone (or None).

    As with ``pending_approval``, a running campaign's recover node may be about to ask; the graph's checkpoint, which
    ``decide`` consults, is the authority.
    """
    from orchestrator.loop.resume_policy import recorded_spec

    if recorded_spec(ledger, campaign_id).lab.failure_policy != "ask":
        return None
    handled = {e.payload["job_key"] for e in ledger.events(campaign_id, types=["FailureHandled"])}
    failed = [j for j in ledger.lab_jobs(campaign_id) if j.status == "failed" and j.job_key not in handled]
    if not failed:
        return None
    observed = {e.payload["job_key"]: e.payload for e in ledger.events_at(campaign_id, [j.observed_seq for j in failed])}
    return {"failures": [{"job_key": j.job_key, "candidate_id": j.candidate_id,
                          "reason": observed.get(j.job_key, {}).get("reason")} for j in failed]}


class BackgroundRuns:
    """The background runs of one ledger (a path or URL, or an open ``Ledger``), one at most per campaign, keyed by
    campaign id.

    ``start``, ``resume`` and ``approve`` return once the campaign is open (and, for ``approve``, once the approve node
    has recorded the answer), or raise what opening it raised (``SetupError``, ``CampaignBusy``, ...).
    """

    def __init__(self, db: str | Path | Ledger, *, open_timeout_s: float = 600.0):
        # A server passes its one Ledger: opening the file again in this process while a connection to it is open
        # would run the ledger's file check, whose plain open()/close() of the file drops every POSIX lock this
        # process holds on it, and another process closing its connection could then delete the WAL under ours.
        self.db = db if not isinstance(db, str | Path) else str(db)
        self.open_timeout_s = open_timeout_s
        self._runs: dict[str, BackgroundRun] = {}
        self._lock = threading.Lock()

    def get(self, campaign_id: str) -> BackgroundRun | None:
        return self._runs.get(campaign_id)

    def all(self) -> list[BackgroundRun]:
        return list(self._runs.values())

    def start(self, spec: CampaignSpec, *, campaign_id: str | None = None) -> BackgroundRun:
        """Start a new campaign of ``spec`` (recording ``CampaignStarted``) and drive it in the background."""
        from orchestrator.loop.campaign import Campaign

        campaign_id = campaign_id or f"{spec.campaign.name}-{uuid.uuid4().hex[:8]}"  # Campaign.start's own form
        return self._launch(campaign_id, lambda: Campaign.start(spec, db=self.db, campaign_id=campaign_id))

    def resume(self, campaign_id: str, *, lab_budget: int | None = None) -> BackgroundRun:
        """Continue a campaign from its last checkpoint (``resume_policy`` applies a new lab budget and records it)."""
        from orchestrator.loop.campaign import Campaign

        return self._launch(campaign_id, lambda: Campaign.resume(campaign_id, db=self.db, lab_budget=lab_budget))

    def approve(self, campaign_id: str, approval: Any, *, by: str | None = None) -> BackgroundRun:
        """Answer a pending approval (True: all, False: none, or the job keys to approve; or any of these wrapped as
        ``{"answer": ..., "reasons": {job_key: why}, "reason": why}``) and keep driving.

        ``by`` names who answered (recorded as ``human:NAME``; ``human`` without it); a name that is not valid is
        refused (``InvalidApprover``) before the campaign is opened.
        """
        from orchestrator.loop.campaign import Campaign
        from orchestrator.loop.human_answer import checked_name

        if approval is None or (isinstance(approval, dict) and approval.get("answer") is None):
            raise ValueError("give True, False or a list of job keys")
        by = checked_name(by)
        return self._launch(campaign_id, lambda: Campaign.resume(campaign_id, db=self.db), approval=approval,
                            check=check_approval, by=by)

    def decide(self, campaign_id: str, decision: FailureAction | dict[str, FailureAction], *,
               by: str | None = None) -> BackgroundRun:
        """Answer failed lab jobs the campaign waits on (one action for all, or job key -> action) and keep driving;
        returns once the recover node has recorded the ``FailureHandled`` events. ``by`` is as for ``approve``."""
        from orchestrator.loop.campaign import Campaign
        from orchestrator.loop.human_answer import checked_name

        if not decision:
            raise ValueError("give retry, skip, abort or a mapping of job key to one of them")
        by = checked_name(by)
        return self._launch(campaign_id, lambda: Campaign.resume(campaign_id, db=self.db), approval=decision,
                            check=check_decision, by=by)

    def stop(self, campaign_id: str, *, timeout_s: float = 120.0) -> BackgroundRun:
        """Ask a run to stop after the node it is in, and wait up to ``timeout_s`` for it to let go of the campaign."""
        run = self._runs.get(campaign_id)
        if run is None:
            raise SetupError(f"campaign {campaign_id!r} is not running in this server; nothing to stop")
        if run._request_stop():
            run.join(timeout_s)
        return run

    def stop_all(self, *, timeout_s: float = 120.0) -> None:
        """Stop every active run (a server shutting down)."""
        active = [run for run in self.all() if run._request_stop()]
        for run in active:
            run.join(timeout_s)

    def _launch(self, campaign_id: str, open_campaign: Callable[[], Campaign], approval: Any = None,
                check: Callable[[Campaign, Any], None] | None = None, by: str | None = None) -> BackgroundRun:
        with self._lock:
            current = self._runs.get(campaign_id)
            if current is not None and current.is_active:
                raise SetupError(f"campaign {campaign_id!r} is already running in this server ({current.state}); "
                                 f"poll its status, or stop it first")
            run = BackgroundRun(campaign_id)
            run._thread = threading.Thread(target=run._drive, args=(open_campaign, approval, check, by),
                                           name=f"closedloop-{campaign_id}", daemon=True)
            self._runs[campaign_id] = run
        run._thread.start()
        run._ready.wait(self.open_timeout_s)
        if run._open_error is not None:
            with self._lock:
                if self._runs.get(campaign_id) is run:
                    del self._runs[campaign_id]
                    if current is not None:
                        self._runs[campaign_id] = current
            raise run._open_error
        return run
