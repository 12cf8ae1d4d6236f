"""A column of a dataset acting as a rung of the fidelity ladder.

Public benchmarks often carry a cheap computed column next to the measured one (FreeSolv's ``calc`` next to
``expt``). ``TableSimulator`` serves such a column by candidate id, the way ASE's ``SinglePointCalculator`` serves
stored results, so the ladder gets real low-fidelity data without running anything.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from simulators.base import CANDIDATE_KINDS, AnyCandidate, BaseSimulator, Result
from vocabulary.domain import SetupError, SimulationFailed

__all__ = ["TableSimulator"]


class TableSimulator(BaseSimulator):
    """Look up one property by ``candidate.id`` in a fixed table.

    Args:
        name: rung name, used as the observation ``source`` (e.g. ``"freesolv_calc"``).
        values: candidate id -> value, in the property's unit. NaN marks a known gap.
        property: the property name the values are reported under.
        fidelity: rung order.
        cost_s: cost charged per candidate, in seconds (what the original calculation would have cost).
        version: bump it when the table's meaning changes; the table's content hash is in ``parameters`` anyway.
        applies_to: candidate kinds the table holds.
        uncertainty: one standard deviation reported with every value, in the property's unit, if known.

    A missing id or a NaN value gives a failed observation that says so.

    Example:
        >>> from vocabulary.domain import Molecule
        >>> ethanol, water = Molecule.parse("CCO"), Molecule.parse("O")
        >>> table = TableSimulator("freesolv_calc", {ethanol.id: -4.9}, "dg_hydration", cost_s=60.0)
        >>> [(o.status, o.properties, o.cost_s) for o in table.evaluate([ethanol, water])]
        [('ok', {'dg_hydration': -4.9}, 60.0), ('failed', {}, 60.0)]
    """

    def __init__(
        self,
        name: str,
        values: Mapping[str, float],
        property: str,
        *,
        fidelity: int = 0,
        cost_s: float = 0.0,
        version: str = "1",
        applies_to: Iterable[str] = ("molecule", "material", "conditions"),
        uncertainty: float | None = None,
    ) -> None:
        kinds = frozenset([applies_to] if isinstance(applies_to, str) else applies_to)
        if not kinds or not kinds <= CANDIDATE_KINDS:
            raise SetupError(f"table {name!r}: applies_to={sorted(kinds)} must name some of {sorted(CANDIDATE_KINDS)}")
        if not isinstance(property, str) or not property:
            raise SetupError(f"table {name!r}: property={property!r} must be a non-empty name, e.g. 'dg_hydration'")
        if not isinstance(values, Mapping):
            raise SetupError(
                f"table {name!r}: values must be a mapping of candidate id to number, not {type(values).__name__}"
            )
        self.name = name
        self.version = version
        self.fidelity = fidelity
        self.implemented_properties = (property,)
        self.applies_to = kinds
        self.property = property
        self.values = _float_values(name, values)
        self.cost_s = _non_negative(name, "cost_s", cost_s)
        self.uncertainty = None if uncertainty is None else _non_negative(name, "uncertainty", uncertainty)
        super().__init__(
            {
                "property": property,
                "cost_s": self.cost_s,
                "uncertainty": self.uncertainty,
                "n_values": len(self.values),
                "values_sha256": _digest(self.values),
            }
        )

    def cost_model(self, candidate: AnyCandidate) -> float:
        """The fixed per-candidate cost, in seconds."""
        return self.cost_s

    def calculate(self, candidate: AnyCandidate) -> Result:
        """The stored value for ``candidate.id``; ``SimulationFailed`` if it is missing or NaN."""
        if candidate.id not in self.values:
            raise SimulationFailed(
                f"{candidate.id!r} is not in table {self.name!r} ({len(self.values)} entries); "
                "this rung has no value for it"
            )
        value = self.values[candidate.id]
        if math.isnan(value):
            raise SimulationFailed(f"table {self.name!r} has NaN for {candidate.id!r} ({self.property})")
        sd = {} if self.uncertainty is None else {self.property: self.uncertainty}
        return Result({self.property: value}, sd)


def _float_values(name: str, values: Mapping[str, Any]) -> dict[str, float]:
    converted = {}
    for key, value in values.items():
        try:
            converted[str(key)] = float(value)
        except (TypeError, ValueError) as exc:
            raise SetupError(f"table {name!r}: value {value!r} for {key!r} is not a number; use NaN for a gap") from exc
    return converted


def _non_negative(name: str, label: str, value: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError) as exc:
        raise SetupError(f"table {name!r}: {label}={value!r} is not a number") from exc
    if not math.isfinite(number) or number < 0:
        raise SetupError(f"table {name!r}: {label}={value!r} must be finite and >= 0")
    return number


def _digest(values: Mapping[str, float]) -> str:
    # NaN is written as the JSON extension token NaN; the text only feeds the hash.
    text = json.dumps(sorted(values.items()), allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
