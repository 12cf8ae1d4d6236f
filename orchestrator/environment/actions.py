"""What a policy may do in one environment step: propose candidates, or call a tool.

- ``ProposeAction``: candidates from the offer (labels ``o03`` or pool ids) for the lab slots, with a hypothesis; in an
  open space (``[space] generate = true``) also new structures: SMILES for molecules, formulas for materials.
- ``RunRungAction``: run one rung of the campaign's ladder on one candidate (recorded as ``Simulated``), named by
  an offer label or pool id, or in an open space written out as a new structure.
- ``QuerySurrogateAction``: the surrogate's mean and sd for candidates (offer labels, pool ids, and in an open space
  new structures).
- ``QueryLedgerAction``: what the campaign's ledger holds so far (proposals, lab results, rung results), newest
  last; it shows what was measured and proposed, never the ground truth.

Actions arrive as these models, as dicts or as JSON text (a language model's reply); ``parse_action`` turns each
into a model or raises ``InvalidAction`` saying what is wrong and how to fix it.

Example:
    >>> parse_action('{"type": "propose", "candidate_ids": ["o01"], "hypothesis": "the bulky ligand"}').candidate_ids
    ['o01']
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from vocabulary.domain import ClosedLoopError

__all__ = ["Action", "InvalidAction", "ProposeAction", "QueryLedgerAction", "QuerySurrogateAction", "RunRungAction",
           "parse_action"]


class InvalidAction(ClosedLoopError):
    """The action cannot be carried out; the message says why and what to send instead."""


class _Action(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    schema_version: int = 1


class ProposeAction(_Action):
    type: Literal["propose"] = "propose"
    candidate_ids: list[str] = Field(default_factory=list, description="offer labels (o00, o01, …) or pool ids")
    structures: list[str] = Field(default_factory=list, max_length=64, description=(
        "open spaces only: new candidates written out, SMILES for molecules, formulas (e.g. 'LiFePO4') for materials"))
    hypothesis: str = Field(default="", max_length=2000)
    rationale: str = Field(default="", max_length=2000)
    expected: float | None = Field(default=None, description="expected lab value, objective unit")

    @model_validator(mode="after")
    def _names_something(self) -> ProposeAction:
        if not self.candidate_ids and not self.structures:
            raise ValueError("a proposal names at least one candidate: offer labels in candidate_ids, or (open "
                             "spaces) SMILES or formulas in structures")
        return self


_STRUCTURE = "open spaces only: a candidate written out, a SMILES for molecules or a formula for materials"


class RunRungAction(_Action):
    type: Literal["run_rung"] = "run_rung"
    rung: str
    candidate_id: str | None = Field(default=None, description="an offer label or a pool id")
    structure: str | None = Field(default=None, max_length=2000, description=_STRUCTURE)

    @model_validator(mode="after")
    def _names_one(self) -> RunRungAction:
        if (self.candidate_id is None) == (self.structure is None):
            raise ValueError("run_rung names exactly one candidate: an offer label or pool id in candidate_id, or "
                             "(open spaces) a SMILES or formula in structure")
        return self


class QuerySurrogateAction(_Action):
    type: Literal["query_surrogate"] = "query_surrogate"
    candidate_ids: list[str] = Field(default_factory=list, max_length=64, description="offer labels or pool ids")
    structures: list[str] = Field(default_factory=list, max_length=64, description=_STRUCTURE + "s")

    @model_validator(mode="after")
    def _names_something(self) -> QuerySurrogateAction:
        if not self.candidate_ids and not self.structures:
            raise ValueError("query_surrogate names at least one candidate: offer labels or pool ids in "
                             "candidate_ids, or (open spaces) SMILES or formulas in structures")
        if len(self.candidate_ids) + len(self.structures) > 64:
            raise ValueError("query_surrogate names at most 64 candidates at once")
        return self


class QueryLedgerAction(_Action):
    type: Literal["query_ledger"] = "query_ledger"
    what: Literal["summary", "proposals", "lab_results", "rung_results"] = Field(
        default="summary", description="summary: counts and the best lab result; the others list records")
    limit: int = Field(default=20, ge=1, le=200, description="the newest records to return")


Action = Annotated[ProposeAction | RunRungAction | QuerySurrogateAction | QueryLedgerAction,
                   Field(discriminator="type")]
_ADAPTER: TypeAdapter = TypeAdapter(Action)
_EXAMPLE = '{"type": "propose", "candidate_ids": ["o00"], "hypothesis": "..."}'


def parse_action(raw: Any) -> ProposeAction | RunRungAction | QuerySurrogateAction | QueryLedgerAction:
    """An action model from a model, a dict or JSON text; ``InvalidAction`` otherwise."""
    if isinstance(raw, ProposeAction | RunRungAction | QuerySurrogateAction | QueryLedgerAction):
        return raw
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InvalidAction(f"the action is not JSON ({exc.msg} at character {exc.pos}); send e.g. {_EXAMPLE}") from None
    if not isinstance(raw, dict):
        raise InvalidAction(f"an action is a JSON object, not {type(raw).__name__}; send e.g. {_EXAMPLE}")
    try:
        return _ADAPTER.validate_python(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'action'}: {e['msg']}" for e in exc.errors())
        raise InvalidAction(f"invalid action ({problems}); the types are 'propose', 'run_rung', "
                            f"'query_surrogate' and 'query_ledger', e.g. {_EXAMPLE}") from None
