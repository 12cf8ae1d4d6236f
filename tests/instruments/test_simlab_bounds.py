"""A bounded property stays within its bounds: a simulated yield in percent reads 0..100, never 103."""

from __future__ import annotations

import asyncio

import pytest

from instruments import FunctionOracle, LabJob, SimLabDriver
from instruments.oracle import unit_bounds
from vocabulary.domain import Conditions, SetupError


def _readings(lab: SimLabDriver, n_jobs: int = 60) -> list[float]:
    jobs = [LabJob(job_key=f"run-{i}", candidate=Conditions(values={"x": float(i)}, id=f"c{i}")) for i in range(n_jobs)]
    handles = [asyncio.run(lab.submit(job)) for job in jobs]
    lab.run_until_complete(handles)
    return [asyncio.run(lab.result(handle)).value for handle in handles]


def _lab(truth: float, **options) -> SimLabDriver:
    return SimLabDriver(oracle=FunctionOracle(lambda c: truth, property="yield"), noise_sd=5.0, seed=3, **options)


def test_a_percent_yield_near_the_top_never_reads_above_100():
    unbounded, bounded = _readings(_lab(99.0)), _readings(_lab(99.0, unit="%"))
    assert max(unbounded) > 100.0  # the noise alone pushes a near-quantitative yield past 100 %
    assert all(0.0 <= value <= 100.0 for value in bounded)
    assert bounded == [min(value, 100.0) for value in unbounded]  # the same draws, read at the detector's limit


def test_a_yield_near_zero_never_reads_below_0():
    bounded = _readings(_lab(1.0, unit="%"))
    assert min(bounded) == 0.0 and max(bounded) > 1.0


def test_explicit_bounds_win_over_the_unit_and_an_unbounded_unit_changes_nothing():
    assert max(_readings(_lab(99.0, unit="%", bounds=(None, 99.5)))) == 99.5
    assert _readings(_lab(-12.0, unit="kcal/mol")) == _readings(_lab(-12.0))


def test_unit_bounds():
    assert unit_bounds("%") == (0.0, 100.0) and unit_bounds("percent") == (0.0, 100.0)
    assert unit_bounds("kcal/mol") is None and unit_bounds(None) is None


@pytest.mark.parametrize("bounds", [(100.0, 0.0), ("low", 1.0), (0.0,), (float("nan"), 1.0)])
def test_bounds_that_are_not_a_range_are_refused_naming_them(bounds):
    with pytest.raises(SetupError, match="bounds="):
        _lab(50.0, bounds=bounds)


def test_a_campaign_passes_its_objective_unit_to_the_simulated_lab(tmp_path):
    """Buchwald–Hartwig yields (%) measured with a lot of noise: every recorded reading is within 0..100 %."""
    from orchestrator.ledger import Ledger
    from orchestrator.loop.campaign import Campaign
    from tests.conftest import BUCHWALD_SPEC, small_spec

    spec = small_spec(BUCHWALD_SPEC, lab_experiments=16, lab__noise_sd=60.0)
    assert spec.objective.unit == "%"
    with Campaign.start(spec, db=tmp_path / "bh.db", campaign_id="bh") as campaign:
        campaign.run()
    ledger = Ledger.open(tmp_path / "bh.db")
    values = [e.payload["value"] for e in ledger.events("bh", types=["Observed"]) if e.payload["value"] is not None]
    ledger.close()
    assert len(values) == 16 and all(0.0 <= v <= 100.0 for v in values)
    assert {0.0, 100.0} & set(values)  # noise of 60 % reaches a bound: the check above means something
