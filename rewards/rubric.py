"""Rubrics: TOML files of atomic, signed, optionally gated criteria, each scored by a registered scorer.

A criterion's value says how far its statement holds (+1 holds, -1 does not, 0 neither); the sign of its weight says
whether holding is good (pitfalls have negative weights). The step reward is the weighted mean of the applicable
values, in [-1, 1], after the gates: a ``veto`` criterion that goes the wrong way makes the reward -1, and a
``floor`` criterion caps the reward at its own (weight-oriented) score.

Example:
    >>> rubric = load_rubric("default")
    >>> rubric.id, len(rubric.content_hash)
    ('default', 64)
    >>> ok = StepContext(stage="proposal", subject="CCO", arm="llm", is_valid=True,
    ...                  rationale="gaff puts it inside the target window")
    >>> rubric.aggregate(rubric.score(ok))
    1.0
    >>> bad = StepContext(stage="proposal", subject="C(", arm="llm", is_valid=False, reason="unclosed branch")
    >>> rubric.aggregate(rubric.score(bad))
    -1.0
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from collections.abc import Sequence
from importlib.resources import files
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from rewards.context import ScoreValue, Stage, StepContext
from rewards.errors import RewardSetupError, ScoringError
from rewards.judge import JudgeRecorder
from rewards.scorers import (
    ENTRY_POINT_GROUP,
    NAME_PATTERN,
    get_scorer,
    scorer_names,
    takes_criterion,
    takes_recorder,
)
from vocabulary.text_files import TextFileError, normalised_text, read_text_file

__all__ = [
    "Category",
    "Criterion",
    "CriterionScore",
    "Gate",
    "RESERVED_IDS",
    "RewardMix",
    "Rubric",
    "Scope",
    "builtin_rubric_names",
    "load_rubric",
    "parse_rubric",
]

Category = Literal["essential", "important", "optional", "pitfall", "safety"]
Gate = Literal["none", "veto", "floor"]
Scope = Literal["step", "trajectory", "outcome"]
ID_PATTERN = NAME_PATTERN.pattern
RESERVED_IDS = frozenset({"progress", "outcome", "process", "trajectory"})
"""Names the process reward records beside the criteria; no criterion may take them."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Criterion(_Frozen):
    """One atomic statement about a step, the scorer that judges it, and how it counts.

    ``weight`` is signed (negative for pitfalls); 0 records a criterion without rewarding it. ``scope`` says which
    reward it feeds (step, trajectory or the outcome anchor); ``stages`` says when it is scored.
    """

    id: str = Field(pattern=ID_PATTERN)
    text: str = Field(min_length=1, description="one atomic statement; compound criteria invite partial credit")
    category: Category
    weight: float = Field(allow_inf_nan=False)
    gate: Gate = Field(default="none", validate_default=True)
    scope: Scope = "step"
    stages: tuple[Stage, ...]
    scorer: str = Field(pattern=ID_PATTERN, description="a registered scorer name")
    params: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="scorer settings, e.g. a judge's model or a rung's name")

    @field_validator("id")
    @classmethod
    def _id_not_reserved(cls, criterion_id: str) -> str:
        if criterion_id in RESERVED_IDS:
            raise ValueError(f"id {criterion_id!r} is reserved for the process reward; rename the criterion")
        return criterion_id

    @field_validator("text")
    @classmethod
    def _text_not_blank(cls, text: str) -> str:
        if not text.strip():
            raise ValueError("text is blank; state one atomic, checkable fact, e.g. 'The proposal is novel.'")
        return text

    @field_validator("weight")
    @classmethod
    def _weight_sign(cls, weight: float, info: ValidationInfo) -> float:
        is_pitfall = info.data.get("category") == "pitfall"
        if is_pitfall and weight >= 0:
            raise ValueError(f"{weight=} but a pitfall is a penalty; give it a negative weight, e.g. -0.5")
        if not is_pitfall and weight < 0:
            raise ValueError(f"{weight=} is negative; only pitfalls are penalties, so use category = \"pitfall\"")
        return weight

    @field_validator("gate")
    @classmethod
    def _gate_fits(cls, gate: Gate, info: ValidationInfo) -> Gate:
        if gate != "none" and info.data.get("weight") == 0:
            raise ValueError(f"gate {gate!r} on a zero-weight criterion; give it a weight or use gate = \"none\"")
        if gate == "none" and info.data.get("category") == "safety":
            raise ValueError('a safety criterion must not be traded for other credit; use gate = "veto" or "floor"')
        return gate

    @field_validator("stages")
    @classmethod
    def _stages_listed_once(cls, stages: tuple[Stage, ...]) -> tuple[Stage, ...]:
        # Checked here, not with min_length, so a misspelt stage is not also reported as "empty".
        if not stages:
            raise ValueError('stages is empty; list one or more of proposal, screen, dispatch, outcome: ["proposal"]')
        if len(set(stages)) != len(stages):
            raise ValueError(f"stages {list(stages)} repeat a stage; list each stage once")
        return stages


