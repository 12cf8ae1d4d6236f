"""The lab server: REST verbs, OpenAPI, token, server-side envelope, journal and restarts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from instruments import FunctionOracle, LabJob, LabJournal, SafetyEnvelope, SimLabDriver
from instruments.server import build_driver, create_app, demo_oracle
from vocabulary.domain import Conditions, SetupError

ONE_EACH = {"synthesis": 1, "workup": 1, "characterisation": 1}
SLOW_SYNTHESIS = {"synthesis": (5 * 3600.0, 0.0), "workup": (600.0, 0.0), "characterisation": (600.0, 0.0)}
VERY_SLOW_SYNTHESIS = {**SLOW_SYNTHESIS, "synthesis": (10 * 3600.0, 0.0)}
ROOT = Path(__file__).resolve().parents[2]


def x_lab(**kwargs) -> SimLabDriver:
    return SimLabDriver(oracle=FunctionOracle(lambda c: c.values["x"], property="x"), **kwargs)


def job_json(key: str, x: float = 1.0, **parameters) -> dict:
    job = LabJob(job_key=key, candidate=Conditions(values={"x": x}, id=f"c-{key}"), parameters=parameters)
    return job.model_dump(mode="json")


def wait_for(predicate, timeout_s: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout_s} s")
        time.sleep(0.01)


def poll_done(client: httpx.Client, keys: list[str], timeout_s: float = 30.0) -> None:
    wait_for(lambda: all(client.get(f"/jobs/{k}").json()["state"] in ("done", "failed") for k in keys),
             timeout_s, f"jobs {keys} finished")


# ----------------------------------------------------------------------------------------------- API
def test_openapi_documents_the_verbs_and_models():
    spec = create_app(x_lab(), token="t").openapi()
    paths = spec["paths"]
    assert set(paths["/jobs"]) == {"post"}
    assert set(paths["/jobs/{job_key}"]) == {"get"}
    assert set(paths["/jobs/{job_key}/result"]) == {"get"}
    assert set(paths["/jobs/{job_key}/cancel"]) == {"post"}
    assert {"/health", "/capabilities", "/envelope"} <= set(paths)
    schemas = spec["components"]["schemas"]
    assert {"LabJob", "JobInfo", "LabResult", "SafetyEnvelope", "ErrorBody"} <= set(schemas)
    assert "HTTPBearer" in spec["components"]["securitySchemes"]
    assert "422" in paths["/jobs"]["post"]["responses"]


def test_verbs_over_http_with_a_key_containing_slashes(serve_lab):
    server = serve_lab(x_lab(stations=ONE_EACH), seconds_per_sim_hour=0.1)  # the job takes ~0.55 s
    key = "campaign-1%2Fcand%209"
    with httpx.Client(base_url=server.url) as client:
        assert client.get("/openapi.json").status_code == 200
        submitted = client.post("/jobs", json=job_json("campaign-1/cand 9", x=4.0))
        early = client.get(f"/jobs/{key}/result")
        assert early.status_code == 409 and early.json()["error"] == "not_finished"
        assert submitted.status_code == 200
        assert submitted.json()["job_key"] == "campaign-1/cand 9" and submitted.json()["driver"] == "simlab"
        again = client.post("/jobs", json=job_json("campaign-1/cand 9", x=4.0))
        assert again.json()["job_key"] == "campaign-1/cand 9"  # idempotent
        poll_done(client, [key])
        result = client.get(f"/jobs/{key}/result").json()
        assert result["value"] == 4.0 and result["status"] == "ok"
        assert client.post(f"/jobs/{key}/cancel").json()["state"] == "done"  # finished: cancel changes nothing
        health = client.get("/health").json()
        assert health["is_ok"] is True and health["n_jobs"]["done"] == 1
        assert health["server"]["n_journaled"]["done"] == 1
        assert client.get("/capabilities").json()["server"]["is_simulated"] is True


def test_unknown_keys_conflicts_and_malformed_jobs(serve_lab):
    server = serve_lab(x_lab(), seconds_per_sim_hour=1.0)  # nothing finishes during the test
    with httpx.Client(base_url=server.url) as client:
        missing = client.get("/jobs/ghost")
        assert missing.status_code == 404 and "ghost" in missing.json()["message"]
        client.post("/jobs", json=job_json("k", x=1.0))
        conflict = client.post("/jobs", json=job_json("k", x=2.0))
        assert conflict.status_code == 409 and conflict.json()["error"] == "key_conflict"
        assert client.post("/jobs", json={"job_key": "bad"}).status_code == 422  # no candidate
        steps = client.post("/jobs", json={**job_json("steps"), "steps": ["xrd"]})
        assert steps.status_code == 400 and "not stations" in steps.json()["message"]
        cancelled = client.post("/jobs", json=job_json("dropped"))
        assert client.post("/jobs/dropped/cancel", json=None).json()["state"] == "cancelled"
        assert cancelled.status_code == 200
        assert client.get("/jobs/dropped/result").json()["error"] == "not_finished"


def test_token_is_required_when_set(serve_lab):
    server = serve_lab(x_lab(), token="s3cret")
    with httpx.Client(base_url=server.url) as client:
        for path in ("/health", "/envelope", "/capabilities", "/jobs/x"):
            refused = client.get(path)
            assert refused.status_code == 401, path
            assert refused.json()["error"] == "unauthorized"
            assert refused.headers["www-authenticate"] == "Bearer"
        assert client.post("/jobs", json=job_json("k")).status_code == 401
        assert client.get("/health", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert client.get("/health", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert client.get("/openapi.json").status_code == 200  # the spec stays readable


class SpyLab(SimLabDriver):
    """A SimLab that remembers what reached its submit."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.seen: list[str] = []

    async def submit(self, job):
        self.seen.append(job.job_key)
        return await super().submit(job)


