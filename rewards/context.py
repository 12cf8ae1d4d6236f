"""What a scorer sees (``StepContext``) and what it returns (``ScoreValue``).

Example:
    >>> ctx = StepContext(stage="proposal", subject="CCO", arm="llm", is_valid=True)
    >>> ctx.lab_value is None, ctx.screen_statuses
    (True, {})
    >>> ScoreValue(value=1.0, reason="parses").value
    1.0
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["STAGES", "RungResult", "ScoreValue", "Stage", "StepContext"]

Stage = Literal["plan", "proposal", "screen", "dispatch", "outcome"]
STAGES: tuple[Stage, ...] = ("plan", "proposal", "screen", "dispatch", "outcome")


class RungResult(BaseModel):
    """One rung's result for the step's candidate: its status, and its proxy in objective units with one sd."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: Literal["ok", "failed"]
    value: float | None = Field(default=None, description="the rung's proxy of the objective, objective unit")
    sd: float | None = Field(default=None, ge=0, description="one standard deviation of value, objective unit")


class StepContext(BaseModel):
    """One step of a campaign, as the orchestrator saw it, ready to be scored.

    Scorers read only this, so a score can be recomputed from the ledger. Utilities are the objective's utility of
    the lab value (higher is better, unitless); ``lab_value`` and ``expected`` are in the objective property's unit
    (the first objective's when there are several; ``lab_values`` holds every measured property and
    ``hypervolume_improvement`` the result's progress on the front).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["step_context"] = "step_context"
    schema_version: int = 2
    stage: Stage
    subject: str = Field(description="candidate id (proposal, screen), job key (dispatch, outcome) or arm (plan)")
    arm: str = Field(description="the arm that proposed the candidate: llm, bo, random, human or imported")
    is_valid: bool = Field(description="the proposal parsed to a valid candidate of the campaign's kind")
    reason: str | None = Field(default=None, description="the validator's message when the proposal is invalid")
    is_duplicate: bool = Field(default=False, description="same id as a tested or pending candidate")
    is_in_space: bool | None = Field(default=None, description="the candidate is a member of the design space")
    candidate: dict[str, Any] = Field(default_factory=dict, description="the canonical candidate, as proposed")
    hypothesis: str = Field(default="", description="the planner's hypothesis, as written")
    rationale: str = Field(default="", description="the planner's rationale, as written")
    expected: float | None = Field(default=None, description="the planner's expected objective value, objective unit")
    screen_statuses: dict[str, Literal["ok", "failed"]] = Field(
        default_factory=dict, description="fidelity rung name -> status of its simulation"
    )
    rung_results: dict[str, RungResult] = Field(default_factory=dict, description="proxy rung name -> its result")
    lab_value: float | None = Field(default=None, description="lab measurement; None before it or when it failed")
    utility: float | None = Field(default=None, description="objective utility of lab_value; higher is better")
    best_utility_before: float | None = Field(default=None, description="best lab utility before this result")
    is_lab_success: bool | None = Field(default=None, description="the lab result meets the campaign's success bar "
                                        "(several objectives: it grows the measured Pareto front)")
    lab_values: dict[str, float] = Field(
        default_factory=dict, description="several objectives or outcome constraints: every property the lab "
        "measured for this result, by name, each in its unit; empty otherwise")
    hypervolume_improvement: float | None = Field(
        default=None, ge=0.0, le=1.0, description="several objectives: the hypervolume this result adds to the front "
        "of the results before it, over the reference..ideal box volume (unitless, rewards.hypervolume); None for "
        "one objective or before the lab answered")
    meets_constraints: bool | None = Field(default=None, description="the result meets every outcome constraint; "
                                           "None without constraints")
    n_lab_used: int = Field(default=0, ge=0, description="lab experiments already used (before this dispatch)")
    lab_budget: int = Field(default=0, ge=0, description="lab experiments the campaign may use in total")
    n_slots: int = Field(default=0, ge=0, description="plan stage: lab slots the arm was offered")
    n_proposed: int = Field(default=0, ge=0, description="plan stage: distinct proposals the arm made for them")
    human_verdicts: dict[str, ScoreValue] = Field(
        default_factory=dict, description="criterion id -> a person's recorded verdict on this step"
    )

    @model_validator(mode="after")
    def _invalid_has_reason(self) -> StepContext:
        if not self.is_valid and not self.reason:
            raise ValueError("an invalid proposal must say why (reason=the validator's message)")
        return self


class ScoreValue(BaseModel):
    """A scorer's verdict on one criterion: ``value`` in [-1, 1] (+1 the statement holds, -1 it does not)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: float = Field(ge=-1.0, le=1.0, allow_inf_nan=False)
    reason: str = Field(min_length=1, description="the evidence for the value, for people and for audits")


StepContext.model_rebuild()