class CriterionScore(_Frozen):
    """One criterion's score for one step: the scorer's value and reason, with the criterion's weight and gate."""

    type: Literal["criterion_score"] = "criterion_score"
    schema_version: int = 1
    criterion_id: str
    value: float = Field(ge=-1.0, le=1.0, allow_inf_nan=False, description="before weighting")
    weight: float = Field(allow_inf_nan=False)
    gate: Gate
    reason: str

    @property
    def oriented_value(self) -> float:
        """The value turned so that higher is better: negated for negative-weight (pitfall) criteria."""
        return -self.value if self.weight < 0 else self.value


class RewardMix(_Frozen):
    """How a trajectory's reward mixes its parts (see ``rewards.process``).

    ``outcome_weight`` is the share of the outcome anchor (the lab's verdict, or its calibrated expectation until
    the lab answers); it must stay above 0. ``progress_weight`` is the share of potential-based progress in each
    step's reward, the rest being the step's rubric score.
    """

    outcome_weight: float = Field(default=0.5, gt=0.0, le=1.0, description="share of the outcome anchor, (0, 1]")
    progress_weight: float = Field(default=0.5, ge=0.0, le=1.0, description="share of progress in a step, [0, 1]")
    process: Literal["mean", "potential"] = Field(
        default="mean",
        exclude_if=lambda form: form == "mean",  # left out at its default, so hashes recorded before it stay valid
        description="how step rewards make the process term: 'mean' of the step rewards, or 'potential': the telescoped "
                    "progress Φ(end) − Φ(start) plus the worst step's rubric score, which extra steps cannot raise")


