"""The simulated lab's compact index of retired jobs (``instruments.simlab_retired``)."""

import tracemalloc

import numpy as np

from instruments.base import LabJob
from instruments.simlab_records import RetiredJob
from instruments.simlab_retired import RetiredJobs, job_fingerprint
from vocabulary.domain import Conditions


def test_every_retired_job_is_found_across_merges():
    rng = np.random.default_rng(0)
    jobs = RetiredJobs(merge_every=7)
    expected = {}
    for n in rng.permutation(500):
        key = f"campaign/cand-{n}/retry{n % 3}"
        state = ("done", "failed", "cancelled")[n % 3]
        fingerprint = int(rng.integers(-2**62, 2**62))
        jobs.add(key, fingerprint=fingerprint, state=state)
        expected[key] = RetiredJob(fingerprint, state)
    assert len(jobs) == 500
    assert all(jobs.get(key) == job for key, job in expected.items())
    assert jobs.get("campaign/cand-500") is None and jobs.get("") is None
    assert jobs.n_by_state == {"done": 167, "failed": 167, "cancelled": 166}


def test_a_retired_job_costs_a_few_dozen_bytes_not_a_dict_entry():
    keys = [f"soak/candidate-{n:07d}" for n in range(40_000)]
    jobs = RetiredJobs()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for n, key in enumerate(keys):
        jobs.add(key, fingerprint=n, state="done")
    jobs._merge()  # what is left in the dict of recent ones
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert grown / len(keys) < 40  # a dict of key strings and RetiredJob objects takes about 190


def test_the_fingerprint_is_stable_and_tells_jobs_apart():
    a = LabJob(job_key="c/1", candidate=Conditions(values={"x": 1.0}, id="1"))
    b = LabJob(job_key="c/1", candidate=Conditions(values={"x": 2.0}, id="2"))
    assert job_fingerprint(a) == job_fingerprint(a.model_copy()) != job_fingerprint(b)
    # blake2b, not the per-process salted hash(): the same in every interpreter
    assert job_fingerprint(a) == job_fingerprint(LabJob.model_validate_json(a.model_dump_json()))
