"""``CampaignEnvironment``: a campaign spec as an environment, ``reset`` / ``step`` / ``state``.

Each episode is a real campaign (``Campaign.start``: pool, rungs, SimLab, rubric, surrogate, ledger) whose main
arm is the policy (``arm.EnvironmentPlanner``) and which has no control arm. The graph runs until the plan node
asks the policy; a proposal resumes it through validate → screen → approve → dispatch → observe → reward → learn →
decide, on simulated lab time, until the plan node asks again or the campaign stops. Tool calls (run a rung, query
the surrogate, query the ledger) are answered while the graph waits. Every step is recorded as ``EnvironmentStep`` in the ledger
beside the campaign's own events, so an episode replays and exports like any campaign.

Open spaces (``[space] generate = true``): a proposal may also write new structures (SMILES or formulas). Each is
parsed and canonicalised by the domain (rdkit, pymatgen) and checked against the space's limits before the graph
resumes; one that fails is refused with the reason (``InvalidAction``). The valid ones join the pool through the arm
(recorded as ``PoolExtended``) and go through the campaign's own validate → screen → lab path; the simulated lab's
ground truth for them is the spec's ``lab.oracle_simulator``, which ``CampaignSpec`` requires of an open space. The
tools take written structures too (``run_rung`` one, ``query_surrogate`` several), through the same checks: a rung
runs on the new candidate and is charged to the compute budget, the surrogate predicts it from its features, and
neither grows the pool. A closed space refuses structures and says why in ``observation.new_structures``.

Rewards (``rewards.process.shaped_reward``): the episode's potential Φ is the sum of its trajectories' current
rewards under the environment rubric (potential-based process term) divided by the lab budget; a step earns
``Φ(after) − Φ(before)``, an invalid action also loses ``invalid_penalty``, and the last step adds the terminal
outcome (``success.SuccessBar.outcome_reward``; several objectives: the share of the pool's true hypervolume the
episode measured, ``pareto_outcome``). With several objectives the rubric's outcome criteria read a result's
hypervolume improvement (``rewards.hypervolume``), so Φ rises as the front grows; the observation lists every
objective, each result's measured values and the front. Steps that change nothing earn 0, so they cannot be farmed. An
episode truncated before it used its lab budget is charged each unused experiment as an abstained trajectory (−1
over the budget) before the outcome, so doing nothing earns ``EPISODE_FLOOR`` (−2), the least any valid play can
earn: declining to act is never a winning bet.

Example:
    >>> from orchestrator.spec import CampaignSpec
    >>> spec = CampaignSpec.model_validate({
    ...     "campaign": {"name": "demo", "kind": "molecule"}, "objective": {"direction": "maximize"},
    ...     "space": {"inline": ["C", "CC", "CCC", "CCCC"]},
    ...     "lab": {"oracle": {"C": 1, "CC": 2, "CCC": 3, "CCCC": 4}}, "budget": {"lab_experiments": 2},
    ...     "stop": {"threshold": 4.0}})
    >>> env = CampaignEnvironment(spec, n_offer=4)
    >>> obs = env.reset(seed=0, batch_size=1)
    >>> result = env.step({"type": "propose", "candidate_ids": [obs.offer[0].label], "hypothesis": "small"})
    >>> result.observation.budget.lab_experiments_left
    1
    >>> env.close()
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from orchestrator.environment.actions import (
    InvalidAction,
    ProposeAction,
    QueryLedgerAction,
    RunRungAction,
    parse_action,
)
from orchestrator.environment.arm import ARM, EnvironmentPlanner
from orchestrator.environment.observation import (
    Budget,
    EnvironmentObservation,
    FrontView,
    LabResult,
    OfferedCandidate,
    RungResult,
    constraint_views,
    measured_values,
    objective_views,
)
from orchestrator.environment.pareto_outcome import ParetoOutcome, fix_pareto_outcome
from orchestrator.environment.success import SuccessBar, fix_success_bar
from orchestrator.environment.tools import EnvironmentTools
from orchestrator.ledger import LabJobRow
from orchestrator.loop.upcast import records_of
from orchestrator.seeding import derive_rng
from orchestrator.space.pool import describe
from orchestrator.spec import CampaignSpec, load_spec, validate_spec
from vocabulary.domain import SetupError
from vocabulary.events import (
    EnvironmentStep,
    Observed,
    PoolExtended,
    RewardEstimated,
    RewardFinalised,
    Screened,
    Simulated,
)

__all__ = ["EPISODE_FLOOR", "CampaignEnvironment", "EnvironmentState", "StepResult"]

_TASK_KEYS = {"lab_budget", "batch_size", "success_bar", "success_quantile", "rubric", "on_target", "campaign_id",
              "offer"}

EPISODE_FLOOR = -2.0
"""The return of an episode that does nothing: Φ(end) = −1 (every lab experiment an abstention) plus the outcome
without a lab result (−1). No episode of valid actions returns less (Φ ≥ −1, outcome ≥ −1)."""


@dataclass(frozen=True)
class StepResult:
    observation: EnvironmentObservation
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EnvironmentState:
    """Where an episode stands: its campaign in the ledger, its step, potential and return so far."""

    campaign_id: str | None
    step: int
    iteration: int
    potential: float
    episode_return: float
    is_done: bool
    success_bar: SuccessBar | None


class CampaignEnvironment(EnvironmentTools):
    """A campaign spec as an environment.

    Args:
        spec: a ``CampaignSpec`` or the path of a campaign TOML.
        db: the ledger episodes are recorded in (``":memory:"`` by default; a path keeps them for export). It sets
            when the episode's graph saves its checkpoint (``durability``).
        n_offer: candidates on offer per planning step (a seeded sample of the untested pool).
        invalid_penalty: what a refused action costs, on top of its (zero) shaping.
        max_steps: steps before an episode is truncated (default: four per lab experiment, plus 16).
    """

    def __init__(self, spec: CampaignSpec | str | Path, *, db: Any = ":memory:", n_offer: int = 16,
                 invalid_penalty: float = 0.1, max_steps: int | None = None):
        from orchestrator.ledger import Ledger

        self.base_spec = spec if isinstance(spec, CampaignSpec) else load_spec(spec)
        self.ledger = db if isinstance(db, Ledger) else Ledger.open(db)
        self._owns_ledger = not isinstance(db, Ledger)
        self.durability = "exit" if self.ledger.url == "sqlite://" else "sync"
        """LangGraph's durability for the episodes' campaigns: ``"exit"`` over an in-memory ledger, which no one can
        resume after a crash, so a checkpoint is saved only when ``Campaign.run`` returns (at the plan interrupt, which
        is all a step resumes from); ``"sync"`` over a file or PostgreSQL ledger, whose episodes can be resumed."""
        if n_offer < 1:
            raise SetupError(f"{n_offer=} must be at least 1")
        self.n_offer, self.invalid_penalty, self._max_steps = n_offer, float(invalid_penalty), max_steps
        self.campaign = None
        self.bar: SuccessBar | None = None
        self._step = 0
        self._potential = 0.0
        self._return = 0.0
        self._offer: list[OfferedCandidate] = []
        self._fixed_offer: tuple[str, ...] = ()
        self._last: EnvironmentObservation | None = None
        self.spec: CampaignSpec | None = None
        self._outside: dict[str, Any] = {}
        """Candidates outside the pool that tool calls named (written structures), by id."""
        self._tools = None
        self._status: dict[str, Any] = {}
        """The campaign status the last ``Campaign.run`` returned (``Campaign.status``: whether and why it stopped,
        not the full summary): only a proposal moves the campaign."""
        self._read = _EpisodeRead(self._text)
        self._pareto: ParetoOutcome | None = None
        """Several objectives: the terminal reward's scale, fixed at reset (``pareto_outcome``)."""

    # ------------------------------------------------------------------------------------------------ episodes
    def episode_spec(self, seed: int | None, task: dict[str, Any]) -> tuple[CampaignSpec, SuccessBar]:
        """The spec an episode runs (the policy as the only arm, the environment rubric, the fixed bar)."""
        from orchestrator.space.pool import load_pool

        unknown = set(task) - _TASK_KEYS
        if unknown:
            raise SetupError(f"unknown task options {sorted(unknown)}; use {sorted(_TASK_KEYS)}")
        base = self.base_spec
        bar = fix_success_bar(base, load_pool(base), success_bar=task.get("success_bar"),
                              success_quantile=task.get("success_quantile"))
        data = base.model_dump()
        if seed is not None:
            data["campaign"]["seed"] = int(seed)
        if task.get("lab_budget") is not None:
            data["budget"]["lab_experiments"] = int(task["lab_budget"])
        if task.get("batch_size") is not None:
            data["planner"]["batch_size"] = int(task["batch_size"])
        data["planner"].update(main=ARM, control=None, control_share=0.0)
        data["approval"] = {"policy": "auto", "max_auto_jobs": 1000}
        data["rewards"]["rubric"] = task.get("rubric", "environment")
        data["stop"]["on_target"] = bool(task.get("on_target", True))
        if bar.threshold is not None and base.objective.direction != "target" and not base.is_multi_objective:
            data["stop"]["threshold"] = bar.threshold  # several objectives: no one value ends the episode
        if data["lab"]["failure_policy"] == "ask":
            data["lab"]["failure_policy"] = "skip"  # nobody answers a question in an episode
        return validate_spec(data, source="environment task"), bar

    def reset(self, seed: int | None = None, **task: Any) -> EnvironmentObservation:
        """Start an episode: a new campaign in the ledger, run until the policy is asked to plan.

        ``task`` may set ``lab_budget``, ``batch_size``, ``success_bar``, ``success_quantile``, ``rubric``,
        ``on_target``, ``campaign_id`` and ``offer`` (pool ids offered, in that order, instead of a seeded sample,
        while they are untested: how an exported prompt's offer is put back in front of a policy).
        """
        from orchestrator.loop.campaign import Campaign

        self._close_campaign()
        self.spec, self.bar = self.episode_spec(seed, task)
        if self.spec.is_multi_objective:
            from orchestrator.space.pool import load_pool

            self._pareto = fix_pareto_outcome(self.spec, load_pool(self.spec))
        else:
            self._pareto = None
        self._fixed_offer = tuple(self._checked_offer(task.get("offer")))
        campaign_id = task.get("campaign_id") or f"env-{self.spec.campaign.name}-{uuid.uuid4().hex[:8]}"
        self.campaign = Campaign.start(self.spec, db=self.ledger, campaign_id=campaign_id, durability=self.durability)
        self._step, self._potential, self._return = 0, 0.0, 0.0
        self._read = _EpisodeRead(self._text, self.spec.objective.property)
        self._outside, self._tools = {}, None
        self._status = self.campaign.run(summary=False)
        self._potential = self._episode_potential()
        self._last = self._observe()
        return self._last

    def step(self, action: Any) -> StepResult:
        """Carry out one action; a refused one returns the same situation with ``error`` set and a penalty."""
        if self.campaign is None:
            raise SetupError("call reset() before step()")
        if self._last is not None and self._last.is_done:
            raise SetupError("the episode has ended; call reset() to start another")
        error, tool_result, parsed = None, None, None
        try:
            parsed = parse_action(action)
            if isinstance(parsed, ProposeAction):
                self._propose(parsed)
            elif isinstance(parsed, RunRungAction):
                tool_result = self._run_rung(parsed)
            elif isinstance(parsed, QueryLedgerAction):
                tool_result = self._query_ledger(parsed)
            else:
                tool_result = self._query_surrogate(parsed)
        except InvalidAction as exc:
            error = str(exc)
        before = self._potential
        self._potential = self._episode_potential()
        from rewards.process import shaped_reward

        reward = shaped_reward(before, self._potential) - (self.invalid_penalty if error else 0.0)
        observation = self._observe(tool_result=tool_result, error=error)
        terminated = observation.is_done
        truncated = not terminated and self._step + 1 >= self.max_steps
        info: dict[str, Any] = {"campaign_id": self.campaign.campaign_id, "is_valid": error is None,
                                "potential": self._potential}
        if truncated:
            # the experiments left unused count as abstained trajectories (−1 each over the budget), so stalling
            # until the step limit cannot beat using the lab
            unused = -observation.budget.lab_experiments_left / observation.budget.lab_experiments
            reward += unused
            info["unused_budget_reward"] = unused
        if terminated or truncated:
            outcome = self._outcome_reward()
            reward += outcome
            info["outcome_reward"] = outcome
        self._record(parsed, action, error, reward, terminated or truncated)
        self._step += 1
        self._return += reward
        self._last = observation.model_copy(update={"step": self._step})
        info["episode_return"] = self._return
        return StepResult(self._last, float(reward), terminated, truncated, info)

    @property
    def state(self) -> EnvironmentState:
        ctx = self.campaign.ctx if self.campaign else None
        return EnvironmentState(
            campaign_id=self.campaign.campaign_id if self.campaign else None, step=self._step,
            iteration=self._iteration() if ctx else 0, potential=self._potential, episode_return=self._return,
            is_done=bool(self._last and self._last.is_done), success_bar=self.bar)

    @property
    def max_steps(self) -> int:
        if self._max_steps is not None:
            return self._max_steps
        return 4 * (self.spec.budget.lab_experiments if self.spec else 1) + 16

    @property
    def observation(self) -> EnvironmentObservation | None:
        return self._last

    # ------------------------------------------------------------------------------------------------ actions
    @property
    def _arm(self) -> EnvironmentPlanner:
        return self.campaign.ctx.planners[ARM]

    def _resolve(self, ref: str, *, offer_only: bool) -> str:
        """A pool id from an offer label or a pool id; ``InvalidAction`` naming the fix."""
        by_label = {c.label: c.candidate_id for c in self._offer}
        if ref in by_label:
            return by_label[ref]
        if ref in {c.candidate_id for c in self._offer}:
            return ref
        if not offer_only and ref in self.campaign.ctx.pool.index:
            return ref
        labels = f"{self._offer[0].label}..{self._offer[-1].label}" if self._offer else "none: nothing is on offer"
        where = "on offer" if offer_only else "on offer or in the pool"
        raise InvalidAction(f"{ref!r} is not {where}; name an offer label ({labels}) or the pool id of one")

    def _propose(self, action: ProposeAction) -> None:
        # the last observation's count: nothing but this episode's own actions moves the campaign between steps,
        # and reading the graph's pending interrupt again costs a checkpoint read
        n = self._last.n_to_propose if self._last is not None else 0
        if n == 0:
            raise InvalidAction("no lab slot is open now; wait is not an action: the episode only asks when one is")
        ids = [self._resolve(ref, offer_only=True) for ref in action.candidate_ids]
        new_candidates = []
        for text in action.structures:
            candidate, is_new = self._structure(text)
            ids.append(candidate.id)
            if is_new:
                new_candidates.append(candidate)
        if len(set(ids)) != len(ids):
            named = [*action.candidate_ids, *action.structures]
            raise InvalidAction(f"the proposal names a candidate twice ({named}); name each once")
        if len(ids) > n:
            raise InvalidAction(f"{len(ids)} candidates proposed for {n} open lab slot(s); propose at most {n}")
        answer = {"candidate_ids": ids, "hypothesis": action.hypothesis, "rationale": action.rationale,
                  "expected": action.expected,
                  "new_candidates": [c.model_dump(mode="json") for c in new_candidates]}
        if self.spec.space.generate:
            self._forget_unrecorded_growth()
        self._status = self.campaign.run(approval=answer, summary=False)

    def _forget_unrecorded_growth(self) -> None:
        """Drop the pool's candidates that no ``PoolExtended`` records yet, before the graph resumes.

        The plan node grew an open space (its mutations) before it paused for the policy, but records the growth
        only when it finishes; resuming re-runs it, and it must grow the same pool again (the same edits of the same
        parents) rather than edits of the unrecorded ones, or the pool in memory and the one the ledger rebuilds on
        a resume would differ."""
        pool = self.campaign.ctx.pool
        # the episode's read is current: it ran after the campaign last moved, and only a proposal moves it
        pool.truncate((pool.seed_size or 0) + self._read.n_pool_extended)

    # ------------------------------------------------------------------------------------------------ reading
    def _text(self, candidate_id: str) -> str:
        """A candidate's SMILES, formula or conditions, in the pool or written by a tool call."""
        pool = self.campaign.ctx.pool
        if candidate_id in pool.index:
            return describe(pool.get(candidate_id))
        return describe(self._outside[candidate_id]) if candidate_id in self._outside else candidate_id

    def _iteration(self) -> int:
        arm = self._arm
        if arm.context is not None:
            return arm.context.iteration
        return 0

    def _checked_offer(self, offer: Any) -> list[str]:
        """The task's fixed offer as pool ids; ``SetupError`` naming what is not in the pool."""
        if offer is None:
            return []
        from orchestrator.space.pool import load_pool

        ids = [str(cid) for cid in ([offer] if isinstance(offer, str) else offer)]
        pool = load_pool(self.spec)
        missing = [cid for cid in ids if cid not in pool.index]
        if missing or not ids:
            raise SetupError(f"task offer {missing or ids} names no candidate of the pool; give pool ids (as the "
                             "trl-grpo export's env_task column does)")
        return list(dict.fromkeys(ids))[: self.n_offer]

    def _make_offer(self, is_asking: bool) -> list[OfferedCandidate]:
        context = self._arm.context
        if context is None or not is_asking:
            return []
        available = np.asarray(context.available, dtype=int)
        if self._fixed_offer:
            untested = {context.pool.ids[int(i)] for i in available}
            ids = [cid for cid in self._fixed_offer if cid in untested]
        else:
            rng = derive_rng(self.spec.campaign.seed, context.iteration, "environment-offer")
            rows = rng.choice(available, size=min(self.n_offer, len(available)), replace=False) if len(available) else []
            ids = [context.pool.ids[int(i)] for i in rows]
        predictions = self._predict([context.pool.get(cid) for cid in ids]) or [(None, None)] * len(ids)
        width = max(2, len(str(self.n_offer - 1)))
        return [OfferedCandidate(label=f"o{k:0{width}d}", candidate_id=cid, text=describe(context.pool.get(cid)),
                                 mean=m, sd=s) for k, (cid, (m, s)) in enumerate(zip(ids, predictions, strict=True))]

    def _observe(self, *, tool_result: dict | None = None, error: str | None = None) -> EnvironmentObservation:
        ctx, spec = self.campaign.ctx, self.spec
        # only Campaign.run moves the campaign, and it returns its status: no ledger or checkpoint read here
        is_done = self._status.get("status") == "stopped"
        is_asking = not is_done and self._arm.is_waiting
        if tool_result is None and error is None or not self._offer:
            self._offer = self._make_offer(is_asking)
        read = self._read  # brought up to date by the potential, read just before every observation
        bar = self.bar.threshold if self.bar is not None and self.bar.is_visible else None
        objective, objectives = objective_views(spec, bar)
        return EnvironmentObservation(
            campaign_id=ctx.campaign_id, step=self._step, iteration=self._iteration(),
            objective=objective, objectives=objectives,
            tradeoff=spec.tradeoff_method if spec.is_multi_objective else None,
            constraints=constraint_views(spec), front=self._front_view(),
            offer=() if is_done else tuple(self._offer), new_structures=self._new_structures(),
            n_to_propose=self._arm.n if is_asking else 0,
            rungs=tuple(r.name for r in ctx.rungs), rung_results=tuple(read.rung_results),
            lab_results=tuple(read.lab_results),
            budget=Budget(lab_experiments=spec.budget.lab_experiments,
                          lab_experiments_left=max(spec.budget.lab_experiments - read.n_jobs, 0),
                          n_pending=len(read.pending), compute_s_used=read.compute_s),
            tool_result=tool_result, error=error, is_done=is_done,
            stop_reason=self._status.get("stop_reason") if is_done else None)

    def _front_view(self) -> FrontView | None:
        """Several objectives: the measured front (``orchestrator.loop.front``); None for one or before a result."""
        if not self.spec.is_multi_objective:
            return None
        from orchestrator.loop.front import campaign_front
        from orchestrator.loop.history import lab_history

        front = campaign_front(self.spec, lab_history(self.campaign.ctx))
        if front is None:
            return None
        return FrontView(candidate_ids=tuple(p.candidate_id for p in front.points), hypervolume=front.hypervolume,
                         reference_point=tuple(front.reference_point), reference_inferred=front.reference_inferred)

    def _episode_potential(self) -> float:
        """Φ: the sum of the episode's trajectories' current rewards over the lab budget."""
        return sum(self._read.update(self.campaign.ctx).rewards.values()) / self.spec.budget.lab_experiments

    def _outcome_reward(self) -> float:
        from orchestrator.loop.history import lab_history

        history = lab_history(self.campaign.ctx)
        if self._pareto is not None:
            return self._pareto.reward(self.spec, history.measured)
        best = history.best
        objective = self.spec.objective
        is_success = any(objective.is_hit(r[2], self.spec.stop.threshold) for r in history.results)
        return self.bar.outcome_reward(best[3] if best else None, is_success)

    def _record(self, parsed, raw, error: str | None, reward: float, is_terminal: bool) -> None:
        ctx = self.campaign.ctx
        action = parsed.model_dump(mode="json") if parsed is not None else {"raw": str(raw)[:2000]}
        ctx.ledger.append(ctx.campaign_id, EnvironmentStep(
            step=self._step, iteration=self._iteration(), action=action, is_valid=error is None, error=error,
            reward=float(reward), potential=self._potential, is_terminal=is_terminal),
            key=f"env-step:{self._step}", actor=f"policy:{ARM}")

    # ------------------------------------------------------------------------------------------------ closing
    def _close_campaign(self) -> None:
        if self.campaign is not None:
            self.campaign.close()
            self.campaign = None

    def close(self) -> None:
        self._close_campaign()
        if self._owns_ledger:
            self.ledger.close()


