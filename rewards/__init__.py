"""Process rewards for closed-loop campaigns: TOML rubrics of atomic criteria, scored by registered scorers.

Importing this package is light (pydantic only; no torch).

Example:
    >>> from rewards import StepContext, load_rubric
    >>> rubric = load_rubric("default")
    >>> scores = rubric.score(StepContext(stage="screen", subject="CCO", arm="bo", is_valid=True,
    ...                                   screen_statuses={"xtb": "ok", "dft": "failed"}))
    >>> [(s.criterion_id, s.value, s.reason) for s in scores]
    [('passes_screen', -1.0, 'screening failed on dft')]
"""

from rewards.context import STAGES, ScoreValue, Stage, StepContext
from rewards.errors import RewardError, RewardSetupError, ScoringError
from rewards.rubric import (
    Category,
    Criterion,
    CriterionScore,
    Gate,
    Rubric,
    Scope,
    builtin_rubric_names,
    load_rubric,
    parse_rubric,
)
from rewards.scorers import (
    ENTRY_POINT_GROUP,
    Scorer,
    discover_scorers,
    get_scorer,
    register_builtin_scorers,
    register_scorer,
    scorer_names,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "STAGES",
    "Category",
    "Criterion",
    "CriterionScore",
    "Gate",
    "RewardError",
    "RewardSetupError",
    "Rubric",
    "Scope",
    "ScoreValue",
    "Scorer",
    "ScoringError",
    "Stage",
    "StepContext",
    "builtin_rubric_names",
    "discover_scorers",
    "get_scorer",
    "load_rubric",
    "parse_rubric",
    "register_builtin_scorers",
    "register_scorer",
    "scorer_names",
]
