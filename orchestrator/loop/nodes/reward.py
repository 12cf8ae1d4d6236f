"""reward: follow every proposal as a trajectory and score it with the rubric and the process reward.

A trajectory is one proposal followed along the ladder (proposal → screen → dispatch → outcome); a lab slot an arm
left empty is a one-step ``plan`` trajectory. Everything is a fold over the ledger *as of* an iteration (events
whose iteration, or observe iteration, is at most it), so ``rewards recompute`` gets exactly what the node stored.
The fold is incremental (``orchestrator.loop.trajectory_fold``): each step reads only the events appended since the last
one, and trajectories leave memory once final, so a long campaign's reward step does not grow with its ledger.

A step's criterion scores are kept while its trajectory is open (``StepScoreMemo``): scorers read only the step's
context, so a step whose context has not changed is not scored again; only the potentials and rewards, which follow the
lab's outlook, are recomputed. The slots offered, the judge's calls and the records of an iteration go to the ledger in
one transaction.

Each iteration the node writes, for every trajectory not yet final whose reward or scores changed, one
``RewardEstimated`` (provisional) or ``RewardFinalised`` (final) record carrying each step's criterion scores,
potentials, progress and reward (see ``rewards.process``). Ledgers from before scores moved into the records also
hold a ``Scored`` event per criterion and step; they are still read. A new record points at the one it supersedes
(``supersedes_seq``); nothing stored is ever changed. A trajectory is final once the lab has answered it (and no retry is pending) or it ended before the lab (rejected, failed a rung, held). Each proxy
rung's validity against the lab is re-estimated every iteration and recorded as one ``RungsValidated`` (older
ledgers: a ``RungValidated`` per rung).
"""

from __future__ import annotations

import bisect
import logging
from typing import Any

from orchestrator.loop.context import CampaignContext
from orchestrator.loop.state import CampaignState
from orchestrator.loop.step_scores import StepScoreMemo
from orchestrator.loop.trajectory_fold import (
    Outlook,
    Trajectory,
    TrajectoryFold,
    event_iteration,
)
from orchestrator.spec import CampaignSpec
from vocabulary.events import (
    Event,
    LLMCall,
    RewardEstimated,
    RewardFinalised,
    RungsValidated,
    RungValidated,
    RungValidity,
    Scored,
    SlotsOffered,
)

__all__ = ["StepScoreMemo", "criterion_scores", "judge_call_records", "recompute_rewards", "recorded_judge_answers", "reward",
           "reward_records", "scored_iterations", "step_summary", "stored_rewards", "superseding_records",
           "trajectory_rewards"]


logger = logging.getLogger(__name__)


def _install_judge_loader() -> None:
    from rewards import judge

    def load(name: str):
        from orchestrator.policy.planners.llm_models import load_chat_model

        return load_chat_model(None if name == "embedded" else name, temperature=0.0, max_tokens=256)

    judge.set_model_loader(load)


# ---------------------------------------------------------------------------------------------- scoring
def trajectory_rewards(fold: TrajectoryFold, rubric, iteration: int, *, memo: StepScoreMemo | None = None,
                       recorder=None) -> tuple[list[tuple[Trajectory, Any]], Outlook]:
    """(trajectory, ``rewards.process.TrajectoryReward``) of every trajectory not final before ``iteration``.

    With ``memo`` (of the same rubric), steps scored before with the same context are not scored again. The judge
    answers from ``recorder`` (a ``rewards.judge.JudgeRecorder``) and records its new calls there.
    """
    from rewards.process import score_trajectory

    found, look = fold.trajectories(iteration)
    scored = [(t, score_trajectory(rubric, t.id, t.arm, t.candidate_id, t.steps, start_potential=look.base_rate,
                                   status=t.status, recorder=recorder,
                                   score_step=memo.scorer(t.id, recorder) if memo is not None else None))
              for t in found]
    if memo is not None:
        memo.keep({t.id for t in found})
    return scored, look


# --------------------------------------------------------------------------------------------- recording
def stored_rewards(events: list[Event], before_iteration: int | None = None) -> dict[str, Event]:
    """The current (latest) reward record of each trajectory, optionally only from earlier iterations."""
    out: dict[str, Event] = {}
    for e in events:
        if e.type in (RewardEstimated.type, RewardFinalised.type) and e.payload.get("arm") is not None:
            if before_iteration is None or e.payload["iteration"] < before_iteration:
                out[e.payload["subject"]] = e
    return out


def step_summary(step) -> dict[str, Any]:
    """A scored step as recorded in a reward record (JSON-safe), with each criterion's score, weight and reason."""
    return {"stage": step.stage, "subject": step.subject, "rubric": step.rubric, "is_vetoed": step.is_vetoed,
            "potential_before": step.potential_before, "potential_after": step.potential_after,
            "progress": step.progress, "reward": step.reward,
            "scores": [{"criterion_id": s.criterion_id, "value": s.value, "weight": s.weight, "reason": s.reason}
                       for s in step.scores]}


def criterion_scores(events: list[Event]) -> list[dict[str, Any]]:
    """Every criterion score the ledger holds, in ledger order, as flat dicts (``seq``, ``trajectory``, ``stage``,
    ``subject``, ``criterion_id``, ``value``, ``weight``, ``reason``, ``is_provisional``, ``iteration``): the scores
    inside reward records, and the ``Scored`` events of ledgers from before scores moved into them."""
    out: list[dict[str, Any]] = []
    for e in events:
        p = e.payload
        if e.type == Scored.type and p.get("trajectory"):
            out.append({"seq": e.seq, **{k: p[k] for k in ("trajectory", "stage", "subject", "criterion_id", "value",
                                                           "weight", "reason", "is_provisional", "iteration")}})
        elif e.type in (RewardEstimated.type, RewardFinalised.type) and p.get("arm") is not None:
            for step in p["steps"]:
                out.extend({"seq": e.seq, "trajectory": p["subject"], "stage": step["stage"],
                            "subject": step["subject"], **score, "is_provisional": e.type == RewardEstimated.type,
                            "iteration": p["iteration"]} for score in step.get("scores", ()))
    return out


