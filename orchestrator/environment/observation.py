"""What the policy sees after each step: a frozen pydantic object for code, ``render()`` text for a language model.

An observation holds the objective, the candidates on offer with the surrogate's mean and sd, the rung results and
lab results so far, the budget left, and the answer to the last tool call or the reason the last action was
refused. It never holds the ground truth: lab results are what the lab measured, rung results what the rungs
computed, and a success bar drawn from the ground truth is left out (``success.SuccessBar.is_visible``).

``new_structures`` says whether a proposal may also write new candidates (an open space, ``[space] generate = true``:
SMILES or formulas within the space's limits) or, when it may not, why.

Several objectives: ``objectives`` lists every one (name, unit, direction, target) in the spec's order and
``constraints`` the outcome constraints; each lab result's ``values`` holds every property the lab measured, and
``front`` says which results are on the measured Pareto front and its hypervolume. One objective leaves all four
empty (``objective`` alone describes it), so its observation is what it was.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Budget", "ConstraintView", "EnvironmentObservation", "FrontView", "LabResult", "NewStructures",
           "ObjectiveView", "OfferedCandidate", "RungResult", "constraint_views", "measured_values", "objective_views"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ObjectiveView(_Frozen):
    property: str
    unit: str = ""
    direction: Literal["maximize", "minimize", "target"]
    target: float | None = None
    tolerance: float | None = None
    success_bar: float | None = Field(default=None, description="a lab success from this value on, objective unit")


class ConstraintView(_Frozen):
    """An outcome constraint: a result counts only when ``lower <= property <= upper`` (its unit)."""

    property: str
    unit: str = ""
    lower: float | None = None
    upper: float | None = None

    def describe(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        if self.lower is not None and self.upper is not None:
            return f"{self.lower:g}{unit} <= {self.property} <= {self.upper:g}{unit}"
        if self.lower is not None:
            return f"{self.property} >= {self.lower:g}{unit}"
        return f"{self.property} <= {self.upper:g}{unit}"


class FrontView(_Frozen):
    """The measured Pareto front (several objectives): its candidates, hypervolume and reference point."""

    candidate_ids: tuple[str, ...] = Field(description="the non-dominated lab results that meet every constraint")
    hypervolume: float = Field(description="above the reference point, the product of the objectives' units")
    reference_point: tuple[float, ...] = Field(description="objective units, in the objectives' order")
    reference_inferred: bool = Field(description="True: inferred from the results (nadir less a tenth of the range)")


def objective_views(spec, success_bar: float | None) -> tuple[ObjectiveView, tuple[ObjectiveView, ...]]:
    """(the first objective, every objective when there are several else ()) of ``spec`` as the policy sees them;
    ``success_bar`` (first objective's unit) goes on the first only."""
    views = tuple(ObjectiveView(property=o.property, unit=o.unit, direction=o.direction, target=o.target,
                                tolerance=o.tolerance, success_bar=success_bar if k == 0 else None)
                  for k, o in enumerate(spec.objective_list))
    return views[0], views if spec.is_multi_objective else ()


def constraint_views(spec) -> tuple[ConstraintView, ...]:
    return tuple(ConstraintView(property=c.property, unit=c.unit, lower=c.lower, upper=c.upper)
                 for c in spec.constraints)


def measured_values(first_property: str, payload: dict[str, Any]) -> dict[str, float]:
    """Every property an ``Observed`` payload measured (the first objective's ``value`` first), by name; {} when it
    measured only the first objective's (one objective, no constraints) or failed."""
    others = payload.get("values") or {}
    if payload.get("status") != "ok" or payload.get("value") is None or not others:
        return {}
    return {first_property: float(payload["value"]), **{k: float(v) for k, v in others.items()}}


class OfferedCandidate(_Frozen):
    label: str = Field(description="o00, o01, …: what a proposal or a tool call may name")
    candidate_id: str
    text: str
    mean: float | None = Field(default=None, description="surrogate mean, objective unit; None before it exists")
    sd: float | None = Field(default=None, description="surrogate standard deviation, objective unit")


class RungResult(_Frozen):
    candidate_id: str
    text: str
    rung: str
    status: str
    properties: dict[str, float] = Field(default_factory=dict)


class LabResult(_Frozen):
    candidate_id: str
    text: str
    status: str
    value: float | None = Field(default=None, description="the measured value, objective unit (the first "
                                "objective's when there are several)")
    values: dict[str, float] = Field(default_factory=dict, description="several objectives or outcome constraints: "
                                     "every measured property by name, each in its unit; empty otherwise")


class Budget(_Frozen):
    lab_experiments: int = Field(description="the episode's lab budget, experiments")
    lab_experiments_left: int
    n_pending: int = Field(description="lab jobs running now")
    compute_s_used: float = Field(description="simulator compute charged so far, seconds")


class NewStructures(_Frozen):
    """Whether a proposal may write new candidates (``structures``), in what syntax and within which limits."""

    is_open: bool = Field(description="True: a proposal's 'structures' may name candidates outside the pool")
    syntax: Literal["smiles", "formula"] | None = Field(default=None, description="how a new candidate is written")
    max_heavy_atoms: int | None = Field(default=None, description="molecules: the largest allowed, heavy atoms")
    max_atoms: int | None = Field(default=None, description="materials: the largest formula unit allowed, atoms")
    elements: tuple[str, ...] | None = Field(default=None, description="allowed element symbols (None: any)")
    reason: str | None = Field(default=None, description="why new structures are refused, when they are")

    def describe(self) -> str:
        """One sentence for a language model."""
        if not self.is_open:
            return f"New structures cannot be proposed: {self.reason}."
        what = "molecules as SMILES" if self.syntax == "smiles" else "materials as formulas (e.g. LiFePO4)"
        limits = [f"at most {self.max_heavy_atoms} heavy atoms" if self.max_heavy_atoms else "",
                  f"at most {self.max_atoms} atoms per formula unit" if self.max_atoms else "",
                  f"only the elements {', '.join(self.elements)}" if self.elements else ""]
        limits = [x for x in limits if x]
        example = "CCOC(=O)C" if self.syntax == "smiles" else "NaCl"
        return (f"The design space is open: a proposal may also write new {what} in \"structures\""
                + (f" ({'; '.join(limits)})" if limits else "")
                + f", e.g. {{\"type\": \"propose\", \"structures\": [\"{example}\"], \"hypothesis\": \"why\"}}; "
                  "each new one is validated, screened and measured like an offered candidate. The tools take new "
                  "structures too: run_rung(rung, structure) and query_surrogate(structures).")


CLOSED_SPACE = NewStructures(is_open=False, reason="the design space is a fixed pool; propose from the offer")


class EnvironmentObservation(_Frozen):
    type: Literal["environment_observation"] = "environment_observation"
    schema_version: int = 1
    campaign_id: str
    step: int
    iteration: int
    objective: ObjectiveView
    objectives: tuple[ObjectiveView, ...] = Field(default=(), description="several objectives: every one, in the "
                                                  "spec's order (the first is ``objective``); () for one")
    tradeoff: str | None = Field(default=None, description="several objectives: pareto, desirability or "
                                 "weighted_sum")
    constraints: tuple[ConstraintView, ...] = Field(default=(), description="outcome constraints a result must meet")
    front: FrontView | None = Field(default=None, description="several objectives: the measured Pareto front")
    offer: tuple[OfferedCandidate, ...] = ()
    n_to_propose: int = Field(description="lab slots to fill now (0 once the episode has ended)")
    new_structures: NewStructures = Field(default=CLOSED_SPACE, description="whether a proposal may write new "
                                          "candidates (SMILES or formulas) besides the offer")
    rungs: tuple[str, ...] = Field(default=(), description="rungs a run_rung call may name")
    rung_results: tuple[RungResult, ...] = ()
    lab_results: tuple[LabResult, ...] = ()
    budget: Budget
    tool_result: dict[str, Any] | None = None
    error: str | None = Field(default=None, description="why the last action was refused")
    is_done: bool = False
    stop_reason: str | None = None

    def render(self) -> str:
        """The observation as text for a language model."""
        o = self.objective
        lines = [f"Campaign {self.campaign_id}, step {self.step}, iteration {self.iteration}."]
        if self.objectives:
            how = {"pareto": "traded off as a Pareto front (grow its hypervolume)",
                   "desirability": "combined as a weighted desirability",
                   "weighted_sum": "combined as a weighted sum"}.get(self.tradeoff or "pareto", self.tradeoff)
            lines.append(f"Objectives ({len(self.objectives)}, {how}): "
                         + "; ".join(_goal(view) for view in self.objectives) + ".")
        else:
            lines.append(f"Objective: {_goal(o)}.")
        if self.constraints:
            lines.append("A result counts only if " + " and ".join(c.describe() for c in self.constraints) + ".")
        if o.success_bar is not None and not self.objectives:
            lines.append(f"A lab result of {o.success_bar:g} or better counts as a success.")
        b = self.budget
        lines.append(f"Lab budget: {b.lab_experiments_left} of {b.lab_experiments} experiments left, "
                     f"{b.n_pending} running; simulator compute used: {b.compute_s_used:g} s.")
        if self.error:
            lines.append(f"ERROR: your last action was refused: {self.error}")
        if self.tool_result is not None:
            lines.append("Tool result: " + json.dumps(self.tool_result, separators=(",", ":")))
        if self.lab_results:
            lines.append("Lab results so far:")
            on_front = set(self.front.candidate_ids) if self.front is not None else set()
            lines += [f"  {r.text}: " + (_measured(r) if r.value is not None else f"failed ({r.status})")
                      + (" [on the Pareto front]" if r.candidate_id in on_front else "") for r in self.lab_results]
        if self.front is not None:
            names = [view.property for view in self.objectives]
            reference = ", ".join(f"{n}={v:.4g}" for n, v in zip(names, self.front.reference_point, strict=False))
            lines.append(f"Pareto front: {len(self.front.candidate_ids)} result(s), hypervolume "
                         f"{self.front.hypervolume:.4g} above the reference point ({reference}"
                         + (", inferred" if self.front.reference_inferred else "") + ").")
        if self.rung_results:
            lines.append("Rung results so far:")
            lines += [f"  {r.rung} on {r.text}: " + (", ".join(f"{k}={v:.4g}" for k, v in r.properties.items())
                                                      or r.status) for r in self.rung_results]
        if self.is_done:
            lines.append(f"The episode has ended: {self.stop_reason}.")
            return "\n".join(lines)
        what = "trade-off utility, higher is better" if self.objectives else o.property
        lines.append(f"Candidates on offer (surrogate mean ± sd, {what}):")
        for c in self.offer:
            guess = f"{c.mean:.4g} ± {c.sd:.3g}" if c.mean is not None and c.sd is not None else "no prediction yet"
            lines.append(f"  {c.label}: {c.text} [{guess}]")
        tools = "query_surrogate(candidate_ids)" + (f", run_rung(rung in {list(self.rungs)}, candidate_id)"
                                                    if self.rungs else "")
        tools += ", query_ledger(what in ['summary', 'proposals', 'lab_results', 'rung_results'])"
        lines.append(f"Propose {self.n_to_propose} candidate(s) from the offer as JSON, e.g. "
                     '{"type": "propose", "candidate_ids": ["o00"], "hypothesis": "why"}; '
                     f"or call a tool: {tools}.")
        if self.new_structures.is_open:
            lines.append(self.new_structures.describe())
        return "\n".join(lines)


def _goal(o: ObjectiveView) -> str:
    if o.direction == "target":
        return f"bring {o.property} within {o.tolerance} of {o.target}"
    return f"{o.direction} {o.property}" + (f" ({o.unit})" if o.unit else "")


def _measured(r: LabResult) -> str:
    if r.values:
        return ", ".join(f"{name}={value:.4g}" for name, value in r.values.items())
    return f"{r.value:.4g}"
