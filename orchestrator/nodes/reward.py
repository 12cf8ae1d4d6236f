"""reward: follow every proposal as a trajectory and score it with the rubric and the process reward.

A trajectory is one proposal followed along the ladder (proposal → screen → dispatch → outcome); a lab slot an arm
left empty is a one-step ``plan`` trajectory. Everything is a fold over the ledger *as of* an iteration (events
whose iteration, or observe iteration, is at most it), so ``rewards recompute`` gets exactly what the node stored.

Each iteration the node writes, for every trajectory not yet final: a ``Scored`` event per criterion and step when
it is new or differs from the stored one, and a ``RewardEstimated`` (provisional) or ``RewardFinalised`` (final)
record, carrying each step's potentials, progress and reward (see ``rewards.process``), when it changed. A new
record points at the one it supersedes (``supersedes_seq``); nothing stored is ever changed. A trajectory is final once the
lab has answered it (and no retry is pending) or it ended before the lab (rejected, failed a rung, held). Each proxy
rung's validity against the lab is re-estimated every iteration and recorded as ``RungValidated``.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..context import CampaignContext
from ..escalation import calibrate_rung
from ..events import (
    Event,
    LLMCall,
    RewardEstimated,
    RewardFinalised,
    RungValidated,
    Scored,
    SlotsOffered,
)
from ..jobs import parse_job_key
from ..spec import CampaignSpec
from ..state import CampaignState

__all__ = ["LedgerView", "outlook", "recompute_rewards", "reward", "reward_records", "scored_iterations", "step_summary",
           "stored_rewards", "superseding_records", "trajectories", "trajectory_rewards", "recorded_judge_answers",
           "judge_call_records"]


def _install_judge_loader() -> None:
    from rewards import judge

    def load(name: str):
        from ..planners.llm_models import load_chat_model

        return load_chat_model(None if name == "embedded" else name, temperature=0.0, max_tokens=256)

    judge.set_model_loader(load)


# ------------------------------------------------------------------------------------------------ the fold
@dataclass
class LedgerView:
    """The ledger's events of one campaign as they stood when the reward node of ``iteration`` ran."""

    spec: CampaignSpec
    iteration: int
    events: list[Event]
    by_type: dict[str, list[Event]] = field(default_factory=dict)

    @classmethod
    def as_of(cls, spec: CampaignSpec, events: list[Event], iteration: int) -> LedgerView:
        kept = [e for e in events if _iteration_of(e) is None or _iteration_of(e) <= iteration]
        by_type: dict[str, list[Event]] = defaultdict(list)
        for event in kept:
            by_type[event.type].append(event)
        return cls(spec, iteration, kept, by_type)

    def of(self, event_type: str) -> list[Event]:
        return self.by_type.get(event_type, [])


def _iteration_of(event: Event) -> int | None:
    p = event.payload
    if event.type == "Observed":
        return p["observe_iteration"] if p.get("observe_iteration") is not None else p.get("iteration")
    return p.get("iteration")


@dataclass
class _Outlook:
    """What the lab has said so far: the success bar (utility), the base rate and each proxy rung's validity."""

    threshold: float | None
    base_rate: float
    validities: dict[str, Any]
    utilities: list[float]


def _success_threshold(spec: CampaignSpec, utilities: list[float]) -> float | None:
    """Lab utility counted as a success: the target window, the stop threshold, else the median result so far."""
    objective = spec.objective
    if objective.direction == "target":
        return -float(objective.tolerance)
    if spec.stop.threshold is not None:
        return objective.utility(spec.stop.threshold)
    return statistics.median(utilities) if utilities else None


def _proxy_values(view: LedgerView) -> dict[str, dict[str, float]]:
    """rung -> candidate -> first successful proxy value (objective unit), as ``beliefs.proxy_values``."""
    proxies = {r.name: r.proxy for r in view.spec.ladder if r.proxy}
    out: dict[str, dict[str, float]] = {rung: {} for rung in proxies}
    for event in view.of("Simulated"):
        p = event.payload
        prop = proxies.get(p["rung"])
        if prop and p["observation"]["status"] == "ok" and prop in p["observation"]["properties"]:
            out[p["rung"]].setdefault(p["candidate_id"], p["observation"]["properties"][prop])
    return out


def _lab_results(view: LedgerView) -> list[tuple[str, float]]:
    """(candidate id, lab utility) of successful lab results, in ledger order."""
    objective = view.spec.objective
    return [(e.payload["candidate_id"], objective.utility(e.payload["value"])) for e in view.of("Observed")
            if e.payload["status"] == "ok" and e.payload["value"] is not None]