class _EpisodeRead:
    """What observations and the potential read from the episode's ledger, kept up to date event by event (each
    step reads only the events appended since the last), rather than rebuilt from every event at every step."""

    def __init__(self, text, first_property: str = "value"):
        self.text = text
        """candidate id -> its SMILES, formula or conditions."""
        self.first_property = first_property
        """The first objective's property (a lab result's ``values`` lead with it)."""
        self.seq = 0
        self.lab_results: list[LabResult] = []
        self.rung_results: list[RungResult] = []
        self.compute_s = 0.0
        self.rewards: dict[str, float] = {}
        """trajectory -> its current reward, for the policy's arm."""
        self.n_pool_extended = 0
        """Candidates the ledger's ``PoolExtended`` events added to the pool (open spaces)."""
        self.n_jobs = 0
        """Lab jobs dispatched (whatever became of them), from the lab-job rows that changed since the last update
        (``Ledger.changed_rows``)."""
        self.pending: set[str] = set()
        """Job keys dispatched and not yet observed."""
        self.job_seq = 0

    def update(self, ctx) -> _EpisodeRead:
        types = [Observed.type, Simulated.type, Screened.type, RewardEstimated.type, RewardFinalised.type,
                 PoolExtended.type]
        # one uncached read of what is new (``read_events``): folded here, so the ledger need not keep every rung
        # result of the episode in its typed read cache
        for e in ctx.ledger.read_events(ctx.campaign_id, types, after_seq=self.seq):
            p = e.payload
            if e.type == Observed.type:
                self.lab_results.append(LabResult(
                    candidate_id=p["candidate_id"], text=self.text(p["candidate_id"]), status=p["status"],
                    value=p["value"] if p["status"] == "ok" else None,
                    values=measured_values(self.first_property, p)))
            elif e.type in (Simulated.type, Screened.type):
                for p in (p for kind, p in records_of(e.type, p) if kind == Simulated.type):
                    o = p["observation"]
                    self.compute_s += float(o.get("cost_s") or 0.0)
                    self.rung_results.append(RungResult(
                        candidate_id=p["candidate_id"], text=self.text(p["candidate_id"]), rung=p["rung"],
                        status=o["status"], properties={k: float(v) for k, v in o.get("properties", {}).items()}))
            elif e.type == PoolExtended.type:
                self.n_pool_extended += len(p["candidates"])
            elif p.get("arm") == ARM:
                self.rewards[p["subject"]] = float(p["reward"])
            self.seq = max(self.seq, e.seq)
        seen_seq = self.job_seq
        for job in ctx.ledger.changed_rows(LabJobRow, ctx.campaign_id, seen_seq):
            self.n_jobs += job.dispatched_seq > seen_seq  # new: dispatched after the last update
            (self.pending.add if job.status == "dispatched" else self.pending.discard)(job.job_key)
            self.job_seq = max(self.job_seq, job.updated_seq)
        return self
