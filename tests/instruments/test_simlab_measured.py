"""The simulated lab measures every property a campaign asks for, each with its own noise and unit bounds, and fails
the jobs whose true value is at or below ``fails_at_or_below`` ("no product")."""

from __future__ import annotations

import asyncio
import math

import pytest
from pydantic import ValidationError

from instruments import FunctionOracle, LabJob, LabResult, SimLabDriver
from instruments.oracle import MeasuredProperty
from vocabulary.domain import Conditions, SetupError


def job(key: str, x: float) -> LabJob:
    return LabJob(job_key=key, candidate=Conditions(values={"x": x}, id=f"c-{key}"))


def measure(lab: SimLabDriver, jobs: list[LabJob]) -> dict[str, LabResult]:
    handles = [asyncio.run(lab.submit(j)) for j in jobs]
    lab.run_until_complete(handles)
    return {h.job_key: asyncio.run(lab.result(h)) for h in handles}


def two_property_lab(**kwargs) -> SimLabDriver:
    measured = {
        "size": MeasuredProperty(FunctionOracle(lambda c: 100.0 + c.values["x"], property="size"), noise_sd=2.0,
                                 unit="nm"),
        "encapsulation": MeasuredProperty(FunctionOracle(lambda c: 99.5, property="encapsulation"), noise_sd=5.0,
                                          unit="%"),
    }
    return SimLabDriver(oracle=FunctionOracle(lambda c: c.values["x"], property="yield"), noise_sd=1.0, seed=3,
                        unit="%", measured=measured, **kwargs)


def test_every_measured_property_comes_back_with_its_own_noise_and_bounds():
    results = measure(two_property_lab(), [job(f"k{i}", 10.0 + i) for i in range(40)])
    size_errors, value_errors = [], []
    for i, result in enumerate(results.values()):
        assert result.status == "ok" and set(result.values) == {"size", "encapsulation"}
        assert 0.0 <= result.values["encapsulation"] <= 100.0, "a % reading stays within 0..100"
        size_errors.append(result.values["size"] - (110.0 + i))
        value_errors.append(result.value - (10.0 + i))
    spread = math.sqrt(sum(e * e for e in size_errors) / len(size_errors))
    assert 1.2 < spread < 3.0, f"size noise sd {spread:.2f} should be near its own 2.0, not the objective's 1.0"
    assert size_errors != pytest.approx([2.0 * e for e in value_errors]), "each property draws its own noise"
    assert any(r.values["encapsulation"] == 100.0 for r in results.values()), "readings above 100 % are clipped"


def test_measured_values_are_reproducible_per_job_key():
    first = measure(two_property_lab(), [job("a", 1.0), job("b", 2.0)])
    again = measure(two_property_lab(), [job("b", 2.0), job("a", 1.0)])
    assert {k: r.values for k, r in first.items()} == {k: r.values for k, r in again.items()}


def test_a_point_without_an_objective_truth_fails_but_a_missing_constraint_is_left_unmeasured():
    def no_truth(candidate):
        raise KeyError(candidate.id)

    objective = SimLabDriver(oracle=FunctionOracle(lambda c: 1.0, property="a"), seed=1,
                             measured={"b": MeasuredProperty(no_truth)})
    (failed,) = measure(objective, [job("k", 1.0)]).values()
    assert failed.status == "failed" and "'b'" in failed.reason
    constraint = SimLabDriver(oracle=FunctionOracle(lambda c: 1.0, property="a"), seed=1,
                              measured={"pdi": MeasuredProperty(lambda c: math.nan, is_required=False)})
    (ok,) = measure(constraint, [job("k", 1.0)]).values()
    assert ok.status == "ok" and ok.values == {}


def test_fails_at_or_below_fails_the_job_with_no_product():
    lab = two_property_lab(fails_at_or_below=0.0)
    results = measure(lab, [job("zero", 0.0), job("below", -1.0), job("above", 0.5)])
    for key in ("zero", "below"):
        assert results[key].status == "failed" and results[key].value is None and results[key].values == {}
        assert results[key].reason == "no product: true yield <= 0 %"
        assert not results[key].infeasible, "a plain failure: the campaign's failure policy says what it means"
    assert results["above"].status == "ok" and results["above"].values
    with pytest.raises(SetupError, match="fails_at_or_below"):
        two_property_lab(fails_at_or_below=math.inf)


def test_lab_result_checks_infeasible_and_values():
    common = dict(job_key="j", candidate_id="c", submitted_s=0.0, completed_s=1.0)
    with pytest.raises(ValidationError, match="infeasible"):
        LabResult(status="ok", value=1.0, infeasible=True, **common)
    with pytest.raises(ValidationError, match="non-finite"):
        LabResult(status="ok", value=1.0, values={"b": math.nan}, **common)
    failed = LabResult(status="failed", reason="phase separated", infeasible=True, **common)
    assert LabResult.model_validate_json(failed.model_dump_json()) == failed
    ok = LabResult(status="ok", value=1.0, values={"b": 2.0}, **common)
    assert LabResult.model_validate_json(ok.model_dump_json()).values == {"b": 2.0}