def outlook(view: LedgerView) -> _Outlook:
    """The success bar, the base rate of lab success and every proxy rung's validity, as of the view."""
    from rewards.process import RungValidity, auroc, base_rate

    results = _lab_results(view)
    utilities = [u for _, u in results]
    threshold = _success_threshold(view.spec, utilities)
    n_success = sum(u >= threshold for u in utilities) if threshold is not None else 0
    validities = {}
    for rung, values in _proxy_values(view).items():
        objective = view.spec.objective
        pairs = [(objective.utility(values[cid]), u) for cid, u in results if cid in values]
        calibration = calibrate_rung(rung, pairs)
        area = None
        if threshold is not None and pairs:
            area = auroc([x for x, _ in pairs], [y >= threshold for _, y in pairs])
        validities[rung] = RungValidity(rung=rung, n_pairs=calibration.n_pairs, spearman=calibration.spearman,
                                        auroc=area, intercept=calibration.intercept, slope=calibration.slope,
                                        residual_sd=calibration.residual_sd)
    return _Outlook(threshold, base_rate(n_success, len(utilities)) if threshold is not None else 0.5, validities,
                    utilities)


# ------------------------------------------------------------------------------------------- trajectories
@dataclass
class _Trajectory:
    id: str
    arm: str
    candidate_id: str | None
    steps: list = field(default_factory=list)
    """(StepContext, potential after it) pairs, in order."""
    status: str = "provisional"


def _rejection_kind(reason: str) -> str:
    """duplicate, out_of_space or invalid, from the validator's message."""
    if reason.startswith("duplicate"):
        return "duplicate"
    if "design space" in reason or "constraint" in reason:
        return "out_of_space"
    return "invalid"


def _human_verdicts(view: LedgerView) -> dict[tuple[str, str], dict]:
    from rewards import ScoreValue

    out: dict[tuple[str, str], dict] = defaultdict(dict)
    for event in view.of("HumanVerdict"):
        p = event.payload
        out[(p["stage"], p["subject"])][p["criterion_id"]] = ScoreValue(value=p["value"], reason=p["reason"])
    return out


