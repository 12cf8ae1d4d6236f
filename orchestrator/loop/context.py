"""The runtime a campaign's nodes share: spec, pool, ledger, rungs, the lab, rubric, planners and the read model.

None of this is graph state (it is not serialisable); it is rebuilt from the spec and the ledger on resume: the view
(``loop.view.CampaignView``) is refolded from the ledger's start and the simulated lab replayed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from orchestrator.ledger import Ledger
from orchestrator.loop.aio import LoopThread
from orchestrator.loop.compute import ComputeResources
from orchestrator.loop.human_answer import lab_wait
from orchestrator.loop.lab import Lab
from orchestrator.loop.step_scores import StepScoreMemo
from orchestrator.loop.view import CampaignView
from orchestrator.policy.planners import (
    Planner,
    PlannerTraits,
    make_planner,
    planner_traits,
)
from orchestrator.space.pool import Pool, load_pool
from orchestrator.spec import CampaignSpec, RungSpec
from vocabulary.domain import SetupError

__all__ = ["CampaignContext", "Rung", "build_context", "simlab_truth", "simulator_oracle"]


@dataclass
class Rung:
    """One simulator rung as configured by the spec."""

    spec: RungSpec
    simulator: Any

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def is_computed(self) -> bool:
        """Whether a failed result is a calculation that failed (it stops the candidate at the screen), not a table's
        empty cell (nobody computed it: no evidence either way, the candidate climbs on without it)."""
        return self.spec.simulator != "table"


@dataclass
class CampaignContext:
    campaign_id: str
    spec: CampaignSpec
    pool: Pool
    ledger: Ledger
    rungs: list[Rung]
    lab: Lab
    rubric: Any
    planners: dict[str, Planner]
    view: CampaignView
    """The ledger as the nodes read it, refreshed before every node (``graph``)."""
    traits: dict[str, PlannerTraits] = field(default_factory=dict)
    """Each arm's declared traits, read once when the campaign is built."""
    compute: ComputeResources = field(default_factory=ComputeResources)
    """The simulator executor and the result cache, made on first use and closed with the campaign."""
    step_scores: StepScoreMemo | None = None
    """The reward node's criterion scores of the open trajectories' steps."""
    max_pending: int = 1
    """Jobs the lab may hold at once (spec, else the driver's parallel capacity)."""

    @property
    def seed(self) -> int:
        return self.spec.campaign.seed

    @property
    def driver(self) -> Any:
        """The lab's instrument driver (``lab.driver``)."""
        return self.lab.driver

    @property
    def loop(self) -> LoopThread:
        """The event-loop thread the driver's coroutines run on (``lab.loop``)."""
        return self.lab.loop

    @property
    def arms(self) -> list[str]:
        """Main arm first, then the control arm if any."""
        return [self.spec.planner.main] + ([self.spec.planner.control] if self.spec.planner.control else [])

    @property
    def uses_ladder(self) -> bool:
        """Whether any arm of the campaign plans with the ladder (``PlannerTraits.uses_ladder``)."""
        return any(traits.uses_ladder for traits in self.traits.values())

    def close(self) -> None:
        self.compute.close()
        self.lab.close()


def _build_rungs(spec: CampaignSpec, pool: Pool) -> list[Rung]:
    from simulators import TableSimulator, load_simulator

    rungs = []
    for order, rung in enumerate(spec.ladder):
        if rung.simulator == "table":
            simulator = TableSimulator(
                rung.name,
                pool.column(rung.column),
                rung.property or rung.column,
                fidelity=order,
                cost_s=rung.cost_s,
            )
        else:
            simulator = load_simulator(rung.simulator, **rung.parameters)
        if spec.campaign.kind not in simulator.applies_to:
            raise SetupError(
                f"rung {rung.name!r} ({rung.simulator}) applies to {sorted(simulator.applies_to)}, "
                f"not to this campaign's {spec.campaign.kind!r} candidates; remove it from the ladder"
            )
        if rung.proxy and rung.proxy not in simulator.implemented_properties:
            raise SetupError(
                f"rung {rung.name!r}: proxy {rung.proxy!r} is not one of its properties {list(simulator.implemented_properties)}"
            )
        rungs.append(Rung(rung, simulator))
    return rungs


def _build_driver(spec: CampaignSpec, pool: Pool):
    from instruments import load_driver

    params: dict[str, Any] = dict(spec.lab.parameters)
    if spec.lab.driver == "http" and os.environ.get("CLOSEDLOOP_LAB_TOKEN"):
        params.setdefault("token", os.environ["CLOSEDLOOP_LAB_TOKEN"])  # never in the spec, so never in the ledger
    if spec.lab.driver == "simlab":
        params = {**simlab_truth(spec, pool), **params}
    if spec.lab.driver == "recorded":
        from orchestrator.loop.recorded_lab import resolve_recorded_lab

        params = resolve_recorded_lab(params)
    return load_driver(spec.lab.driver, **params)


