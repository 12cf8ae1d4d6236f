"""What a scorer sees (``StepContext``) and what it returns (``ScoreValue``).

Example:
    >>> ctx = StepContext(stage="proposal", subject="CCO", arm="llm", is_valid=True)
    >>> ctx.lab_value is None, ctx.screen_statuses
    (True, {})
    >>> ScoreValue(value=1.0, reason="parses").value
    1.0
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["STAGES", "ScoreValue", "Stage", "StepContext"]

Stage = Literal["proposal", "screen", "dispatch", "outcome"]
STAGES: tuple[Stage, ...] = ("proposal", "screen", "dispatch", "outcome")


class StepContext(BaseModel):
    """One step of a campaign, as the orchestrator saw it, ready to be scored.

    Scorers read only this, so a score can be recomputed from the ledger. Utilities are the objective's utility of
    the lab value (higher is better, unitless); ``lab_value`` is in the objective property's unit.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["step_context"] = "step_context"
    schema_version: int = 1
    stage: Stage
    subject: str = Field(description="candidate id (proposal, screen) or job key (dispatch, outcome)")
    arm: str = Field(description="the arm that proposed the candidate: llm, bo, random, human or imported")
    is_valid: bool = Field(description="the proposal parsed to a valid candidate of the campaign's kind")
    reason: str | None = Field(default=None, description="the validator's message when the proposal is invalid")
    is_duplicate: bool = Field(default=False, description="same id as a tested or pending candidate")
    screen_statuses: dict[str, Literal["ok", "failed"]] = Field(
        default_factory=dict, description="fidelity rung name -> status of its simulation"
    )
    lab_value: float | None = Field(default=None, description="lab measurement; None before it or when it failed")
    utility: float | None = Field(default=None, description="objective utility of lab_value; higher is better")
    best_utility_before: float | None = Field(default=None, description="best lab utility before this result")
    n_lab_used: int = Field(default=0, ge=0, description="lab experiments already used (before this dispatch)")
    lab_budget: int = Field(default=0, ge=0, description="lab experiments the campaign may use in total")

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