def trajectories(view: LedgerView, skip: set[str] = frozenset()) -> tuple[list[_Trajectory], _Outlook]:
    """Every trajectory as of the view (except ids in ``skip``), with the potential after each step."""
    from rewards import RungResult, StepContext
    from rewards.process import potential, success_probability

    spec, k = view.spec, view.iteration
    look = outlook(view)
    prior = look.base_rate
    verdicts = _human_verdicts(view)
    proxy_of = {r.name: r.proxy for r in spec.ladder if r.proxy}
    order = [r.name for r in spec.ladder]

    rejected = {(e.payload["iteration"], e.payload["candidate_id"]): e.payload["reason"]
                for e in view.of("Rejected") if e.payload["stage"] == "validate"}
    simulated: dict[tuple[int, str], dict[str, dict]] = defaultdict(dict)
    for e in view.of("Simulated"):
        simulated[(e.payload["iteration"], e.payload["candidate_id"])][e.payload["rung"]] = e.payload["observation"]
    dispatched = view.of("Dispatched")
    n_used = {e.payload["job_key"]: n for n, e in enumerate(dispatched)}
    observed = {e.payload["job_key"]: e.payload for e in view.of("Observed") if e.payload["provenance"] == "lab"}
    handled = {e.payload["job_key"]: e.payload["action"] for e in view.of("FailureHandled")}
    best_before: dict[str, float | None] = {}
    best = None
    for e in view.of("Observed"):
        p = e.payload
        best_before[p["job_key"]] = best
        if p["status"] == "ok" and p["value"] is not None:
            u = spec.objective.utility(p["value"])
            best = u if best is None else max(best, u)

    out: list[_Trajectory] = []
    by_candidate: dict[tuple[str, str], _Trajectory] = {}
    for e in view.of("Proposed"):
        p = e.payload
        i, arm, cid = p["iteration"], p["arm"], p["candidate_id"]
        t = _Trajectory(f"it{i}:{arm}:{cid}", arm, cid)
        reason = rejected.get((i, cid))
        kind = _rejection_kind(reason) if reason else None
        common = dict(arm=arm, candidate=p["candidate"], hypothesis=p["hypothesis"], rationale=p["rationale"],
                      expected=p["expected"])
        proposal = StepContext(stage="proposal", subject=cid, is_valid=kind != "invalid",
                               reason=reason if kind == "invalid" else None, is_duplicate=kind == "duplicate",
                               is_in_space=kind != "out_of_space" if kind != "invalid" else None,
                               human_verdicts=verdicts.get(("proposal", cid), {}), **common)
        phi = 0.0 if kind else prior
        t.steps.append((proposal, phi))
        if kind:
            t.status = "final"
            out.append(t)
            continue
        by_candidate[(arm, cid)] = t
        rungs = simulated.get((i, cid), {})
        if rungs:
            statuses = {r: obs["status"] for r, obs in rungs.items()}
            results = {}
            for rung in order:
                obs = rungs.get(rung)
                if obs is None or rung not in proxy_of:
                    continue
                prop = proxy_of[rung]
                results[rung] = RungResult(status=obs["status"], value=obs["properties"].get(prop),
                                           sd=obs.get("uncertainty", {}).get(prop))
            if any(s != "ok" for s in statuses.values()):
                phi = 0.0
            else:
                reached = [r for r in order if r in results and results[r].value is not None]
                if reached and look.threshold is not None:
                    top = reached[-1]
                    validity = look.validities[top]
                    probability = success_probability(validity, spec.objective.utility(results[top].value),
                                                      look.threshold)
                    phi = potential(prior, probability, validity.weight)
            t.steps.append((StepContext(stage="screen", subject=cid, is_valid=True, screen_statuses=statuses,
                                        rung_results=results, human_verdicts=verdicts.get(("screen", cid), {}),
                                        **common), phi))
        out.append(t)

    for e in dispatched:
        p = e.payload
        t = by_candidate.get((p["arm"], p["candidate_id"]))
        if t is None:
            continue
        phi = t.steps[-1][1]
        job = p["job_key"]
        t.steps.append((StepContext(stage="dispatch", subject=job, arm=p["arm"], is_valid=True,
                                    n_lab_used=n_used[job], lab_budget=spec.budget.lab_experiments,
                                    human_verdicts=verdicts.get(("dispatch", job), {})), phi))
        result = observed.get(job)
        if result is None:
            continue
        ok = result["status"] == "ok" and result["value"] is not None
        utility = spec.objective.utility(result["value"]) if ok else None
        success = (utility >= look.threshold) if ok and look.threshold is not None else None
        if success is not None:
            phi = 1.0 if success else 0.0
        t.steps.append((StepContext(stage="outcome", subject=job, arm=p["arm"], is_valid=True,
                                    lab_value=result["value"] if ok else None, utility=utility,
                                    best_utility_before=best_before.get(job), is_lab_success=success,
                                    human_verdicts=verdicts.get(("outcome", job), {})), phi))

    for t in out:
        if t.status == "final":
            continue
        stages = [s.stage for s, _ in t.steps]
        if "dispatch" not in stages:
            t.status = "final"  # held or stopped on the ladder: it will not reach the lab as this trajectory
            continue
        last = t.steps[-1][0]
        if last.stage == "outcome":
            if last.lab_value is not None or handled.get(last.subject, "retry") != "retry":
                t.status = "final"

    for e in view.of("SlotsOffered"):
        i = e.payload["iteration"]
        proposed = defaultdict(set)
        for p in (x.payload for x in view.of("Proposed") if x.payload["iteration"] == i):
            proposed[p["arm"]].add(p["candidate_id"])
        for arm, n_slots in e.payload["slots"].items():
            n_proposed = len(proposed[arm])
            for j in range(max(n_slots - n_proposed, 0)):
                t = _Trajectory(f"it{i}:{arm}:abstained:{j}", arm, None, status="final")
                t.steps.append((StepContext(stage="plan", subject=arm, arm=arm, is_valid=True, n_slots=n_slots,
                                            n_proposed=n_proposed), 0.0))
                out.append(t)
    return [t for t in out if t.id not in skip], look


def trajectory_rewards(view: LedgerView, rubric, skip: set[str] = frozenset()) -> tuple[list, _Outlook]:
    """``rewards.process.TrajectoryReward`` of every trajectory as of the view (except ``skip``)."""
    from rewards.process import score_trajectory

    found, look = trajectories(view, skip)
    rewards = [score_trajectory(rubric, t.id, t.arm, t.candidate_id, t.steps, start_potential=look.base_rate,
                                status=t.status) for t in found]
    return rewards, look


# --------------------------------------------------------------------------------------------- recording
def stored_rewards(events: list[Event], before_iteration: int | None = None) -> dict[str, Event]:
    """The current (latest) reward record of each trajectory, optionally only from earlier iterations."""
    out: dict[str, Event] = {}
    for e in events:
        if e.type in (RewardEstimated.type, RewardFinalised.type) and e.payload.get("arm") is not None:
            if before_iteration is None or e.payload["iteration"] < before_iteration:
                out[e.payload["subject"]] = e
    return out


