"""The measured Pareto front of a campaign with several objectives: its points, its hypervolume, and the
hypervolume after each lab result, read from the lab history alone (no event of its own).

The reference point is the spec's (``[tradeoff] reference_point``) or, without one, inferred from the measured
results by BoTorch's rule (the nadir of the front less a tenth of its range, ``vocabulary.pareto``), so it is a pure
function of the ledger; ``reference_inferred`` says which. The whole hypervolume curve uses the final reference
point, so its values are comparable with each other. A result that breaks an outcome constraint, or misses an
objective's value, is never on the front and adds no volume.

Example:
    >>> from orchestrator.spec import CampaignSpec
    >>> from orchestrator.loop.view.lab_jobs import LabHistory
    >>> spec = CampaignSpec.model_validate({
    ...     "campaign": {"name": "d", "kind": "conditions"},
    ...     "objective": [{"property": "a", "direction": "max", "column": "a"},
    ...                   {"property": "b", "direction": "min", "column": "b"}],
    ...     "tradeoff": {"reference_point": [0.0, 10.0]},
    ...     "space": {"inline": [{"x": 1.0, "a": 1.0, "b": 1.0}], "columns": ["x"]},
    ...     "lab": {"driver": "simlab"}, "budget": {"lab_experiments": 3}})
    >>> history = LabHistory(tested=frozenset({"p", "q", "r"}), pending=(), failures=(), n_dispatched=3,
    ...     results=(("p", "bo", 2.0, 2.0), ("q", "bo", 1.0, 1.0), ("r", "bo", 3.0, 3.0)),
    ...     measured=({"a": 2.0, "b": 5.0}, {"a": 1.0, "b": 6.0}, {"a": 3.0, "b": 8.0}))
    >>> front = campaign_front(spec, history)
    >>> [p.candidate_id for p in front.points], front.hypervolume, front.hypervolume_by_experiment
    (['p', 'r'], 12.0, [10.0, 10.0, 12.0])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from orchestrator.loop.view.lab_jobs import LabHistory
from vocabulary.pareto import (
    hypervolume,
    infer_reference_point,
    non_dominated,
    reference_in_units,
    reference_in_utility,
    utility_matrix,
)

__all__ = ["Front", "FrontPoint", "campaign_front", "hypervolume_unit", "ledger_front", "ledger_history"]


@dataclass(frozen=True)
class FrontPoint:
    """One non-dominated lab result: its candidate, a label people read, and every measured property."""

    candidate_id: str
    label: str
    values: dict[str, float]
    meets_constraints: bool = True


@dataclass(frozen=True)
class Front:
    """The measured front. ``hypervolume`` is in the product of the objectives' units, above ``reference_point``
    (objective units); ``hypervolume_by_experiment`` is the hypervolume after each lab result, in their order."""

    properties: list[str]
    directions: list[str]
    reference_point: list[float]
    reference_inferred: bool
    points: list[FrontPoint]
    hypervolume: float
    hypervolume_by_experiment: list[float]
    n_results: int
    n_breaking_constraints: int = 0
    units: list[str] = field(default_factory=list)
    """Each objective's unit, in ``properties`` order."""

    def as_dict(self) -> dict:
        """JSON-ready (``run --json``'s ``front``)."""
        return asdict(self)


def hypervolume_unit(units: list[str]) -> str:
    """The hypervolume's unit, the product of the objectives' units ("" when none has one).

    Example:
        >>> hypervolume_unit(["%", "nm", ""])
        '% x nm'
    """
    return " x ".join(u for u in units if u)


def _meets(spec, measured: dict[str, float]) -> bool:
    return all(c.is_met(measured.get(c.property)) for c in spec.constraints)


def campaign_front(spec, history: LabHistory, describe: Callable[[str], str] | None = None) -> Front | None:
    """The front of ``history``'s lab results (None for one objective, or before any result has every objective).

    Args:
        spec: the campaign spec (``spec.objective_list``, ``spec.constraints``, ``spec.tradeoff``).
        history: the lab so far (``LabHistory.measured``: every property per result).
        describe: candidate id -> label shown to people (SMILES, name=value pairs); default the id.
    """
    if not spec.is_multi_objective or not history.measured:
        return None
    objectives = spec.objective_list
    names = [o.property for o in objectives]
    values = np.asarray([[m.get(p, np.nan) for p in names] for m in history.measured], dtype=float)
    feasible = np.asarray([_meets(spec, m) for m in history.measured], dtype=bool)
    utilities = utility_matrix(objectives, values)
    usable = feasible & np.isfinite(utilities).all(axis=1)
    if not usable.any():
        return None
    given = spec.tradeoff.reference_point
    reference = (reference_in_utility(objectives, given) if given is not None
                 else infer_reference_point(utilities[usable]))
    masked = np.where(usable[:, None], utilities, np.nan)
    curve = [float(hypervolume(masked[: k + 1], reference)) for k in range(len(masked))]
    on_front = non_dominated(masked)
    label = describe or (lambda cid: cid)
    points = [FrontPoint(candidate_id=history.results[k][0], label=label(history.results[k][0]),
                         values=dict(history.measured[k]), meets_constraints=True)
              for k in np.flatnonzero(on_front)]
    return Front(properties=names, directions=[o.direction for o in objectives],
                 reference_point=[float(v) for v in (given if given is not None
                                                    else reference_in_units(objectives, reference))],
                 reference_inferred=given is None, points=points, hypervolume=curve[-1],
                 hypervolume_by_experiment=curve, n_results=len(masked),
                 n_breaking_constraints=int((~feasible).sum()), units=[o.unit for o in objectives])


def ledger_history(ledger, campaign_id: str, spec):
    """A campaign's lab history read back from its ledger (imported past results first, as the loop sees them) and
    its candidates' labels (``space.pool.describe``, by candidate id): ``(LabHistory, dict)``."""
    import json

    from orchestrator.loop.view.lab_jobs import LabJobs
    from orchestrator.space.pool import describe
    from vocabulary.domain import candidate_from_dict

    jobs = LabJobs(spec.objective.utility, property=spec.objective.property,
                   learns_failures=spec.lab.failure_policy == "learn")
    for event in ledger.events(campaign_id, types=sorted(LabJobs.types)):
        jobs.on(event)
    labels = {row.candidate_id: describe(candidate_from_dict(json.loads(row.canonical)))
              for row in ledger.candidates(campaign_id)}
    return jobs.history(), labels


def ledger_front(ledger, campaign_id: str, spec) -> Front | None:
    """``campaign_front`` of a campaign read back from its ledger (``ledger_history``); labels are
    ``space.pool.describe`` of each candidate. None for one objective."""
    if not spec.is_multi_objective:
        return None
    history, labels = ledger_history(ledger, campaign_id, spec)
    return campaign_front(spec, history, describe=lambda cid: labels.get(cid, cid))
