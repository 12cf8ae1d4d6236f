"""The runtime a campaign's nodes share: spec, pool, ledger, rungs, lab driver, rubric and planners.

None of this is graph state (it is not serialisable); it is rebuilt from the spec and the ledger on resume.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .aio import LoopThread
from .domain import SetupError
from .ledger import Ledger
from .planners import Planner, make_planner
from .pool import Pool, load_pool
from .spec import CampaignSpec, RungSpec

__all__ = ["CampaignContext", "Rung", "build_context", "lab_clock_s"]


@dataclass
class Rung:
    """One simulator rung as configured by the spec."""

    spec: RungSpec
    simulator: Any

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass
class CampaignContext:
    campaign_id: str
    spec: CampaignSpec
    pool: Pool
    ledger: Ledger
    rungs: list[Rung]
    driver: Any
    rubric: Any
    planners: dict[str, Planner]
    loop: LoopThread = field(default_factory=LoopThread)

    @property
    def seed(self) -> int:
        return self.spec.campaign.seed

    @property
    def arms(self) -> list[str]:
        """Main arm first, then the control arm if any."""
        return [self.spec.planner.main] + ([self.spec.planner.control] if self.spec.planner.control else [])

    def close(self) -> None:
        self.loop.close()


def lab_clock_s(ledger: Ledger, campaign_id: str) -> float:
    """Where a (re)started simulated lab's clock must stand, in seconds since the campaign started.

    Batches are dispatched together when the previous batch has finished. If the latest batch is still open (a
    crash during dispatch or observe), the clock restarts at its dispatch time, so that re-running the batch
    reproduces its queueing exactly; otherwise it stands at the latest completion.
    """
    jobs = ledger.lab_jobs(campaign_id)
    if not jobs:
        return 0.0
    latest = max(j.iteration for j in jobs)
    batch = [j for j in jobs if j.iteration == latest]
    if any(j.status == "dispatched" for j in batch):
        return min(j.submitted_s for j in batch)
    return max(j.completed_s for j in jobs if j.completed_s is not None)


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


def _build_driver(spec: CampaignSpec, pool: Pool, start_time_s: float):
    from instruments import TableOracle, load_driver

    params: dict[str, Any] = dict(spec.lab.parameters)
    if spec.lab.driver == "simlab":
        column = spec.lab.oracle_column or "_oracle"
        params.setdefault("oracle", TableOracle(pool.column(column), property=spec.objective.property))
        params.setdefault("noise_sd", spec.lab.noise_sd)
        params.setdefault("seed", spec.campaign.seed)
        params.setdefault("start_time_s", start_time_s)
    return load_driver(spec.lab.driver, **params)


def build_context(spec: CampaignSpec, ledger: Ledger, campaign_id: str) -> CampaignContext:
    """Everything the nodes need, rebuilt from the spec and the ledger (so it also serves a resume)."""
    from rewards import load_rubric

    pool = load_pool(spec)
    rubric_ref = spec.rewards.rubric
    if rubric_ref.endswith(".toml"):
        rubric_ref = str(spec.resolve(rubric_ref))
    planners = {arm: make_planner(arm) for arm in {spec.planner.main, spec.planner.control} if arm}
    return CampaignContext(
        campaign_id=campaign_id,
        spec=spec,
        pool=pool,
        ledger=ledger,
        rungs=_build_rungs(spec, pool),
        driver=_build_driver(spec, pool, lab_clock_s(ledger, campaign_id)),
        rubric=load_rubric(rubric_ref),
        planners=planners,
    )
