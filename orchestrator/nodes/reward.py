"""reward: follow every proposal as a trajectory and score it with the rubric and the process reward.

A trajectory is one proposal followed along the ladder (proposal → screen → dispatch → outcome); a lab slot an arm
left empty is a one-step ``plan`` trajectory. Everything is a fold over the ledger *as of* an iteration (events
whose iteration, or observe iteration, is at most it), so ``rewards recompute`` gets exactly what the node stored.
The fold is incremental (``orchestrator.trajectory_fold``): each step reads only the events appended since the last
one, and trajectories leave memory once final, so a long campaign's reward step does not grow with its ledger.

Each iteration the node writes, for every trajectory not yet final: a ``Scored`` event per criterion and step when
it is new or differs from the stored one, and a ``RewardEstimated`` (provisional) or ``RewardFinalised`` (final)
record, carrying each step's potentials, progress and reward (see ``rewards.process``), when it changed. A new
record points at the one it supersedes (``supersedes_seq``); nothing stored is ever changed. A trajectory is final once the
lab has answered it (and no retry is pending) or it ended before the lab (rejected, failed a rung, held). Each proxy
rung's validity against the lab is re-estimated every iteration and recorded as ``RungValidated``.
"""

from __future__ import annotations

import bisect
from typing import Any

from ..context import CampaignContext
from ..events import (
    Event,
    LLMCall,
    RewardEstimated,
    RewardFinalised,
    RungValidated,
    Scored,
    SlotsOffered,
)
from ..spec import CampaignSpec
from ..state import CampaignState
from ..trajectory_fold import Outlook, Trajectory, TrajectoryFold, event_iteration

__all__ = ["judge_call_records", "recompute_rewards", "recorded_judge_answers", "reward", "reward_records",
           "scored_iterations", "step_summary", "stored_rewards", "superseding_records", "trajectory_rewards"]


def _install_judge_loader() -> None:
    from rewards import judge

    def load(name: str):
        from ..planners.llm_models import load_chat_model

        return load_chat_model(None if name == "embedded" else name, temperature=0.0, max_tokens=256)

    judge.set_model_loader(load)


# ---------------------------------------------------------------------------------------------- scoring
def trajectory_rewards(fold: TrajectoryFold, rubric, iteration: int) -> tuple[list[tuple[Trajectory, Any]], Outlook]:
    """(trajectory, ``rewards.process.TrajectoryReward``) of every trajectory not final before ``iteration``."""
    from rewards.process import score_trajectory

    found, look = fold.trajectories(iteration)
    return [(t, score_trajectory(rubric, t.id, t.arm, t.candidate_id, t.steps, start_potential=look.base_rate,
                                 status=t.status)) for t in found], look


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


def reward_records(fold: TrajectoryFold, rubric, iteration: int) -> list[tuple[Any, str]]:
    """The (payload, idempotency key) items the reward node appends at ``iteration``, given what ``fold`` was fed."""
    scored, look = trajectory_rewards(fold, rubric, iteration)
    meta = dict(rubric_id=rubric.id, rubric_version=rubric.version, rubric_hash=rubric.content_hash)
    items: list[tuple[Any, str]] = []
    for rung, validity in look.validities.items():
        items.append((RungValidated(iteration=iteration, rung=rung, n_pairs=validity.n_pairs,
                                    spearman=validity.spearman, auroc=validity.auroc, weight=validity.weight,
                                    measure=validity.measure, base_rate=look.base_rate,
                                    success_threshold=look.threshold), f"it{iteration}:rung-validated:{rung}"))
    for t, r in scored:
        is_provisional = r.status == "provisional"
        for step in r.steps:
            for s in step.scores:
                old = fold.previous_score(t, (step.stage, step.subject, s.criterion_id), iteration)
                if old is not None and (old.payload["value"], old.payload["weight"], old.payload["is_provisional"],
                                        old.payload["rubric_hash"]) == (s.value, s.weight, is_provisional,
                                                                        rubric.content_hash):
                    continue
                items.append((Scored(iteration=iteration, stage=step.stage, subject=step.subject,
                                     criterion_id=s.criterion_id, value=s.value, weight=s.weight,
                                     is_provisional=is_provisional, supersedes_seq=old.seq if old else None,
                                     reason=s.reason, trajectory=r.trajectory_id, **meta),
                              f"it{iteration}:scored:{r.trajectory_id}:{step.stage}:{step.subject}:{s.criterion_id}"))
        old = fold.previous_reward(t, iteration)
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

    fold = ctx.resources.get("trajectory_fold")
    if fold is None:  # first reward step of this process: fold the ledger so far once, then only what is new
        fold = ctx.resources["trajectory_fold"] = TrajectoryFold(ctx.spec)
    fold.feed(ctx.ledger.events(ctx.campaign_id, after_seq=fold.last_seq))
    with judge.recording(dict(fold.judge_answers)) as calls:
        items = reward_records(fold, rubric, iteration)
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
    iterations = scored_iterations(events)
    windows: dict[int, list[Event]] = {k: [] for k in iterations}
    for event in events:  # each event joins the first scored iteration that sees it, in ledger order
        i = event_iteration(event)
        at = 0 if i is None else bisect.bisect_left(iterations, i)
        if at < len(iterations):
            windows[iterations[at]].append(event)
    fold = TrajectoryFold(spec, keep_records=False)
    out: dict[str, Any] = {}
    with judge.recording(recorded_judge_answers(events)):  # recorded judge calls are answered from the ledger
        for k in iterations:
            fold.feed(windows[k])
            scored, _ = trajectory_rewards(fold, rubric, k)
            for _, r in scored:
                out[r.trajectory_id] = r
            fold.release_final([t for t, _ in scored])
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
