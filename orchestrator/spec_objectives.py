"""The spec's objectives, how several are traded off, and outcome constraints on measured properties.

Example:
    >>> objective = ObjectiveSpec(property="size_nm", direction="min", unit="nm")
    >>> objective.direction, objective.utility(120.0)
    ('minimize', -120.0)
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import field_validator, model_validator

from orchestrator.spec_fields import SpecModel, spec_field
from vocabulary.directions import normalised_direction
from vocabulary.domain import objective_utility

__all__ = ["ObjectiveSpec", "OutcomeConstraintSpec", "TradeoffSpec", "check_objectives", "objective_tables"]


class ObjectiveSpec(SpecModel):
    """What the lab measures and which way is better.

    ``target`` direction means "hit ``target`` within ``tolerance``"; its utility is ``-|value - target|``.
    """

    property: str = spec_field("value", "name of the measured property (the column of results entered by hand)",
                               example="dg_hydration")
    unit: str = spec_field("", "the property's unit, as shown to people", example="kcal/mol")
    direction: Literal["maximize", "minimize", "target"] = spec_field(
        description="which way is better ('maximise', 'max', 'min' are read too); 'target' needs target and "
                    "tolerance", example="maximize")
    target: float | None = spec_field(None, "direction 'target': the value to hit", unit="objective unit",
                                      example=-12.0)
    tolerance: float | None = spec_field(None, "direction 'target': a hit is within this of target",
                                         unit="objective unit", example=0.5, gt=0)
    column: str | None = spec_field(None, "the pool column holding this objective's truth for the simulated lab (the "
                                      "first objective may use lab.oracle_column instead)", example="drug_loading")
    noise_sd: float | None = spec_field(None, "the simulated lab's measurement noise for this objective (sd); default: "
                                          "lab.noise_sd for the first objective, 0 for the others",
                                        unit="objective unit", example=0.3, ge=0)
    weight: float = spec_field(1.0, "tradeoff 'desirability' or 'weighted_sum': this objective's weight", example=2.0,
                               gt=0)
    bounds: tuple[float, float] | None = spec_field(
        None, "tradeoff 'desirability' (and a scaled 'weighted_sum'): the worst and the best value that matter, in "
              "that order", unit="objective unit", example=(0.0, 10.0))

    @field_validator("direction", mode="before")
    @classmethod
    def _spelling(cls, value: Any) -> Any:
        """"maximise", "Min" and the like mean what they say (``vocabulary.directions``)."""
        return normalised_direction(value)

    @model_validator(mode="after")
    def _target_needs_value(self) -> ObjectiveSpec:
        if self.direction == "target" and (self.target is None or self.tolerance is None):
            raise ValueError("direction 'target' needs both 'target' and 'tolerance' (e.g. target = -5.0, tolerance = 0.5)")
        return self

    def utility(self, value: float) -> float:
        """Higher is better, whatever the direction."""
        return objective_utility(self.direction, value, self.target)

    def is_hit(self, value: float | None, threshold: float | None = None) -> bool:
        """True when a value meets the target window, or the stop threshold for maximize/minimize."""
        if value is None or math.isnan(value):
            return False
        if self.direction == "target":
            return abs(value - self.target) <= self.tolerance
        if threshold is None:
            return False
        return value >= threshold if self.direction == "maximize" else value <= threshold


class TradeoffSpec(SpecModel):
    """How several objectives are weighed against each other (one objective: nothing to weigh).

    ``pareto`` plans on the front: expected hypervolume improvement over the measured Pareto front, above a reference
    point (the spec's, or inferred from the results and recorded). ``desirability`` is the weighted geometric mean of
    per-objective desirabilities, each linear from its ``bounds`` worst to best (BayBE's form); ``weighted_sum`` adds
    the objectives' utilities scaled to their ``bounds`` (or unscaled without them), times their weights.
    """

    method: Literal["pareto", "desirability", "weighted_sum"] | None = spec_field(
        None, "how several objectives combine; default 'pareto' for more than one", example="desirability")
    reference_point: list[float] | None = spec_field(
        None, "pareto: the worst value of each objective that still counts, one per [[objective]] in order, in their "
              "units; default: inferred from the results (BoTorch's rule: the nadir less a tenth of the range)",
        example=[0.0, 300.0])


class OutcomeConstraintSpec(SpecModel):
    """A measured property that must stay within bounds (a side product below 5 %, a diameter below 200 nm): the
    planners value a candidate by the probability that it meets every constraint, and a result that breaks one is
    never on the front."""

    property: str = spec_field(description="the measured property (a column of results entered by hand)",
                               example="side_product")
    unit: str = spec_field("", "the property's unit, as shown to people", example="%")
    lower: float | None = spec_field(None, "the lowest acceptable value", unit="property unit", example=50.0)
    upper: float | None = spec_field(None, "the highest acceptable value", unit="property unit", example=5.0)
    column: str | None = spec_field(None, "the pool column holding this property's truth for the simulated lab",
                                    example="side_product_pct")
    noise_sd: float = spec_field(0.0, "the simulated lab's measurement noise for this property (sd)",
                                 unit="property unit", example=0.5, ge=0)

    @model_validator(mode="after")
    def _has_a_bound(self) -> OutcomeConstraintSpec:
        if self.lower is None and self.upper is None:
            raise ValueError(f"constraint on {self.property!r} has neither 'lower' nor 'upper': give at least one "
                             "(e.g. upper = 5.0)")
        if self.lower is not None and self.upper is not None and self.lower > self.upper:
            raise ValueError(f"constraint on {self.property!r} has lower {self.lower} above upper {self.upper}")
        return self

    def is_met(self, value: float | None) -> bool:
        """True when ``value`` is measured and within the bounds."""
        if value is None or math.isnan(value):
            return False
        return (self.lower is None or value >= self.lower) and (self.upper is None or value <= self.upper)


def objective_tables(data: Any) -> Any:
    """The raw spec with its TOML tables named: ``[[objective]]`` (a list under "objective") is every
    objective, the first one ``objective``; ``[[constraint]]`` is ``constraints``."""
    if not isinstance(data, dict):
        return data
    data = dict(data)
    if "constraint" in data:
        if "constraints" in data:
            raise ValueError("give the outcome constraints once, as [[constraint]] tables")
        data["constraints"] = data.pop("constraint")
    listed = data.get("objective")
    if isinstance(listed, list):
        if not listed:
            raise ValueError("[[objective]] is empty: give at least one objective")
        if data.get("objectives") not in (None, [], listed):
            raise ValueError("give the objectives once: [[objective]] tables, or 'objective' with 'objectives'")
        data["objective"] = listed[0]
        data["objectives"] = list(listed) if len(listed) > 1 else []
    first, lab = data.get("objective"), data.get("lab")
    if isinstance(first, dict) and first.get("column") and isinstance(lab, dict) and not any(
            lab.get(k) is not None for k in ("oracle_column", "oracle", "oracle_simulator")):
        data["lab"] = {**lab, "oracle_column": first["column"]}  # the first objective's column is the lab's truth
    return data


def check_objectives(self: Any) -> None:
    """Refuse, in a ``CampaignSpec`` (``self``): objectives listed twice, a reference point of the wrong length,
    desirability without bounds, a constraint given twice, and (simulated lab) an objective or constraint with no
    ground-truth column."""
    objectives = self.objective_list
    if self.objectives and self.objectives[0] != self.objective:
        raise ValueError("'objective' and the first of 'objectives' differ: give the objectives once, as "
                         "[[objective]] tables")
    seen: dict[str, int] = {}
    for i, objective in enumerate(objectives):
        if objective.property in seen:
            raise ValueError(f"objective[{i}].property {objective.property!r} is listed twice (also "
                             f"objective[{seen[objective.property]}]): each objective measures its own property")
        seen[objective.property] = i
    names = ", ".join(o.property for o in objectives)
    point = self.tradeoff.reference_point
    if point is not None and len(point) != len(objectives):
        raise ValueError(f"tradeoff.reference_point has {len(point)} value(s) for {len(objectives)} objective(s) "
                         f"({names}): give one per objective, in the order of [[objective]]")
    if self.tradeoff.method == "desirability":
        unbounded = [o.property for o in objectives if o.bounds is None]
        if unbounded:
            raise ValueError(f"tradeoff.method 'desirability' needs bounds = [worst, best] on every objective; "
                             f"{unbounded} have none")
    for i, objective in enumerate(objectives):
        if objective.bounds is not None and objective.bounds[0] == objective.bounds[1]:
            raise ValueError(f"objective[{i}].bounds {list(objective.bounds)} is empty: give worst and best apart")
    for i, rung in enumerate(self.ladder):
        if rung.estimates is None:
            continue
        if not rung.proxy:
            raise ValueError(f"ladder[{i}].estimates {rung.estimates!r} needs a proxy: the rung property that "
                             "estimates it (proxy = \"<property>\")")
        if rung.estimates not in seen:
            raise ValueError(f"ladder[{i}].estimates {rung.estimates!r} is not an objective; give one of: {names}")
    seen_constraints = set()
    for i, constraint in enumerate(self.constraints):
        if constraint.property in seen_constraints:
            raise ValueError(f"constraint[{i}].property {constraint.property!r} is constrained twice: give one "
                             "table with both lower and upper")
        seen_constraints.add(constraint.property)
    if self.lab.driver != "simlab" or self.lab.oracle_simulator:
        return
    for i, objective in enumerate(objectives[1:], start=1):
        if objective.column is None:
            raise ValueError(f"objective[{i}] {objective.property!r} has no column: the simulated lab reads each "
                             "objective beyond the first from a pool column; set column = \"<pool column>\"")
    for i, constraint in enumerate(self.constraints):
        if constraint.column is None and constraint.property not in seen:
            raise ValueError(f"constraint[{i}].property {constraint.property!r} is neither an objective nor read "
                             "from a pool column by the simulated lab: set column = \"<pool column>\" or measure "
                             "it as an objective")