def simlab_truth(spec: CampaignSpec, pool: Pool) -> dict[str, Any]:
    """The simulated lab's parameters a spec implies (``lab.parameters`` aside): the first objective's oracle and
    noise, every other measured property (``measured``), ``fails_at_or_below``, the seed and the unit."""
    if spec.lab.oracle_simulator:
        oracle = simulator_oracle(spec)
    else:
        oracle = _table_oracle(pool, spec.lab.oracle_column or spec.objective.column or "_oracle",
                               spec.objective.property)
    params: dict[str, Any] = {"oracle": oracle, "noise_sd": spec.lab.noise_sd if spec.objective.noise_sd is None
                              else spec.objective.noise_sd}
    measured = _measured_properties(spec, pool)
    if measured:
        params["measured"] = measured
    if spec.lab.fails_at_or_below is not None:
        params["fails_at_or_below"] = spec.lab.fails_at_or_below
    return {**params, "seed": spec.campaign.seed, "unit": spec.objective.unit}  # a bounded unit bounds readings


def _table_oracle(pool: Pool, column: str, property: str):
    from instruments import TableOracle
    from orchestrator.space.compact import CompactPool

    return pool.oracle(column, property) if isinstance(pool, CompactPool) else TableOracle(pool.column(column),
                                                                                            property=property)


def _measured_properties(spec: CampaignSpec, pool: Pool) -> dict:
    """The simulated lab's other measured properties (further objectives, outcome constraints): each read from its
    pool column, with its own noise and unit."""
    from instruments.oracle import MeasuredProperty
    from orchestrator.space.pool import truth_columns

    columns = truth_columns(spec)
    objectives = {o.property for o in spec.objective_list}
    measured = {}
    for item in [*spec.objective_list[1:], *spec.constraints]:
        if item.property in columns and item.property not in measured and item.property != spec.objective.property:
            measured[item.property] = MeasuredProperty(_table_oracle(pool, columns[item.property], item.property),
                                                       noise_sd=item.noise_sd or 0.0, unit=item.unit,
                                                       is_required=item.property in objectives)
    return measured


def simulator_oracle(spec: CampaignSpec):
    """The SimLab's ground truth computed by a simulator (``lab.oracle_simulator``), for spaces without a table."""
    from instruments import FunctionOracle
    from simulators import load_simulator
    from vocabulary.domain import InstrumentFault

    simulator = load_simulator(spec.lab.oracle_simulator, **spec.lab.oracle_parameters)
    name = spec.lab.oracle_property
    if name not in simulator.implemented_properties:
        raise SetupError(f"lab.oracle_property {name!r} is not a property of {spec.lab.oracle_simulator!r}; "
                         f"choose one of {list(simulator.implemented_properties)}")

    def truth(candidate) -> float:
        observation = simulator.evaluate([candidate])[0]
        if observation.status != "ok" or name not in observation.properties:
            raise InstrumentFault(f"the lab's ground truth ({spec.lab.oracle_simulator}) failed on {candidate.id}: "
                                  f"{observation.reason or 'no ' + name}")
        return float(observation.properties[name])

    return FunctionOracle(truth, property=spec.objective.property)


def build_context(spec: CampaignSpec, ledger: Ledger, campaign_id: str) -> CampaignContext:
    """Everything the nodes need, rebuilt from the spec and the ledger (so it also serves a resume)."""
    from rewards import load_rubric

    pool = load_pool(spec)
    if spec.space.generate:
        pool = pool.copy()  # an open space grows; the cached seed library must not
    rubric_ref = spec.rewards.rubric
    if rubric_ref.endswith(".toml"):
        rubric_ref = str(spec.resolve(rubric_ref))
    planners = {arm: make_planner(arm, spec) for arm in (spec.planner.main, spec.planner.control) if arm}
    rungs = _build_rungs(spec, pool)
    lab = Lab(_build_driver(spec, pool), wait=lab_wait(spec))  # whole batches where a person approves them
    rubric = load_rubric(rubric_ref)
    ctx = CampaignContext(
        campaign_id=campaign_id,
        spec=spec,
        pool=pool,
        ledger=ledger,
        rungs=rungs,
        lab=lab,
        rubric=rubric,
        planners=planners,
        view=CampaignView(ledger, campaign_id, spec, pool, rungs),
        traits={arm: planner_traits(planner) for arm, planner in planners.items()},
        step_scores=StepScoreMemo(rubric),
    )
    capabilities = lab.capabilities()
    parallel = capabilities.get("max_parallel_jobs") or sum(capabilities.get("stations", {}).values())
    ctx.max_pending = spec.lab.max_pending or int(parallel) or spec.planner.batch_size
    ctx.view.refresh()  # an open space's pool grows back here, before the lab replays its jobs
    if lab.is_simulated:
        from orchestrator.loop.jobs import make_job

        lab.replay(ctx.ledger.events(campaign_id, types=["Dispatched", "Observed"]), lambda key: make_job(ctx, key))
    return ctx