def reward_records(fold: TrajectoryFold, rubric, iteration: int, *, memo: StepScoreMemo | None = None,
                   recorder=None) -> list[tuple[Any, str]]:
    """The (payload, idempotency key) items the reward node appends at ``iteration``, given what ``fold`` was fed;
    the judge's new calls go to ``recorder`` (a ``rewards.judge.JudgeRecorder``)."""
    scored, look = trajectory_rewards(fold, rubric, iteration, memo=memo, recorder=recorder)
    rubric_hash = rubric.content_hash
    meta = dict(rubric_id=rubric.id, rubric_version=rubric.version, rubric_hash=rubric_hash)
    items: list[tuple[Any, str]] = []
    validities = [RungValidity(rung=rung, n_pairs=v.n_pairs, spearman=v.spearman, auroc=v.auroc, weight=v.weight,
                               measure=v.measure) for rung, v in look.validities.items()]
    if validities:
        items.append((RungsValidated(iteration=iteration, base_rate=look.base_rate, success_threshold=look.threshold,
                                     rungs=validities), f"it{iteration}:rungs-validated"))
    for t, r in scored:
        is_provisional = r.status == "provisional"
        old = fold.previous_reward(t, iteration)
        cls = RewardEstimated if is_provisional else RewardFinalised
        steps = [step_summary(step) for step in r.steps]
        if old is not None and old.type == cls.type and old.payload["reward"] == r.reward \
                and old.payload["steps"] == steps and old.payload["rubric_hash"] == rubric_hash:
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
    _install_judge_loader()
    from rewards import judge

    fold = ctx.view.trajectories
    offered: list[tuple[Any, str]] = []
    if slots:  # recorded below with the rewards; the fold takes it now (and again, harmlessly, when it reads it)
        offered.append((SlotsOffered(iteration=iteration, slots=slots), f"it{iteration}:slots"))
        fold.offer_slots(iteration, slots)
    recorder = judge.JudgeRecorder(fold.judge_answers)  # this campaign's own: answers from its ledger, new calls
    items = reward_records(fold, rubric, iteration, memo=ctx.step_scores, recorder=recorder)
    # One transaction, in this order: the slots, the judge's calls (a resumed or replayed step is answered from
    # them), then the records.
    ctx.ledger.append_many(ctx.campaign_id, offered + judge_call_records(recorder.calls, iteration) + items,
                           actor=actor)
    n_final = sum(isinstance(payload, RewardFinalised) for payload, _ in items)
    n_estimated = sum(isinstance(payload, RewardEstimated) for payload, _ in items)
    logger.info("reward: iteration %d, rubric %s@%s, %d reward(s) finalised and %d estimated, %d judge call(s)",
                iteration, rubric.id, rubric.version, n_final, n_estimated, len(recorder.calls))
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
    kinds = {Scored.type, RewardEstimated.type, RewardFinalised.type, SlotsOffered.type, RungValidated.type,
             RungsValidated.type}
    return sorted({e.payload["iteration"] for e in events if e.type in kinds})


def recompute_rewards(events: list[Event], spec: CampaignSpec, rubric) -> dict[str, Any]:
    """Every trajectory's reward recomputed from the ledger and ``rubric``: each as it stood when it became final
    (the iteration the lab answered it or it ended), or at the last scored iteration if it is still provisional.

    With the rubric the campaign ran with, this equals the stored rewards (``stored_rewards``).
    """
    from rewards import judge

    _install_judge_loader()
    iterations = scored_iterations(events)
    windows: dict[int, list[Event]] = {k: [] for k in iterations}
    for event in events:  # each event joins the first scored iteration that sees it, in ledger order
        i = event_iteration(event)
        at = 0 if i is None else bisect.bisect_left(iterations, i)
        if at < len(iterations):
            windows[iterations[at]].append(event)
    fold = TrajectoryFold(spec, keep_records=False)
    memo = StepScoreMemo(rubric)
    out: dict[str, Any] = {}
    recorder = judge.JudgeRecorder(recorded_judge_answers(events))  # recorded judge calls are answered from the ledger
    for k in iterations:
        fold.feed(windows[k])
        scored, _ = trajectory_rewards(fold, rubric, k, memo=memo, recorder=recorder)
        for _, r in scored:
            out[r.trajectory_id] = r
        fold.release_final([t for t, _ in scored])
    return out


def superseding_records(events: list[Event], recomputed: dict[str, Any], rubric) -> list[tuple[Any, str]]:
    """Records that make ``recomputed`` (from ``recompute_rewards``) the current rewards, each superseding the
    stored record it replaces: every reward whose value or scores changed. Nothing is updated in place.
    """
    stored = stored_rewards(events)
    last = max(scored_iterations(events), default=0)
    meta = dict(rubric_id=rubric.id, rubric_version=rubric.version, rubric_hash=rubric.content_hash)
    tag = f"recompute:{rubric.content_hash[:16]}"
    items: list[tuple[Any, str]] = []
    for tid, r in recomputed.items():
        old = stored.get(tid)
        iteration = old.payload["iteration"] if old is not None else last
        is_provisional = r.status == "provisional"
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
