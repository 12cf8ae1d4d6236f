"""The columns of a results or history CSV beyond the first objective's: one per measured property.

A spec with several objectives or with outcome constraints measures more than one number per run
(``spec.measured_properties``). A row carries each in a column named after its property, in its unit. Every objective
needs a value in a row that has one (a run measures them all); a constraint's cell may be empty (not measured).

Example:
    >>> from types import SimpleNamespace as NS
    >>> spec = NS(objective_list=[NS(property="a"), NS(property="b")], measured_properties=["a", "b", "pdi"])
    >>> extra_properties(spec)
    (['b'], ['pdi'])
    >>> measured_cells(spec, {"a": "1", "b": "2.5", "pdi": ""}, lambda cell, column: float(cell) if cell else None)
    ({'b': 2.5}, [])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["extra_properties", "measured_cells"]


def extra_properties(spec) -> tuple[list[str], list[str]]:
    """(objective properties beyond the first, constraint properties that no objective is), in spec order."""
    objectives = [o.property for o in spec.objective_list]
    return objectives[1:], [p for p in spec.measured_properties if p not in objectives]


def measured_cells(spec, record: Mapping[str, Any],
                   number: Callable[[Any, str], float | None]) -> tuple[dict[str, float], list[str]]:
    """A row's values of every measured property beyond the first objective (``LabResult.values``), and the
    objective columns it leaves empty or lacks.

    Args:
        spec: the campaign spec.
        record: the row, column name -> cell.
        number: ``number(cell, column)``: the cell as a number, None when it is empty; raises the caller's error
            for a cell that is not a number.
    """
    objectives, constraints = extra_properties(spec)
    values: dict[str, float] = {}
    missing: list[str] = []
    for column in [*objectives, *constraints]:
        value = number(record.get(column), column)
        if value is not None:
            values[column] = value
        elif column in objectives:
            missing.append(column)
    return values, missing