def test_the_server_checks_the_envelope_before_the_driver_sees_the_job(serve_lab):
    envelope = SafetyEnvelope(name="furnace", parameters={"x": (0, 100, "°C")}, forbidden_hazards={"pyrophoric"})
    spy = SpyLab(oracle=lambda c: 1.0, envelope=envelope)
    server = serve_lab(spy)
    with httpx.Client(base_url=server.url) as client:
        refused = client.post("/jobs", json=job_json("hot", x=300.0, hazards=["pyrophoric"]))
        assert refused.status_code == 422
        body = refused.json()
        assert body["error"] == "envelope_violation"
        assert body["violations"] == [
            "x=300 is outside the furnace envelope 0..100 °C; lower it or use another station",
            "hazard class 'pyrophoric' is forbidden on the furnace; "
            "drop the reagent that carries it or use another lab",
        ]
        assert client.get("/jobs/hot").status_code == 404
        assert client.get("/envelope").json() == envelope.model_dump(mode="json")
        assert client.post("/jobs", json=job_json("fine", x=30.0)).status_code == 200
    assert spy.seen == ["fine"]


# ----------------------------------------------------------------------------------------------- journal
def test_journal_survives_a_restart_and_no_job_runs_twice(serve_lab, tmp_path):
    journal_path = tmp_path / "lab.db"
    keys = [f"j{i}" for i in range(4)]
    first_lab = x_lab(stations=ONE_EACH, durations_s=VERY_SLOW_SYNTHESIS, seed=5)
    first = serve_lab(first_lab, journal_path=journal_path, seconds_per_sim_hour=0.05)
    with httpx.Client(base_url=first.url) as client:
        for i, key in enumerate(keys):
            assert client.post("/jobs", json=job_json(key, x=float(i))).status_code == 200
        # one job finishes every ~0.5 s: stop once two are done, while two are still in the lab
        wait_for(lambda: client.get("/health").json()["server"]["n_journaled"]["done"] >= 2, what="two results")
        before = {k: client.get(f"/jobs/{k}/result") for k in keys}
    first.stop()  # mid-way: some jobs finished, the rest are still in the lab
    finished_before = {k: r.json() for k, r in before.items() if r.status_code == 200}
    assert 2 <= len(finished_before) < len(keys)
    journal = LabJournal(journal_path)
    assert journal.count_states()["accepted"] == len(keys) - len(finished_before)
    stopped_at_s = journal.lab_time_s()
    journal.close()

    second_lab = x_lab(stations=ONE_EACH, durations_s=VERY_SLOW_SYNTHESIS, seed=5)
    second = serve_lab(second_lab, port=first.port, journal_path=journal_path, seconds_per_sim_hour=0.05)
    with httpx.Client(base_url=second.url) as client:
        assert client.post("/jobs", json=job_json("j0", x=0.0)).json()["state"] == "done"  # known key: same job
        poll_done(client, keys)
        after = {k: client.get(f"/jobs/{k}/result").json() for k in keys}
        assert client.get("/health").json()["server"]["n_resubmitted_on_start"] == len(keys) - len(finished_before)
    second.stop()

    assert all(after[k]["status"] == "ok" and after[k]["value"] == float(keys.index(k)) for k in keys)
    for key, result in finished_before.items():
        assert after[key] == result  # served from the journal, unchanged
    # the fresh lab ran exactly the unfinished jobs, after the clock the first one reached
    assert sorted(second_lab._jobs) == sorted(set(keys) - set(finished_before))
    assert all(after[k]["submitted_s"] >= stopped_at_s for k in second_lab._jobs)
    journal = LabJournal(journal_path)
    assert [journal.count_events("completed", k) for k in keys] == [1] * len(keys)
    assert [journal.count_events("accepted", k) for k in keys] == [1] * len(keys)
    assert journal.count_events("resubmitted") == len(second_lab._jobs)
    journal.close()


