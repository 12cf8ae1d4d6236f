"""Process rewards: potential-based progress on the calibrated probability of lab success, anchored to the outcome.

A trajectory is one proposal followed along the ladder: proposal → screen → dispatch → outcome (an abstained lab
slot is a one-step ``plan`` trajectory). Its potential ``Φ`` is the calibrated probability that the candidate
succeeds in the lab, given the highest rung it has reached:

- before anything, and after a proposal that passes its checks, ``Φ = p̄``, the campaign's base rate of lab success;
- after a proxy rung, ``Φ = p̄ + w · (P_rung − p̄)``: the rung's own probability shrunk towards the base rate by its
  validity ``w`` ∈ [0, 1] (its AUROC or rank correlation against the lab), so an uninformative rung moves nothing;
- a proposal the checks stop (invalid, out of domain, duplicate) or a failed rung drops ``Φ`` to 0;
- the lab's answer sets ``Φ`` to 1 (success) or 0.

Each step's progress is ``Φ(after) − Φ(before)`` (shaping with γ = 1, Ng, Harada & Russell 1999): it telescopes, so
progress over a whole trajectory is ``Φ(end) − p̄`` and cannot be farmed by adding steps. A step's reward mixes its
rubric score ``s`` with its progress ``Δ``: ``r = (1 − μ)·s + μ·Δ``, and −1 when a veto criterion fires. The
trajectory's process reward ``P`` is the mean of its step rewards (and of its trajectory-scope criteria, as one more
term), so it stays in [−1, 1] however long the ladder. Its reward is ``R = α·A + (1 − α)·P`` with the outcome
anchor ``A``: the outcome-scope criteria once the lab has answered, else the calibrated expectation ``2Φ − 1``.
``α`` (``outcome_weight``) must be above 0: the anchor always stays in the mix.

The mean rewards a trajectory for its share of good steps, so padding it with steps that score well can raise it.
A rubric with ``[rubric.reward] process = "potential"`` (the environment's, ``rewards/rubrics/environment.toml``)
uses ``potential_process`` instead: the telescoped progress ``Φ(end) − Φ(start)`` mixed with the *worst* step's
rubric score, neither of which an added step can raise. ``shaped_reward`` is the same shaping for a whole episode
(``γΦ(s') − Φ(s)``), which ``orchestrator.environment`` pays per step.

Example:
    >>> v = RungValidity(rung="gaff", n_pairs=8, spearman=0.9, auroc=0.95, intercept=0.0, slope=1.0,
    ...                  residual_sd=0.5)
    >>> round(v.weight, 2)
    0.9
    >>> p = success_probability(v, proxy_utility=-0.2, threshold_utility=-0.5)
    >>> round(p, 3), round(potential(0.3, p, v.weight), 3)
    (0.726, 0.683)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from rewards.context import StepContext
from rewards.judge import JudgeRecorder
from rewards.rubric import CriterionScore, Rubric

__all__ = [
    "PRIOR_VALIDITY",
    "RewardStatus",
    "RungValidity",
    "StepReward",
    "TrajectoryReward",
    "auroc",
    "base_rate",
    "potential",
    "potential_process",
    "score_trajectory",
    "shaped_reward",
    "success_probability",
]

PRIOR_VALIDITY = 0.5
"""A rung's validity before it has met the lab on ``MIN_PAIRS`` pairs: optimistic, so every rung is measured."""
MIN_PAIRS = 5
RewardStatus = Literal["provisional", "final"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RungValidity(_Frozen):
    """How well a proxy rung predicts the lab, on the (proxy utility, lab utility) pairs seen so far.

    ``intercept``, ``slope`` and ``residual_sd`` map a proxy utility to a predicted lab utility (utility units);
    ``spearman`` is their rank correlation and ``auroc`` the chance that a lab success has the higher proxy.
    """

    type: Literal["rung_validity"] = "rung_validity"
    schema_version: int = 1
    rung: str
    n_pairs: int = Field(ge=0)
    spearman: float | None = None
    auroc: float | None = Field(default=None, ge=0.0, le=1.0)
    intercept: float = 0.0
    slope: float = 1.0
    residual_sd: float | None = Field(default=None, ge=0.0)

    @property
    def weight(self) -> float:
        """The rung's process weight in [0, 1]: ``2·AUROC − 1`` when both outcomes have been seen, else Spearman ρ,
        clipped at 0; ``PRIOR_VALIDITY`` before ``MIN_PAIRS`` pairs."""
        if self.n_pairs < MIN_PAIRS:
            return PRIOR_VALIDITY
        if self.auroc is not None:
            return max(0.0, 2.0 * self.auroc - 1.0)
        if self.spearman is not None and math.isfinite(self.spearman):
            return max(0.0, self.spearman)
        return PRIOR_VALIDITY

    @property
    def measure(self) -> str:
        """Which statistic set the weight: ``auroc``, ``spearman`` or ``prior``."""
        if self.n_pairs < MIN_PAIRS:
            return "prior"
        return "auroc" if self.auroc is not None else "spearman" if self.spearman is not None else "prior"


def auroc(scores: Sequence[float], labels: Sequence[bool]) -> float | None:
    """Area under the ROC curve of ``scores`` for ``labels`` (ties count half); None without both classes.

    Example:
        >>> auroc([0.1, 0.4, 0.35, 0.8], [False, False, True, True])
        0.75
    """
    if len(scores) != len(labels):
        raise ValueError(f"auroc needs one label per score, got {len(scores)} scores and {len(labels)} labels")
    is_positive = np.asarray(labels, dtype=bool)
    n_positive = int(is_positive.sum())
    n_negative = is_positive.size - n_positive
    if not n_positive or not n_negative:
        return None
    # Mann-Whitney: the positives' rank sum, tied scores sharing their mean rank (so a tie counts half); O(N log N)
    _, which, counts = np.unique(np.asarray(scores, dtype=float), return_inverse=True, return_counts=True)
    mean_rank = np.cumsum(counts) - (counts - 1) / 2
    rank_sum = float(mean_rank[which][is_positive].sum())
    return (rank_sum - n_positive * (n_positive + 1) / 2) / (n_positive * n_negative)


def base_rate(n_success: int, n_lab: int) -> float:
    """Laplace-smoothed share of lab successes, ``(k + 1) / (n + 2)``: 0.5 before any result.

    Example:
        >>> base_rate(0, 0), base_rate(3, 8)
        (0.5, 0.4)
    """
    return (n_success + 1) / (n_lab + 2)


def success_probability(validity: RungValidity, proxy_utility: float, threshold_utility: float) -> float | None:
    """P(lab utility ≥ threshold) under ``N(intercept + slope·proxy, residual_sd²)``; None before a residual exists."""
    if validity.residual_sd is None or validity.n_pairs < 3:
        return None
    mean = validity.intercept + validity.slope * proxy_utility
    sd = max(validity.residual_sd, 1e-6)
    return 0.5 * math.erfc((threshold_utility - mean) / (sd * math.sqrt(2.0)))


def potential(prior: float, probability: float | None, weight: float) -> float:
    """``prior + weight · (probability − prior)``: a rung's probability shrunk towards the base rate by its validity."""
    if probability is None:
        return prior
    return prior + max(0.0, min(1.0, weight)) * (probability - prior)


class StepReward(_Frozen):
    """One step of a trajectory, scored: the rubric's criteria, the potential before and after, and the reward."""

    type: Literal["step_reward"] = "step_reward"
    schema_version: int = 1
    stage: str
    subject: str
    scores: tuple[CriterionScore, ...] = ()
    rubric: float | None = Field(description="the step-scope rubric score in [-1, 1], None when nothing applied")
    is_vetoed: bool = False
    potential_before: float = Field(ge=0.0, le=1.0)
    potential_after: float = Field(ge=0.0, le=1.0)
    reward: float = Field(ge=-1.0, le=1.0)

    @property
    def progress(self) -> float:
        """``Φ(after) − Φ(before)``, in [-1, 1]."""
        return self.potential_after - self.potential_before


class TrajectoryReward(_Frozen):
    """A trajectory's reward: ``components`` by name with their ``weights``, and the mixed ``reward`` in [-1, 1]."""

    type: Literal["trajectory_reward"] = "trajectory_reward"
    schema_version: int = 1
    trajectory_id: str
    arm: str
    candidate_id: str | None
    status: RewardStatus
    steps: tuple[StepReward, ...]
    trajectory_scores: tuple[CriterionScore, ...] = ()
    outcome_scores: tuple[CriterionScore, ...] = ()
    components: dict[str, float]
    weights: dict[str, float]
    reward: float = Field(ge=-1.0, le=1.0)


def _clip(x: float) -> float:
    return max(-1.0, min(1.0, x))


def score_trajectory(
    rubric: Rubric,
    trajectory_id: str,
    arm: str,
    candidate_id: str | None,
    steps: Sequence[tuple[StepContext, float]],
    *,
    start_potential: float,
    status: RewardStatus,
    score_step: Callable[[StepContext], list[CriterionScore]] | None = None,
    recorder: JudgeRecorder | None = None,
) -> TrajectoryReward:
    """Score one trajectory.

    Args:
        steps: each step's context with the potential ``Φ`` after it (in [0, 1]), in order.
        start_potential: ``Φ`` before the first step (the base rate, in [0, 1]).
        status: ``final`` once nothing can change it (the lab answered, or the trajectory ended before the lab).
        score_step: what scores one step's criteria, ``rubric.score`` by default; a caller that rescores the same
            steps often passes a memo of it (scorers read only the step's context, so the scores are the same).
            A ``score_step`` given here carries its own recorder; ``recorder`` is for the default one.
        recorder: the campaign's ``rewards.judge.JudgeRecorder`` for this scoring pass, passed to ``rubric.score``
            by the default ``score_step``: the LLM judge answers from it and records its calls there.

    Raises:
        ScoringError: a scorer failed (see ``Rubric.score``).
    """
    mu, alpha = rubric.reward.progress_weight, rubric.reward.outcome_weight
    if score_step is None:
        score_step = functools.partial(rubric.score, recorder=recorder)
    kinds = {c.id: c.scope for c in rubric.criteria}
    scored: list[StepReward] = []
    trajectory_scores: dict[str, CriterionScore] = {}
    outcome_scores: list[CriterionScore] = []
    before = start_potential
    for context, after in steps:
        scores = score_step(context)
        step_scores = [s for s in scores if kinds[s.criterion_id] == "step"]
        for s in scores:
            if kinds[s.criterion_id] == "trajectory":
                trajectory_scores[s.criterion_id] = s  # the latest stage's verdict on it
            elif kinds[s.criterion_id] == "outcome":
                outcome_scores.append(s)
        value = rubric.aggregate(step_scores)
        is_vetoed = any(s.gate == "veto" and s.oriented_value < 0 for s in step_scores)
        progress = after - before
        if is_vetoed:
            reward = -1.0
        elif value is None:
            reward = _clip(progress)
        else:
            reward = _clip((1.0 - mu) * value + mu * progress)
        scored.append(StepReward(stage=context.stage, subject=context.subject, scores=tuple(scores), rubric=value,
                                 is_vetoed=is_vetoed, potential_before=before, potential_after=after, reward=reward))
        before = after
    trajectory_term = rubric.aggregate(list(trajectory_scores.values()))
    if rubric.reward.process == "potential":
        process = potential_process(scored, trajectory_term, start_potential=start_potential, progress_weight=mu)
    else:
        terms = [s.reward for s in scored]
        if trajectory_term is not None:
            terms.append(trajectory_term)
        process = sum(terms) / len(terms) if terms else 0.0
    anchor = rubric.aggregate(outcome_scores) if outcome_scores else None
    if anchor is None:
        anchor = 2.0 * before - 1.0  # the calibrated expectation of the lab's verdict
    components = {"outcome": anchor, "process": process, "progress": before - start_potential}
    weights = {"outcome": alpha, "process": 1.0 - alpha, "progress": 0.0}
    return TrajectoryReward(
        trajectory_id=trajectory_id, arm=arm, candidate_id=candidate_id, status=status, steps=tuple(scored),
        trajectory_scores=tuple(trajectory_scores.values()), outcome_scores=tuple(outcome_scores),
        components=components, weights=weights, reward=_clip(alpha * anchor + (1.0 - alpha) * process),
    )


def potential_process(steps: Sequence[StepReward], trajectory_term: float | None, *, start_potential: float,
                      progress_weight: float) -> float:
    """The process term in its potential-based form: ``(1 − μ)·min(rubric) + μ·(Φ(end) − Φ(start))``, in [-1, 1].

    ``min(rubric)`` is the lowest step-scope rubric score (and the trajectory-scope term), −1 for a vetoed step;
    steps without a rubric score add nothing. Progress telescopes (the sum of every step's ``Φ(after) − Φ(before)``
    is ``Φ(end) − Φ(start)``), and a minimum cannot be raised by adding terms, so padding a trajectory with extra
    steps, however well they score, never raises it.

    Example:
        >>> step = StepReward(stage="proposal", subject="x", rubric=0.5, potential_before=0.5, potential_after=0.5,
        ...                   reward=0.25)
        >>> good = StepReward(stage="outcome", subject="x", rubric=None, potential_before=0.5, potential_after=1.0,
        ...                   reward=0.5)
        >>> potential_process([step, good], None, start_potential=0.5, progress_weight=0.5)
        0.5
        >>> padded = [step] + [step.model_copy(update={"rubric": 1.0})] * 5 + [good]
        >>> potential_process(padded, None, start_potential=0.5, progress_weight=0.5)
        0.5
    """
    rubric_terms = [-1.0 if s.is_vetoed else s.rubric for s in steps if s.is_vetoed or s.rubric is not None]
    if trajectory_term is not None:
        rubric_terms.append(trajectory_term)
    end = steps[-1].potential_after if steps else start_potential
    progress = end - start_potential
    if not rubric_terms:
        return _clip(progress)
    return _clip((1.0 - progress_weight) * min(rubric_terms) + progress_weight * progress)


def shaped_reward(potential_before: float, potential_after: float, gamma: float = 1.0) -> float:
    """Potential-based shaping ``γ·Φ(s') − Φ(s)`` (Ng, Harada & Russell 1999). With ``γ = 1`` the rewards of an
    episode sum to ``Φ(end) − Φ(start)``, so a step that leaves the potential alone earns exactly 0.

    Example:
        >>> phis = [0.0, 0.2, 0.2, 0.2, 0.7]
        >>> round(sum(shaped_reward(a, b) for a, b in zip(phis, phis[1:])), 12)
        0.7
    """
    return gamma * potential_after - potential_before
