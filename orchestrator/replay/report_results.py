"""Every lab result of a campaign, as the report's results table and ``results.csv``: the candidate by its own columns
(SMILES, formula or condition values, never its id), the value in the objective's unit with its uncertainty, the
arm, the iteration and the status, numbers rounded to their precision (``vocabulary.numbers``).

The full-precision values stay in the ledger (``closedloop results export``, ``closedloop show --json``); the report
is for reading, so it carries only the digits a measurement supports.

Example:
    >>> from orchestrator.ledger import Ledger
    >>> from vocabulary.events import CampaignStarted
    >>> ledger = Ledger.open(":memory:")
    >>> _ = ledger.append("c1", CampaignStarted(name="demo", seed=0, spec={}), key="started")
    >>> lab_results(ledger, "c1")
    []
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from orchestrator.ledger import Ledger
from orchestrator.replay.candidates import recorded_candidates
from orchestrator.space.pool import describe
from orchestrator.spec import CampaignSpec
from vocabulary.domain import Candidate, Conditions
from vocabulary.events import Dispatched, Observed
from vocabulary.numbers import DIGITS, rounded_float

__all__ = ["LabResult", "best_results", "best_so_far_result", "candidate_columns", "lab_results", "other_properties",
           "results_columns", "results_rows"]


@dataclass(frozen=True)
class LabResult:
    """One recorded result: ``n`` is its 1-based place in recording order; ``lab_hours`` its lab-clock time since
    the first dispatch (None for a result imported as history); ``sd`` the uncertainty the lab reported, in the
    objective's unit."""

    n: int
    iteration: int
    arm: str
    candidate_id: str
    candidate: Candidate | None
    label: str
    value: float | None
    sd: float | None
    status: str
    reason: str | None
    provenance: str
    lab_hours: float | None
    values: dict[str, float] = field(default_factory=dict)
    """Every other measured property (objectives after the first, outcome constraints), by name, in its unit."""


def lab_results(ledger: Ledger, campaign_id: str) -> list[LabResult]:
    """Every ``Observed`` result of the campaign in recording order, imported history and off-plan measurements
    included (``provenance``)."""
    candidates = recorded_candidates(ledger, campaign_id)
    starts = [e.payload["sim_time_s"] for e in ledger.events(campaign_id, types=[Dispatched.type])]
    origin = min(starts) if starts else 0.0
    rows = []
    for n, event in enumerate(ledger.events(campaign_id, types=[Observed.type]), start=1):
        observed = event.typed()
        candidate = candidates.get(observed.candidate_id)
        rows.append(LabResult(
            n=n, iteration=observed.iteration, arm=observed.arm, candidate_id=observed.candidate_id,
            candidate=candidate, label=describe(candidate) if candidate is not None else observed.candidate_id,
            value=observed.value, sd=observed.uncertainty, status=observed.status, reason=observed.reason,
            provenance=_provenance(observed),
            lab_hours=None if observed.provenance == "imported" and not _is_off_plan(observed)
            else (observed.sim_time_s - origin) / 3600.0,
            values=dict(observed.values)))
    return rows


def _is_off_plan(observed: Observed) -> bool:
    """A measurement a person entered for a candidate no job asked for (``loop.manual_results``)."""
    return observed.provenance == "imported" and observed.driver.startswith("manual:")


def _provenance(observed: Observed) -> str:
    """``lab`` (a job's result), ``off-plan`` (entered by hand outside the plan) or ``imported`` (past history)."""
    return "off-plan" if _is_off_plan(observed) else observed.provenance


def _measured(results: list[LabResult]) -> list[LabResult]:
    return [r for r in results if r.provenance == "lab" and r.status == "ok" and r.value is not None]


def best_results(results: list[LabResult], spec: CampaignSpec, n: int = 6) -> list[LabResult]:
    """The campaign's ``n`` best distinct candidates by the objective's utility, each by its best lab result.

    Imported history is left out, as in the campaign summary: it is what was known, not what the campaign found.
    """
    best: dict[str, LabResult] = {}
    for result in _measured(results):
        held = best.get(result.candidate_id)
        if held is None or spec.objective.utility(result.value) > spec.objective.utility(held.value):
            best[result.candidate_id] = result
    return sorted(best.values(), key=lambda r: (-spec.objective.utility(r.value), r.n))[:n]


def best_so_far_result(results: list[LabResult], spec: CampaignSpec) -> LabResult | None:
    """The campaign's best lab result (the first of equals), or None before any succeeded."""
    top = best_results(results, spec, n=1)
    return top[0] if top else None


def candidate_columns(spec: CampaignSpec) -> list[str]:
    """The columns that name a candidate in a results file: the pool's SMILES or formula column, or the parameters."""
    if spec.campaign.kind == "conditions":
        return list(spec.space.columns or [])
    return [spec.space.column or ("smiles" if spec.campaign.kind == "molecule" else "formula")]


def _own_values(candidate: Candidate | None, label: str, columns: list[str]) -> dict[str, Any]:
    if isinstance(candidate, Conditions):
        return {column: candidate.values.get(column) for column in columns}
    return {columns[0]: label}


def other_properties(spec: CampaignSpec) -> list[str]:
    """The measured properties besides the first objective (``spec.measured_properties``): none for one objective."""
    return [p for p in spec.measured_properties if p != spec.objective.property]


def results_columns(spec: CampaignSpec) -> list[str]:
    """The header of ``results.csv`` (``results_rows``' keys, in order), written even when there is no result yet.

    The first objective's value, ``sd`` and ``unit``, then a column per other measured property (named as in the
    spec, so the file reads back as ``--history``)."""
    return ["n", "iteration", "arm", *candidate_columns(spec), spec.objective.property, "sd", "unit",
            *other_properties(spec), "status", "hit", "reason", "provenance", "lab_hours"]


def results_rows(results: list[LabResult], spec: CampaignSpec) -> list[dict[str, Any]]:
    """The rows of ``results.csv``: order, iteration, arm, the candidate's own columns, the objective's property,
    ``sd``, ``unit``, every other measured property, ``status``, ``hit``, ``reason``, ``provenance``, ``lab_hours``;
    values rounded to precision."""
    objective = spec.objective
    columns = candidate_columns(spec)
    others = other_properties(spec)
    rows = []
    for r in results:
        rows.append({
            "n": r.n, "iteration": r.iteration, "arm": r.arm, **_own_values(r.candidate, r.label, columns),
            objective.property: rounded_float(r.value, r.sd),
            "sd": rounded_float(r.sd, digits=2), "unit": objective.unit,
            **{prop: rounded_float(r.values.get(prop)) for prop in others}, "status": r.status,
            "hit": objective.is_hit(r.value, spec.stop.threshold) if r.status == "ok" else False,
            "reason": r.reason or "", "provenance": r.provenance,
            "lab_hours": rounded_float(r.lab_hours, digits=DIGITS),
        })
    return rows