class Rubric(_Frozen):
    """A versioned set of criteria. ``content_hash`` identifies its exact content in the ledger."""

    type: Literal["rubric"] = "rubric"
    schema_version: int = 1
    id: str = Field(pattern=ID_PATTERN)
    version: str = Field(min_length=1)
    description: str = ""
    reward: RewardMix = RewardMix()
    criteria: tuple[Criterion, ...]

    @model_validator(mode="after")
    def _ids_unique(self) -> Rubric:
        if not self.criteria:
            raise ValueError("criteria: a rubric needs at least one criterion; add a [[criteria]] table")
        first: dict[str, int] = {}
        for index, criterion in enumerate(self.criteria):
            if criterion.id in first:
                raise ValueError(
                    f"criteria[{index}].id: criterion id {criterion.id!r} is already used by "
                    f"criteria[{first[criterion.id]}]; "
                    "give every criterion a unique id"
                )
            first[criterion.id] = index
        return self

    @property
    def content_hash(self) -> str:
        """sha256 hex digest of the canonical JSON (sorted keys, no whitespace) of the whole rubric."""
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(canonical.encode()).hexdigest()

    def criteria_for(self, stage: Stage, scope: Scope | None = None) -> tuple[Criterion, ...]:
        """The criteria scored at ``stage`` (of one ``scope`` if given), in rubric order."""
        return tuple(c for c in self.criteria if stage in c.stages and scope in (None, c.scope))

    def check_scorers(self) -> None:
        """Raise ``RewardSetupError`` if any criterion names a scorer that is not registered."""
        problems = _unknown_scorers(self)
        if problems:
            raise RewardSetupError(f"rubric {self.id!r} v{self.version}: " + "; ".join(problems))

    def score(self, context: StepContext, *, recorder: JudgeRecorder | None = None) -> list[CriterionScore]:
        """Score every criterion whose stages include ``context.stage``; scorers returning None are left out.

        Args:
            recorder: the campaign's ``rewards.judge.JudgeRecorder`` for this scoring pass, handed to every scorer
                that declares a keyword-only ``recorder`` (the LLM judge), which answers from it and records its
                calls there. Without one, judge calls are made and not kept.

        Raises:
            ScoringError: a scorer raised or returned something other than a ``ScoreValue`` or None.
        """
        scores = []
        for criterion in self.criteria_for(context.stage):
            scorer = get_scorer(criterion.scorer)
            label = f"criterion {criterion.id!r} (scorer {criterion.scorer!r})"
            label += f" at {context.stage} of {context.subject!r}"
            try:
                keywords: dict[str, Any] = {}
                if takes_criterion(scorer):
                    keywords["criterion"] = criterion
                if takes_recorder(scorer):
                    keywords["recorder"] = recorder
                result = scorer(context, **keywords)
            except Exception as exc:
                message = f"{label} raised {type(exc).__name__}: {exc}; fix the scorer (failures never score 0)"
                raise ScoringError(message) from exc
            if result is None:
                continue
            if not isinstance(result, ScoreValue):
                raise ScoringError(f"{label} returned {result!r}; return ScoreValue(value=..., reason=...) or None")
            scores.append(
                CriterionScore(
                    criterion_id=criterion.id,
                    value=result.value,
                    weight=criterion.weight,
                    gate=criterion.gate,
                    reason=result.reason,
                )
            )
        return scores

    def aggregate(self, scores: Sequence[CriterionScore]) -> float | None:
        """The step reward in [-1, 1]: the weighted mean of ``scores`` after veto and floor gates.

        The mean is ``sum(weight * value) / sum(|weight|)``. Returns None when nothing weighted applies (no scores,
        or only zero weights): "no evidence" is not 0.

        Raises:
            ScoringError: a score is for a criterion this rubric lacks, repeats one, or carries another weight or gate.
        """
        self._check_scores(scores)
        if any(s.gate == "veto" and s.oriented_value < 0 for s in scores):
            return -1.0
        total_weight = sum(abs(s.weight) for s in scores)
        if total_weight == 0:
            return None
        reward = sum(s.weight * s.value for s in scores) / total_weight
        for s in scores:
            if s.gate == "floor":
                reward = min(reward, s.oriented_value)
        return max(-1.0, min(1.0, reward))

    def _check_scores(self, scores: Sequence[CriterionScore]) -> None:
        by_id = {c.id: c for c in self.criteria}
        seen: set[str] = set()
        for s in scores:
            criterion = by_id.get(s.criterion_id)
            where = f"rubric {self.id!r} v{self.version}"
            if criterion is None:
                raise ScoringError(f"a score for {s.criterion_id!r} is not from {where}; aggregate with its own rubric")
            if s.criterion_id in seen:
                raise ScoringError(f"criterion {s.criterion_id!r} is scored twice; aggregate one step at a time")
            if (s.weight, s.gate) != (criterion.weight, criterion.gate):
                raise ScoringError(
                    f"the score for {s.criterion_id!r} has weight {s.weight} and gate {s.gate!r}, but {where} says "
                    f"{criterion.weight} and {criterion.gate!r}; rescore the step with this rubric"
                )
            seen.add(s.criterion_id)


# --------------------------------------------------------------------------------------------------- loading
def builtin_rubric_names() -> tuple[str, ...]:
    """Names of the rubrics shipped in ``rewards/rubrics/``.

    Example:
        >>> "default" in builtin_rubric_names()
        True
    """
    folder = files("rewards").joinpath("rubrics")
    return tuple(sorted(p.name.removesuffix(".toml") for p in folder.iterdir() if p.name.endswith(".toml")))


def load_rubric(source: str | os.PathLike[str]) -> Rubric:
    """Load a rubric from a TOML file path, or by built-in name (``"default"``).

    A string that ends in ``.toml`` or contains a path separator is a path; any other string is a built-in name.

    Raises:
        RewardSetupError (a ``SetupError``): missing file, bad TOML, or an invalid field, named by its path.

    Example:
        >>> load_rubric("default").criteria[1].id
        'valid_candidate'
    """
    text = str(source)
    if isinstance(source, os.PathLike) or text.endswith(".toml") or os.sep in text or "/" in text:
        path = Path(source)
        if not path.is_file():
            raise RewardSetupError(f"rubric file {str(path)!r} does not exist; check the path")
        try:
            content = read_text_file(path)  # a byte-order mark and CRLF line ends are no error
        except TextFileError as exc:
            raise RewardSetupError(f"rubric file {str(path)!r} {exc.problem}") from None
        return parse_rubric(content, source=str(path))
    if text not in builtin_rubric_names():
        raise RewardSetupError(
            f"there is no built-in rubric {text!r}; use one of {list(builtin_rubric_names())} or a path to a .toml file"
        )
    resource = files("rewards").joinpath("rubrics", f"{text}.toml")
    return parse_rubric(resource.read_text(encoding="utf-8"), source=str(resource))


