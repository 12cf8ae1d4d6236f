"""Value objects of the instrument vocabulary: validation and serialisation round trips."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from instruments import InstrumentDriver, JobHandle, LabJob, LabResult
from vocabulary.domain import Conditions, Material, Molecule

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
keys = st.text(min_size=1, max_size=30)
candidates = st.one_of(
    st.builds(
        Conditions,
        values=st.dictionaries(st.text(min_size=1, max_size=8), st.one_of(finite, st.integers(), st.text(max_size=8))),
        id=keys,
    ),
    st.builds(Molecule, smiles=st.just("CCO"), id=keys),
    st.builds(Material, formula=st.just("Fe2O3"), id=keys),
)


@given(key=keys, candidate=candidates, steps=st.lists(keys, min_size=1, max_size=4).map(tuple))
def test_lab_job_round_trips(key, candidate, steps):
    job = LabJob(job_key=key, candidate=candidate, steps=steps, parameters={"replicates": 2})
    again = LabJob.model_validate_json(job.model_dump_json())
    assert again == job
    assert type(again.candidate) is type(candidate)


@given(key=keys, driver=keys)
def test_job_handle_round_trips(key, driver):
    handle = JobHandle(job_key=key, driver=driver)
    assert JobHandle.model_validate_json(handle.model_dump_json()) == handle


@given(
    value=finite,
    sd=st.floats(min_value=0.0, max_value=1e6),
    start=st.floats(min_value=0.0, max_value=1e9),
    span=st.floats(min_value=0.0, max_value=1e7),
    log=st.lists(st.tuples(keys, finite, finite), max_size=4),
    is_failed=st.booleans(),
)
def test_lab_result_round_trips(value, sd, start, span, log, is_failed):
    fields = dict(job_key="k", candidate_id="c", submitted_s=start, completed_s=start + span, station_log=log)
    result = (
        LabResult(status="failed", reason="jam", **fields)
        if is_failed
        else LabResult(value=value, uncertainty=sd, **fields)
    )
    assert LabResult.model_validate_json(result.model_dump_json()) == result


def test_lab_result_refuses_inconsistent_states():
    times = dict(job_key="k", candidate_id="c", submitted_s=0.0, completed_s=1.0)
    with pytest.raises(ValidationError, match="must say why"):
        LabResult(status="failed", **times)
    with pytest.raises(ValidationError, match="finite value"):
        LabResult(status="ok", value=None, **times)
    with pytest.raises(ValidationError, match="before it was submitted"):
        LabResult(value=1.0, job_key="k", candidate_id="c", submitted_s=5.0, completed_s=1.0)


def test_lab_job_is_frozen_and_needs_a_key():
    job = LabJob(job_key="k", candidate=Conditions(values={}, id="c"))
    with pytest.raises(ValidationError):
        job.job_key = "other"
    with pytest.raises(ValidationError):
        LabJob(job_key="", candidate=Conditions(values={}, id="c"))
    with pytest.raises(ValidationError):
        LabJob(job_key="k", candidate=Conditions(values={}, id="c"), steps=())


def test_failed_result_becomes_failed_observation_without_values():
    result = LabResult(job_key="k", candidate_id="c", status="failed", reason="jam", submitted_s=0, completed_s=9,
                       station_log=[("synthesis", 1.0, 4.0)])
    obs = result.to_observation("simlab", property="yield", fidelity=3)
    assert (obs.status, obs.reason, obs.properties, obs.cost_s, obs.fidelity) == ("failed", "jam", {}, 3.0, 3)


def test_protocol_rejects_objects_missing_verbs():
    class HalfDriver:
        name = "half"
        version = "0"

        async def submit(self, job): ...

    assert not isinstance(HalfDriver(), InstrumentDriver)


def test_importing_instruments_does_not_import_torch():
    code = "import sys, instruments; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_importing_instruments_does_not_import_the_http_stack():
    code = "import sys, instruments; print(sorted({'fastapi', 'uvicorn', 'httpx', 'starlette'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    code = "import instruments; print(instruments.HttpDriver.__module__, instruments.create_app.__module__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["instruments.http_driver", "instruments.server"]