def _stored_scores(events: list[Event], before_iteration: int) -> dict[tuple, Event]:
    out: dict[tuple, Event] = {}
    for e in events:
        p = e.payload
        if e.type == Scored.type and p.get("trajectory") and p["iteration"] < before_iteration:
            out[(p["trajectory"], p["stage"], p["subject"], p["criterion_id"])] = e
    return out


def step_summary(step) -> dict[str, Any]:
    """A scored step as recorded in a reward record (JSON-safe; criterion scores are separate ``Scored`` events)."""
    return {"stage": step.stage, "subject": step.subject, "rubric": step.rubric, "is_vetoed": step.is_vetoed,
            "potential_before": step.potential_before, "potential_after": step.potential_after,
            "progress": step.progress, "reward": step.reward}


def reward_records(events: list[Event], spec: CampaignSpec, rubric, iteration: int) -> list[tuple[Any, str]]:
    """The (payload, idempotency key) items the reward node appends at ``iteration``, given the events so far."""
    view = LedgerView.as_of(spec, events, iteration)
    previous = stored_rewards(events, before_iteration=iteration)
    frozen = {tid for tid, e in previous.items() if e.type == RewardFinalised.type}
    rewards, look = trajectory_rewards(view, rubric, skip=frozen)
    scores = _stored_scores(events, iteration)
    meta = dict(rubric_id=rubric.id, rubric_version=rubric.version, rubric_hash=rubric.content_hash)
    items: list[tuple[Any, str]] = []
    for rung, validity in look.validities.items():
        items.append((RungValidated(iteration=iteration, rung=rung, n_pairs=validity.n_pairs,
                                    spearman=validity.spearman, auroc=validity.auroc, weight=validity.weight,
                                    measure=validity.measure, base_rate=look.base_rate,
                                    success_threshold=look.threshold), f"it{iteration}:rung-validated:{rung}"))
    for r in rewards:
        is_provisional = r.status == "provisional"
        for step in r.steps:
            for criterion_id, value, weight, reason in ((s.criterion_id, s.value, s.weight, s.reason)
                                                        for s in step.scores):
                key = (r.trajectory_id, step.stage, step.subject, criterion_id)
                old = scores.get(key)
                if old is not None and (old.payload["value"], old.payload["weight"], old.payload["is_provisional"],
                                        old.payload["rubric_hash"]) == (value, weight, is_provisional,
                                                                        rubric.content_hash):
                    continue
                items.append((Scored(iteration=iteration, stage=step.stage, subject=step.subject,
                                     criterion_id=criterion_id, value=value, weight=weight,
                                     is_provisional=is_provisional, supersedes_seq=old.seq if old else None,
                                     reason=reason, trajectory=r.trajectory_id, **meta),
                              f"it{iteration}:scored:{r.trajectory_id}:{step.stage}:{step.subject}:{criterion_id}"))
        old = previous.get(r.trajectory_id)
        cls = RewardEstimated if is_provisional else RewardFinalised
        steps = [step_summary(step) for step in r.steps]
        if old is not None and old.type == cls.type and old.payload["reward"] == r.reward \
                and old.payload["steps"] == steps and old.payload["rubric_hash"] == rubric.content_hash:
            continue
        items.append((cls(iteration=iteration, subject=r.trajectory_id, reward=r.reward, components=r.components,
                          weights=r.weights, arm=r.arm, candidate_id=r.candidate_id,
                          supersedes_seq=old.seq if old else None, steps=steps, **meta),
                      f"it{iteration}:reward:{r.trajectory_id}"))
    return items


def reward(state: CampaignState, ctx: CampaignContext) -> CampaignState:
    iteration = state["iteration"]
    rubric = ctx.rubric
    actor = f"rubric:{rubric.id}@{rubric.version}"
    slots = {arm: int(n) for arm, n in (state.get("slots") or {}).items() if n}
    if slots:
        ctx.ledger.append(ctx.campaign_id, SlotsOffered(iteration=iteration, slots=slots), key=f"it{iteration}:slots",
                          actor=actor)
    _install_judge_loader()
    from rewards import judge

    events = ctx.ledger.events(ctx.campaign_id)
    with judge.recording(recorded_judge_answers(events)) as calls:
        items = reward_records(events, ctx.spec, rubric, iteration)
    # The judge's calls go first, in the same transaction: a resumed or replayed step is answered from them.
    ctx.ledger.append_many(ctx.campaign_id, judge_call_records(calls, iteration) + items, actor=actor)
    return {}


