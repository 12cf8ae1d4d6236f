"""The spec's building blocks: the frozen model every section derives from, and the documented field."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["SpecModel", "spec_field"]


def spec_field(default: Any = ..., description: str = "", *, unit: str | None = None, example: Any = None,
               **constraints: Any) -> Any:
    """A documented spec field: its description, unit and example land in the JSON Schema and docs/spec.md."""
    return Field(default, description=description, examples=None if example is None else [example],
                 json_schema_extra={"unit": unit} if unit else None, **constraints)


class SpecModel(BaseModel):
    """A spec section: frozen, no unknown keys, no NaN or infinity."""

    # TOML writes nan and inf; no number of a spec means either (a NaN target makes every utility NaN)
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
