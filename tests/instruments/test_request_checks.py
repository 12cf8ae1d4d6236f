"""The lab server refuses forged or malformed candidates (422) and oversized bodies (413) before its driver sees them."""

from __future__ import annotations

import httpx
import pytest

from instruments import FunctionOracle, LabJob, SimLabDriver
from instruments.request_checks import candidate_problem
from vocabulary.domain import Conditions, Material, Molecule

ETHANOL = Molecule.parse("CCO")
METHANOL = Molecule.parse("CO")


class SpyLab(SimLabDriver):
    """A SimLab that remembers which jobs reached its submit."""

    def __init__(self):
        super().__init__(oracle=FunctionOracle(lambda c: 1.0, property="y"))
        self.seen: list[str] = []

    async def submit(self, job):
        self.seen.append(job.job_key)
        return await super().submit(job)


def job_json(key: str, candidate) -> dict:
    return LabJob(job_key=key, candidate=candidate).model_dump(mode="json")


@pytest.fixture
def lab(serve_lab):
    driver = SpyLab()
    server = serve_lab(driver, seconds_per_sim_hour=1.0, max_body_bytes=20_000)
    with httpx.Client(base_url=server.url) as client:
        yield client, driver


def test_a_candidate_id_that_is_not_its_smiles_is_refused(lab):
    client, driver = lab
    forged = {**job_json("forged", ETHANOL), "candidate": {**ETHANOL.model_dump(), "id": METHANOL.id}}
    refused = client.post("/jobs", json=forged)
    assert refused.status_code == 422
    body = refused.json()
    assert body["error"] == "invalid_candidate"
    assert METHANOL.id in body["message"] and ETHANOL.id in body["message"] and "'CCO'" in body["message"]
    assert driver.seen == [] and client.get("/jobs/forged").status_code == 404
    assert client.post("/jobs", json=job_json("honest", ETHANOL)).status_code == 200
    assert driver.seen == ["honest"]


def test_an_invalid_smiles_or_formula_is_refused(lab):
    client, driver = lab
    bad_smiles = {**job_json("bad-smiles", ETHANOL), "candidate": {"type": "molecule", "smiles": "C1CC(", "id": "x"}}
    refused = client.post("/jobs", json=bad_smiles)
    assert refused.status_code == 422 and refused.json()["error"] == "invalid_candidate"
    assert "'C1CC('" in refused.json()["message"] and "not a valid molecule" in refused.json()["message"]
    bad_formula = {**job_json("bad-formula", ETHANOL),
                   "candidate": {"type": "material", "formula": "Xx2O3", "id": "Xx2O3"}}
    refused = client.post("/jobs", json=bad_formula)
    assert refused.status_code == 422 and "Xx2O3" in refused.json()["message"]
    assert driver.seen == []


def test_a_malformed_job_gets_the_documented_error_body(lab):
    client, _ = lab
    refused = client.post("/jobs", json={"job_key": "no-candidate"})
    assert refused.status_code == 422
    assert refused.json()["error"] == "invalid_job" and "candidate" in refused.json()["message"]


def test_a_body_over_the_limit_is_refused_with_413(lab):
    client, driver = lab
    huge = {**job_json("huge", ETHANOL), "parameters": {"note": "x" * 30_000}}
    refused = client.post("/jobs", json=huge)
    assert refused.status_code == 413
    assert refused.json()["error"] == "payload_too_large" and "20000 bytes" in refused.json()["message"]

    def chunks():  # no Content-Length: the limit counts what arrives
        yield b'{"job_key": "streamed", "parameters": {"note": "'
        for _ in range(30):
            yield b"x" * 1000
        yield b'"}}'

    streamed = client.post("/jobs", content=chunks(), headers={"content-type": "application/json"})
    assert streamed.status_code == 413 and streamed.json()["error"] == "payload_too_large"
    assert driver.seen == []
    assert client.post("/jobs", json=job_json("small", ETHANOL)).status_code == 200  # under the limit: served


def test_the_default_limit_is_one_megabyte(serve_lab):
    server = serve_lab(SpyLab())
    with httpx.Client(base_url=server.url) as client:
        assert client.post("/jobs", content=b"x" * 1_000_001).status_code == 413
        assert client.post("/jobs", json=job_json("ok", ETHANOL)).status_code == 200


def test_candidate_problem_accepts_what_the_parsers_build():
    assert candidate_problem(ETHANOL) is None
    assert candidate_problem(Material.parse("Fe2O3")) is None
    assert "is not the id of its formula" in candidate_problem(Material(formula="Fe2O3", id="FeO"))
    assert candidate_problem(Conditions(values={"T": 25.0, "solvent": "water"}, id="any")) is None
    assert "not finite" in candidate_problem(Conditions(values={"T": float("nan")}, id="c"))
