"""The lab server holds its own OpenAPI contract (issue 18, case 16).

schemathesis reads ``/openapi.json`` from a lab server on 127.0.0.1 (with a token, as a server reachable from other
machines must have) and sends what the schema allows and what it forbids, with every check it has, under the
settings in the repository's ``schemathesis.toml``. The stateful run follows the schema's links from a submitted job
to its status, result and cancellation. Hypothesis is derandomized and bounded, so the run is the same every time.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis.config import SchemathesisConfig

from instruments import SimLabDriver
from instruments.server import ServerThread, build_driver, create_app, demo_oracle

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "contract-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
# A default job (about 5.5 simulated hours) takes under a millisecond of wall time, so a job submitted in a stateful
# run is usually done by the time its result is asked for.
SECONDS_PER_SIM_HOUR = 1e-4
BOUNDED = settings(
    max_examples=40, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck)
)


def contract_config() -> SchemathesisConfig:
    """The repository's schemathesis.toml, read from the root (its ``hooks`` path is relative to it)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)
        return SchemathesisConfig.from_path(ROOT / "schemathesis.toml")


def lab_app():
    return create_app(build_driver("simlab"), token=TOKEN, seconds_per_sim_hour=SECONDS_PER_SIM_HOUR)


# The schema is read when the module is collected, from an app made like the served one, without starting anything;
# test_the_server_publishes_the_schema_under_test ties the two together. (schemathesis.pytest.from_fixture would
# read it from the running server, but schemathesis 4.32 sets a private attribute pytest 9.2 no longer has.)
contract = schemathesis.openapi.from_dict(lab_app().openapi(), config=contract_config())


@pytest.fixture(scope="module")
def lab_url():
    with ServerThread(lab_app()) as server:
        yield server.url


def test_the_server_publishes_the_schema_under_test(lab_url):
    assert httpx.get(f"{lab_url}/openapi.json").json() == lab_app().openapi()


@pytest.mark.slow
@contract.parametrize()
@BOUNDED
def test_every_operation_keeps_the_contract(case, lab_url):
    case.call_and_validate(base_url=lab_url, headers=AUTH)


@pytest.mark.slow
def test_jobs_follow_their_links_from_submit_to_result(lab_url):
    statuses: dict[str, set[int]] = {}

    class LabMachine(contract.as_state_machine()):
        def get_call_kwargs(self, case):
            return {"base_url": lab_url, "headers": AUTH}

        def after_call(self, response, case):
            statuses.setdefault(case.operation.label, set()).add(response.status_code)

    LabMachine.run(settings=settings(BOUNDED, max_examples=25, stateful_step_count=6, phases=[Phase.generate]))
    # The links were followed with keys the server handed out: some result came back, not only 404s and 409s.
    assert 200 in statuses.get("POST /jobs", set()), statuses
    assert 200 in statuses.get("GET /jobs/{job_key}/result", set()), statuses


# ----------------------------------------------------------------------------------------------- what it took
def test_the_published_schema_says_what_the_server_requires():
    spec = create_app(SimLabDriver(oracle=demo_oracle()), token="t").openapi()
    schemas = spec["components"]["schemas"]
    for kind in ("Molecule", "Material", "Conditions"):
        assert "type" in schemas[kind]["required"], kind  # the discriminator the server needs to tell them apart
    links = spec["paths"]["/jobs"]["post"]["responses"]["200"]["links"]
    assert {link["operationId"] for link in links.values()} == {"job_status", "job_result", "cancel_job"}
    assert all(link["parameters"] == {"job_key": "$response.body#/job_key"} for link in links.values())
    submit = spec["paths"]["/jobs"]["post"]["responses"]
    assert {"400", "401", "409", "413", "422"} <= set(submit)
    assert all(r["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorBody"}
               for code, r in submit.items() if code != "200")
    assert schemas["LabJob"]["properties"]["job_key"]["not"] == {"pattern": "/result\\n?$"}
    open_spec = create_app(SimLabDriver(oracle=demo_oracle())).openapi()  # no token: no security, no 401
    assert "securitySchemes" not in open_spec.get("components", {})
    assert all("401" not in op["responses"] and "security" not in op
               for path in open_spec["paths"].values() for op in path.values())


def test_what_the_schema_forbids_is_refused_and_every_accepted_key_is_reachable(serve_lab):
    server = serve_lab(SimLabDriver(oracle=demo_oracle()), seconds_per_sim_hour=SECONDS_PER_SIM_HOUR)
    job = {"job_key": "k", "candidate": {"type": "conditions", "values": {"x": 1.0}, "id": "c"}}
    with httpx.Client(base_url=server.url) as client:
        # pydantic's lax mode would take JSON true for an integer and a boolean for a number; the schema does not.
        for bad in ({**job, "schema_version": True}, {**job, "schema_version": "1"},
                    {**job, "candidate": {**job["candidate"], "values": {"x": False}}}):
            refused = client.post("/jobs", json=bad)
            assert refused.status_code == 422 and refused.json()["error"] == "invalid_job", refused.text
        untyped = client.post("/jobs", json={**job, "candidate": {"values": {"x": 1.0}, "id": "c"}})
        assert untyped.status_code == 422 and "type" in untyped.json()["message"]
        shadowed = client.post("/jobs", json={**job, "job_key": "k/result"})  # GET /jobs/k/result is k's result
        assert shadowed.status_code == 422 and "ends in '/result'" in shadowed.json()["message"]
        assert client.post("/jobs", json={**job, "job_key": "line\nbreak"}).status_code == 200
        assert client.get("/jobs/line%0Abreak").json()["job_key"] == "line\nbreak"
        unknown = client.get("/nowhere")
        assert unknown.status_code == 404 and unknown.json()["error"] == "not_found"
        wrong_method = client.delete("/jobs/k")
        assert wrong_method.status_code == 405 and wrong_method.json()["error"] == "method_not_allowed"
        assert "GET" in wrong_method.headers["allow"]