def parse_rubric(toml_text: str, source: str = "<string>") -> Rubric:
    """Parse and validate rubric TOML, and check that every scorer it names is registered.

    Example:
        >>> parse_rubric('''
        ... [rubric]
        ... id = "tiny"
        ... version = "1"
        ... [[criteria]]
        ... id = "valid"
        ... text = "The proposal is a valid candidate."
        ... category = "essential"
        ... weight = 1.0
        ... stages = ["proposal"]
        ... scorer = "validity"
        ... ''').criteria[0].gate
        'none'
    """
    try:
        data = tomllib.loads(normalised_text(toml_text))
    except tomllib.TOMLDecodeError as exc:
        raise RewardSetupError(f"rubric {source} is not valid TOML: {exc}; check quotes, brackets and '='") from exc
    fields = _fields_from_toml(data, source)
    try:
        rubric = Rubric.model_validate(fields)
    except ValidationError as exc:
        problems = [_describe(error, fields) for error in exc.errors(include_url=False)]
        raise RewardSetupError(f"rubric {source} is invalid:\n  " + "\n  ".join(problems)) from exc
    problems = _unknown_scorers(rubric)
    if problems:
        raise RewardSetupError(f"rubric {source} is invalid:\n  " + "\n  ".join(problems))
    return rubric


def _fields_from_toml(data: dict[str, Any], source: str) -> dict[str, Any]:
    unknown = sorted(set(data) - {"rubric", "criteria"})
    if unknown:
        raise RewardSetupError(
            f"rubric {source}: unknown top-level key(s) {unknown}; a rubric file has a [rubric] table and [[criteria]]"
        )
    header = data.get("rubric")
    if not isinstance(header, dict):
        raise RewardSetupError(f'rubric {source}: the [rubric] table is missing; add one with id and version = "1"')
    if "criteria" in header:
        raise RewardSetupError(f"rubric {source}: rubric.criteria is not allowed; write each criterion as [[criteria]]")
    criteria = data.get("criteria", [])
    if not isinstance(criteria, list):
        raise RewardSetupError(f"rubric {source}: criteria must be an array of tables; write each one as [[criteria]]")
    return {**header, "criteria": criteria}


_HINTS = {
    "string_pattern_mismatch": "use lower-case letters, digits, '_', '.' or '-', starting with a letter",
    "missing": "add it",
}


def _describe(error: dict[str, Any], fields: dict[str, Any]) -> str:
    """One validation error as 'field path: message; hint', with the path as written in the TOML file."""
    loc = error["loc"]
    message = error["msg"].removeprefix("Value error, ")
    if loc and loc[0] == "criteria" and len(loc) > 1 and isinstance(loc[1], int):
        path = f"criteria[{loc[1]}]" + "".join(f".{part}" if isinstance(part, str) else f"[{part}]" for part in loc[2:])
        entry = fields["criteria"][loc[1]]
        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
            path += f" (criterion {entry['id']!r})"
    elif loc:
        path = ".".join(str(part) for part in loc)
        path = path if path == "criteria" else f"rubric.{path}"
    else:
        return message
    kind = error["type"]
    if kind == "extra_forbidden":
        model = Criterion if loc[0] == "criteria" else Rubric
        hint = f"remove it or fix its spelling; allowed keys are {sorted(model.model_fields)}"
    elif kind == "string_type" and loc[-1] == "version":
        hint = 'quote it, e.g. version = "1"'
    elif loc[-1] == "outcome_weight":
        hint = "the outcome anchor always stays in the mix: use a value in (0, 1], e.g. 0.5"
    else:
        hint = _HINTS.get(kind, "")
    return f"{path}: {message}" + (f"; {hint}" if hint else "")


def _unknown_scorers(rubric: Rubric) -> list[str]:
    known = set(scorer_names())
    return [
        f"criteria[{index}].scorer (criterion {c.id!r}): no scorer is registered as {c.scorer!r}; use one of "
        f"{sorted(known)}, register it with @register_scorer, or install its {ENTRY_POINT_GROUP!r} plug-in"
        for index, c in enumerate(rubric.criteria)
        if c.scorer not in known
    ]