def test_a_job_that_cannot_be_resubmitted_is_reported_failed(serve_lab, tmp_path):
    journal_path = tmp_path / "lab.db"
    first = serve_lab(x_lab(durations_s=SLOW_SYNTHESIS), journal_path=journal_path, seconds_per_sim_hour=10.0)
    with httpx.Client(base_url=first.url) as client:
        client.post("/jobs", json=job_json("stranded", x=50.0))
    first.stop()
    stricter = x_lab(envelope=SafetyEnvelope(parameters={"x": (0, 10)}))
    second = serve_lab(stricter, journal_path=journal_path)
    with httpx.Client(base_url=second.url) as client:
        result = client.get("/jobs/stranded/result").json()
    assert result["status"] == "failed"
    assert result["reason"].startswith("the lab restarted and could not resubmit the job: job 'stranded' is outside")


@pytest.mark.slow
def test_journal_survives_a_killed_server_process(tmp_path):
    """kill -9 the server process mid-way, restart it on the same port and journal: every job completes once."""
    journal_path = tmp_path / "lab.db"
    params = {"stations": ONE_EACH, "durations_s": SLOW_SYNTHESIS, "seed": 3}

    def start(port: int) -> tuple[subprocess.Popen, str]:
        code = (
            "from instruments.server import run_server; "
            f"run_server('simlab', port={port}, journal={str(journal_path)!r}, driver_params={params!r}, "
            "seconds_per_sim_hour=0.05, log_level='warning')"
        )
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        line = proc.stdout.readline()
        assert line.startswith("closedloop lab: serving simlab on http://127.0.0.1:"), line
        return proc, line.split(" on ")[1].split(" ")[0]

    keys = [f"k{i}" for i in range(5)]
    proc, url = start(0)
    try:
        with httpx.Client(base_url=url, timeout=10) as client:
            for key in keys:
                client.post("/jobs", json=job_json(key))
            wait_for(lambda: client.get("/health").json()["server"]["n_journaled"]["done"] >= 1, what="one result")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    port = int(url.rsplit(":", 1)[1])
    proc, url = start(port)
    try:
        with httpx.Client(base_url=url, timeout=10) as client:
            poll_done(client, keys)
            results = [client.get(f"/jobs/{k}/result").json() for k in keys]
    finally:
        proc.terminate()
        proc.wait(10)
    expected = demo_oracle()(Conditions(values={"x": 1.0}, id="c-k0"))
    assert results[0]["value"] == expected and {r["status"] for r in results} == {"ok"}
    journal = LabJournal(journal_path)
    assert [journal.count_events("completed", k) for k in keys] == [1] * len(keys)
    assert 1 <= journal.count_events("resubmitted") < len(keys)
    journal.close()


