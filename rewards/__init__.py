"""Process rewards for closed-loop campaigns: TOML rubrics of atomic criteria, scored by registered scorers, mixed
with potential-based progress on the calibrated probability of lab success and anchored to the lab's outcome.

Importing this package is light (pydantic only; no torch).

Example:
    >>> from rewards import StepContext, load_rubric
    >>> rubric = load_rubric("default")
    >>> scores = rubric.score(StepContext(stage="screen", subject="CCO", arm="bo", is_valid=True,
    ...                                   screen_statuses={"xtb": "ok", "dft": "failed"}))
    >>> [(s.criterion_id, s.value, s.reason) for s in scores]
    [('passes_screen', -1.0, 'screening failed on dft')]
"""

__distribution__ = "closedloop"  # vocabulary.namespace reads this line to tell our packages from others

from rewards.context import STAGES, RungResult, ScoreValue, Stage, StepContext
from rewards.errors import RewardError, RewardSetupError, ScoringError
from rewards.judge import JudgeRecorder
from rewards.process import (
    RungValidity,
    StepReward,
    TrajectoryReward,
    auroc,
    base_rate,
    potential,
    score_trajectory,
    success_probability,
)
from rewards.rubric import (
    Category,
    Criterion,
    CriterionScore,
    Gate,
    RewardMix,
    Rubric,
    Scope,
    builtin_rubric_names,
    load_rubric,
    parse_rubric,
)
from rewards.scorers import (
    ENTRY_POINT_GROUP,
    SCORER_KINDS,
    Scorer,
    discover_scorers,
    get_scorer,
    register_builtin_scorers,
    register_scorer,
    scorer_kind,
    scorer_names,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "SCORER_KINDS",
    "STAGES",
    "Category",
    "Criterion",
    "CriterionScore",
    "Gate",
    "JudgeRecorder",
    "RewardError",
    "RewardMix",
    "RewardSetupError",
    "Rubric",
    "RungResult",
    "RungValidity",
    "Scope",
    "ScoreValue",
    "Scorer",
    "ScoringError",
    "Stage",
    "StepContext",
    "StepReward",
    "TrajectoryReward",
    "auroc",
    "base_rate",
    "builtin_rubric_names",
    "discover_scorers",
    "get_scorer",
    "load_rubric",
    "parse_rubric",
    "potential",
    "register_builtin_scorers",
    "register_scorer",
    "score_trajectory",
    "scorer_kind",
    "scorer_names",
    "success_probability",
]