def recorded_judge_answers(events: list[Event]) -> dict[str, str]:
    """Judge replies already in the ledger, by call key."""
    return {e.payload["key"]: e.payload["response"] for e in events
            if e.type == LLMCall.type and e.payload["key"].startswith("judge:")}


def judge_call_records(calls: list, iteration: int) -> list[tuple[Any, str]]:
    """``LLMCall`` events for the judge calls made while scoring (never an API key: only model names)."""
    return [(LLMCall(iteration=iteration, key=call["key"], model=call["model"], messages=call["messages"],
                     response=call["response"], latency_s=call["latency_s"]), call["key"]) for call in calls]


def scored_iterations(events: list[Event]) -> list[int]:
    """The iterations at which the reward node ran and recorded something, in order."""
    kinds = {Scored.type, RewardEstimated.type, RewardFinalised.type, SlotsOffered.type, RungValidated.type}
    return sorted({e.payload["iteration"] for e in events if e.type in kinds})


def recompute_rewards(events: list[Event], spec: CampaignSpec, rubric) -> dict[str, Any]:
    """Every trajectory's reward recomputed from the ledger and ``rubric``: each as it stood when it became final
    (the iteration the lab answered it or it ended), or at the last scored iteration if it is still provisional.

    With the rubric the campaign ran with, this equals the stored rewards (``stored_rewards``).
    """
    from rewards import judge

    _install_judge_loader()
    out: dict[str, Any] = {}
    final: set[str] = set()
    with judge.recording(recorded_judge_answers(events)):  # recorded judge calls are answered from the ledger
        for iteration in scored_iterations(events):
            view = LedgerView.as_of(spec, events, iteration)
            rewards, _ = trajectory_rewards(view, rubric, skip=final)
            for r in rewards:
                out[r.trajectory_id] = r
                if r.status == "final":
                    final.add(r.trajectory_id)
    return out


def superseding_records(events: list[Event], recomputed: dict[str, Any], rubric) -> list[tuple[Any, str]]:
    """Records that make ``recomputed`` (from ``recompute_rewards``) the current rewards, each superseding the
    stored record it replaces: criterion scores that differ, and every changed reward. Nothing is updated in place.
    """
    stored = stored_rewards(events)
    scores: dict[tuple, Event] = {}
    for e in events:
        p = e.payload
        if e.type == Scored.type and p.get("trajectory"):
            scores[(p["trajectory"], p["stage"], p["subject"], p["criterion_id"])] = e
    last = max(scored_iterations(events), default=0)
    meta = dict(rubric_id=rubric.id, rubric_version=rubric.version, rubric_hash=rubric.content_hash)
    tag = f"recompute:{rubric.content_hash[:16]}"
    items: list[tuple[Any, str]] = []
    for tid, r in recomputed.items():
        old = stored.get(tid)
        iteration = old.payload["iteration"] if old is not None else last
        is_provisional = r.status == "provisional"
        for step in r.steps:
            for s in step.scores:
                key = (tid, step.stage, step.subject, s.criterion_id)
                previous = scores.get(key)
                if previous is not None and (previous.payload["value"], previous.payload["weight"],
                                             previous.payload["is_provisional"], previous.payload["rubric_hash"]) == (
                        s.value, s.weight, is_provisional, rubric.content_hash):
                    continue
                items.append((Scored(iteration=iteration, stage=step.stage, subject=step.subject,
                                     criterion_id=s.criterion_id, value=s.value, weight=s.weight,
                                     is_provisional=is_provisional,
                                     supersedes_seq=previous.seq if previous is not None else None, reason=s.reason,
                                     trajectory=tid, **meta), f"{tag}:scored:{tid}:{step.stage}:{step.subject}:"
                                                              f"{s.criterion_id}"))
        steps = [step_summary(step) for step in r.steps]
        if old is not None and old.payload["rubric_hash"] == rubric.content_hash \
                and old.payload["reward"] == r.reward and old.payload["steps"] == steps:
            continue
        cls = RewardEstimated if is_provisional else RewardFinalised
        items.append((cls(iteration=iteration, subject=tid, reward=r.reward, components=r.components,
                          weights=r.weights, arm=r.arm, candidate_id=r.candidate_id,
                          supersedes_seq=old.seq if old is not None else None, steps=steps, **meta),
                      f"{tag}:reward:{tid}"))
    return items