# ----------------------------------------------------------------------------------------------- clock, building
def test_the_simulated_clock_runs_on_its_own(serve_lab):
    server = serve_lab(x_lab(), seconds_per_sim_hour=0.01)
    with httpx.Client(base_url=server.url) as client:
        first = client.get("/health").json()["now_s"]
        wait_for(lambda: client.get("/health").json()["now_s"] > first + 3600.0, what="an hour of lab time")


def test_build_driver_for_simlab(tmp_path):
    demo = build_driver("simlab", {"seed": 2})
    assert demo.seed == 2 and demo.oracle.property == "value"
    csv = tmp_path / "truth.csv"
    csv.write_text("id,yield\nc1,0.5\n")
    table = build_driver("simlab", {"oracle_csv": str(csv), "oracle_column": "yield", "faults": {"robot_jam_s": 5}})
    assert table.oracle(Conditions(values={}, id="c1")) == 0.5 and table.faults.robot_jam_s == 5.0
    with pytest.raises(SetupError, match="oracle_column"):
        build_driver("simlab", {"oracle_csv": str(csv)})
    with pytest.raises(SetupError, match="not registered"):
        build_driver("no-such-lab")


def test_bad_time_factor_is_a_setup_error():
    with pytest.raises(SetupError, match="seconds_per_sim_hour"):
        create_app(x_lab(), seconds_per_sim_hour=0)


def test_demo_oracle_is_deterministic_per_candidate_id():
    oracle = demo_oracle()
    values = [oracle(Conditions(values={}, id=f"c{i}")) for i in range(50)]
    assert values == [oracle(Conditions(values={"y": 1}, id=f"c{i}")) for i in range(50)]
    assert all(0.0 <= v < 100.0 for v in values) and len(set(values)) > 40


def test_a_driver_without_a_clock_is_polled_and_journaled(serve_lab):
    """A driver with no simulated clock (like a real lab) is polled by the pump and its results journaled."""

    class PollOnlyLab:
        name, version = "poll-only", "1"
        envelope = SafetyEnvelope()

        def __init__(self):
            self.lab = x_lab(stations={"characterisation": 4}, durations_s={"characterisation": (1.0, 0.0)})

        async def capabilities(self):
            return {}

        @staticmethod
        def inner(handle):
            return handle.model_copy(update={"driver": "simlab"})

        async def submit(self, job):
            handle = await self.lab.submit(job)
            return handle.model_copy(update={"driver": self.name})

        async def status(self, handle):
            self.lab.run_until(self.lab.now + 10.0)  # time passes whenever someone looks
            return await self.lab.status(self.inner(handle))

        async def result(self, handle):
            return await self.lab.result(self.inner(handle))

        async def cancel(self, handle):
            await self.lab.cancel(self.inner(handle))

        async def health(self):
            return {"is_ok": True}

    app_driver = PollOnlyLab()
    server = serve_lab(app_driver)
    assert server.app.state.lab.is_simulated is False
    with httpx.Client(base_url=server.url) as client:
        client.post("/jobs", json={**job_json("p", x=2.0), "steps": ["characterisation"]})
        poll_done(client, ["p"])
        assert client.get("/jobs/p/result").json()["value"] == 2.0
        assert client.get("/health").json()["server"]["n_journaled"]["done"] == 1


# ----------------------------------------------------------------------------------------------- exposure
def test_a_non_loopback_host_needs_a_token(caplog):
    from instruments.server import check_exposure

    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        check_exposure(host, None)
    for host in ("0.0.0.0", "192.168.1.5", "lab.example.org", "::"):
        with pytest.raises(SetupError, match="CLOSEDLOOP_LAB_TOKEN") as refused:
            check_exposure(host, None)
        assert f"--host {host} is reachable from other machines" in str(refused.value)
    assert not caplog.records


def test_a_token_over_plain_http_on_the_network_is_warned_about(caplog):
    from instruments.server import check_exposure

    with caplog.at_level("WARNING", logger="instruments.server"):
        check_exposure("127.0.0.1", "s3cret")
        check_exposure("0.0.0.0", "s3cret", is_tls=True)
        assert not caplog.records
        check_exposure("0.0.0.0", "s3cret")
    [warning] = caplog.records
    assert warning.levelname == "WARNING" and "plain HTTP" in warning.getMessage()
    assert "--ssl-certfile" in warning.getMessage() and "s3cret" not in warning.getMessage()
