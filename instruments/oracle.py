"""Ground truth for simulated labs: a table of measured values or a plain function.

An oracle is any callable ``oracle(candidate) -> float`` with a ``property`` attribute naming what it returns (in the
objective's unit). It raises ``InstrumentFault`` when it has no answer; a simulated lab turns that into a failed
job with the message as its reason.

Some properties cannot be measured outside a range whatever the noise (a yield in percent lies in 0..100):
``unit_bounds`` names those ranges, and the simulated lab keeps its readings within them.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

from vocabulary.domain import InstrumentFault, SetupError

__all__ = ["UNIT_BOUNDS", "FunctionOracle", "MeasuredProperty", "Oracle", "TableOracle", "unit_bounds"]

#: Units whose values a measurement cannot leave, whatever its noise: unit -> (lowest, highest).
UNIT_BOUNDS: Mapping[str, tuple[float, float]] = MappingProxyType({"%": (0.0, 100.0), "percent": (0.0, 100.0)})


def unit_bounds(unit: str | None) -> tuple[float, float] | None:
    """The range a reading in ``unit`` stays in (``UNIT_BOUNDS``), or None for an unbounded unit.

    Example:
        >>> unit_bounds("%"), unit_bounds(" % "), unit_bounds("kcal/mol")
        ((0.0, 100.0), (0.0, 100.0), None)
    """
    return None if unit is None else UNIT_BOUNDS.get(unit.strip().lower())


@dataclass(frozen=True)
class MeasuredProperty:
    """A property a simulated lab measures beside the objective: its truth, its noise (sd, its unit), its unit (a
    bounded unit keeps readings in range, as ``unit_bounds`` says) and whether it must have a value.

    Example:
        >>> m = MeasuredProperty(lambda c: 101.0, noise_sd=0.0, unit="%")
        >>> m.clip(101.0), m.clip(-3.0)
        (100.0, 0.0)
    """

    oracle: Callable[[Any], float]
    noise_sd: float = 0.0
    unit: str = ""
    is_required: bool = True
    """Whether a point without a truth fails the job (an objective); else the property is left unmeasured."""

    def clip(self, value: float) -> float:
        """``value`` held within the unit's bounds."""
        bounds = unit_bounds(self.unit)
        return value if bounds is None else min(max(value, bounds[0]), bounds[1])


@runtime_checkable
class Oracle(Protocol):
    """Ground truth for one property: ``oracle(candidate) -> float``."""

    property: str

    def __call__(self, candidate: Any) -> float: ...


class TableOracle:
    """Looks up ``candidate.id`` in a table of measured values.

    Args:
        values: candidate id -> true value of ``property``. NaN marks a row without a measurement.
        property: name of the measured property.

    Example:
        >>> from vocabulary.domain import Conditions
        >>> oracle = TableOracle({"c1": 0.8}, property="yield")
        >>> oracle(Conditions(values={"T": 25.0}, id="c1"))
        0.8
        >>> oracle(Conditions(values={"T": 30.0}, id="c2"))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        vocabulary.domain.InstrumentFault: the lab table for 'yield' has no row for candidate id 'c2' (1 rows); ...
    """

    def __init__(self, values: Mapping[str, float], property: str = "value") -> None:
        try:
            self._values = MappingProxyType({str(k): float(v) for k, v in values.items()})
        except (TypeError, ValueError) as exc:
            raise SetupError(f"lab table for {property!r} must map candidate ids to numbers ({exc})") from exc
        self.property = property

    @classmethod
    def from_csv(cls, path: str | Path, value_column: str, id_column: str = "id") -> TableOracle:
        """Read a table from a CSV file with a header; empty cells become NaN (no measurement)."""
        with open(path, newline="", encoding="utf-8-sig") as handle:  # a byte-order mark is no column name
            reader = csv.DictReader(handle)
            columns = reader.fieldnames or []
            missing = [c for c in (id_column, value_column) if c not in columns]
            if missing:
                # quote a CSV's header, never another file's first line
                from vocabulary.header_text import columns_text

                raise SetupError(f"{path} has no column(s) {missing}; {columns_text(path, columns)}")
            values = {row[id_column]: (float(row[value_column]) if row[value_column] else math.nan) for row in reader}
        return cls(values, property=value_column)

    def __call__(self, candidate: Any) -> float:
        candidate_id = candidate.id
        try:
            value = self._values[candidate_id]
        except KeyError:
            raise InstrumentFault(
                f"the lab table for {self.property!r} has no row for candidate id {candidate_id!r} "
                f"({len(self._values)} rows); add a row for it or restrict the design space to the table's ids"
            ) from None
        if math.isnan(value):
            raise InstrumentFault(
                f"the lab table row for candidate id {candidate_id!r} has no {self.property!r} value (NaN); "
                "fill it in or drop the row"
            )
        return value

    def __contains__(self, candidate_id: object) -> bool:
        return candidate_id in self._values

    def __len__(self) -> int:
        return len(self._values)

    @property
    def values(self) -> Mapping[str, float]:
        """Read-only view of the table."""
        return self._values

    def __repr__(self) -> str:
        return f"TableOracle(<{len(self._values)} rows>, property={self.property!r})"


class FunctionOracle:
    """Wraps ``fn(candidate) -> float`` as an oracle for ``property``.

    Example:
        >>> from vocabulary.domain import Conditions
        >>> oracle = FunctionOracle(lambda c: 100.0 - (c.values["T"] - 60.0) ** 2, property="yield")
        >>> oracle(Conditions(values={"T": 58.0}, id="c1"))
        96.0
    """

    def __init__(self, fn: Callable[[Any], float], property: str = "value") -> None:
        if not callable(fn):
            raise SetupError(f"FunctionOracle needs a callable, got {fn!r}")
        self.fn = fn
        self.property = property

    def __call__(self, candidate: Any) -> float:
        raw = self.fn(candidate)
        try:
            return float(raw)
        except (TypeError, ValueError) as exc:
            raise InstrumentFault(
                f"oracle for {self.property!r} returned {raw!r} for candidate {candidate.id!r}, not a number"
            ) from exc

    def __repr__(self) -> str:
        return f"FunctionOracle({getattr(self.fn, '__name__', self.fn)!r}, property={self.property!r})"
