"""What the policy sees after each step: a frozen pydantic object for code, ``render()`` text for a language model.

An observation holds the objective, the candidates on offer with the surrogate's mean and sd, the rung results and
lab results so far, the budget left, and the answer to the last tool call or the reason the last action was
refused. It never holds the ground truth: lab results are what the lab measured, rung results what the rungs
computed, and a success bar drawn from the ground truth is left out (``success.SuccessBar.is_visible``).

``new_structures`` says whether a proposal may also write new candidates (an open space, ``[space] generate = true``:
SMILES or formulas within the space's limits) or, when it may not, why.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Budget", "EnvironmentObservation", "LabResult", "NewStructures", "ObjectiveView", "OfferedCandidate",
           "RungResult"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ObjectiveView(_Frozen):
    property: str
    unit: str = ""
    direction: Literal["maximize", "minimize", "target"]
    target: float | None = None
    tolerance: float | None = None
    success_bar: float | None = Field(default=None, description="a lab success from this value on, objective unit")


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
    value: float | None = Field(default=None, description="the measured value, objective unit")


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
        goal = (f"bring {o.property} within {o.tolerance} of {o.target}" if o.direction == "target"
                else f"{o.direction} {o.property}" + (f" ({o.unit})" if o.unit else ""))
        lines = [f"Campaign {self.campaign_id}, step {self.step}, iteration {self.iteration}.", f"Objective: {goal}."]
        if o.success_bar is not None:
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
            lines += [f"  {r.text}: " + (f"{r.value:.4g}" if r.value is not None else f"failed ({r.status})")
                      for r in self.lab_results]
        if self.rung_results:
            lines.append("Rung results so far:")
            lines += [f"  {r.rung} on {r.text}: " + (", ".join(f"{k}={v:.4g}" for k, v in r.properties.items())
                                                      or r.status) for r in self.rung_results]
        if self.is_done:
            lines.append(f"The episode has ended: {self.stop_reason}.")
            return "\n".join(lines)
        lines.append(f"Candidates on offer (surrogate mean ± sd, {o.property}):")
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
