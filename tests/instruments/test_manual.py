"""The manual driver: a person's bench. It accepts jobs idempotently, keeps them running until the ledger holds
their results, and never answers ``result()`` itself."""

from __future__ import annotations

import asyncio

import pytest

from instruments import EnvelopeViolation, LabJob, load_driver
from instruments.manual import ManualDriver, is_manual
from instruments.registry import available_drivers
from vocabulary.domain import Conditions, InstrumentFault, SetupError


def _job(key: str = "c/k1", temperature_c: float = 25.0) -> LabJob:
    return LabJob(job_key=key, candidate=Conditions(values={"T": temperature_c}, id="k1"),
                  parameters={"T": temperature_c})


def test_it_is_registered_as_manual_and_declares_itself():
    assert available_drivers()["manual"] == "instruments.manual:ManualDriver"
    lab = load_driver("manual", max_parallel_jobs=3)
    assert isinstance(lab, ManualDriver) and is_manual(lab)
    assert not is_manual(load_driver("simlab", oracle=lambda candidate: 1.0))
    capabilities = asyncio.run(lab.capabilities())
    assert capabilities["is_manual"] is True and capabilities["max_parallel_jobs"] == 3


def test_jobs_stay_at_the_bench_and_results_come_from_the_ledger_not_the_driver():
    lab = ManualDriver()
    first, again = asyncio.run(lab.submit(_job())), asyncio.run(lab.submit(_job()))
    assert first == again and first.driver == "manual"
    assert asyncio.run(lab.status(first)) == "running"
    with pytest.raises(InstrumentFault, match="entered by a person"):
        asyncio.run(lab.result(first))
    asyncio.run(lab.cancel(first))  # nothing to stop at a bench; the call is harmless
    assert asyncio.run(lab.health())["is_ok"] is True


def test_a_fresh_driver_knows_the_same_job():
    """No state of its own: a restarted process builds a new driver and gets the same handle for the same key."""
    assert asyncio.run(ManualDriver().submit(_job())) == asyncio.run(ManualDriver().submit(_job()))


def test_the_bench_envelope_refuses_a_job_outside_it():
    lab = ManualDriver(envelope={"parameters": {"T": (0.0, 100.0, "°C")}})
    asyncio.run(lab.submit(_job(temperature_c=80.0)))
    with pytest.raises(EnvelopeViolation, match="T"):
        asyncio.run(lab.submit(_job(key="c/k2", temperature_c=150.0)))


def test_bad_parameters_are_a_setup_error():
    with pytest.raises(SetupError, match="manual"):
        load_driver("manual", max_parallel_jobs=0)
    with pytest.raises(SetupError, match="rejected its parameters"):
        load_driver("manual", oracle_column="x")
