"""HttpDriver against a real uvicorn server on 127.0.0.1: the driver contract, retries, restarts and error mapping."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from fastapi.responses import JSONResponse

from instruments import (
    EnvelopeViolation,
    FaultPlan,
    FunctionOracle,
    HttpDriver,
    JobHandle,
    LabJob,
    LabJournal,
    SafetyEnvelope,
    SimLabDriver,
    available_drivers,
    load_driver,
)
from instruments.server import ServerThread, create_app
from instruments.testing import DriverContract
from vocabulary.domain import Conditions, InstrumentFault, SetupError

ONE_EACH = {"synthesis": 1, "workup": 1, "characterisation": 1}
SLOW_SYNTHESIS = {"synthesis": (5 * 3600.0, 0.0), "workup": (600.0, 0.0), "characterisation": (600.0, 0.0)}
ENVELOPE = SafetyEnvelope(name="bench", parameters={"x": (0.0, 100.0)}, forbidden_hazards={"pyrophoric"})


def x_lab(**kwargs) -> SimLabDriver:
    return SimLabDriver(oracle=FunctionOracle(lambda c: c.values["x"], property="x"), **kwargs)


def make_job(key: str, x: float = 1.0, **parameters) -> LabJob:
    return LabJob(job_key=key, candidate=Conditions(values={"x": x}, id=f"c-{key}"), parameters=parameters)


async def wait_done(lab: HttpDriver, handles, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not all([await lab.status(h) in ("done", "failed") for h in handles]):
        assert time.monotonic() < deadline, "jobs did not finish"
        await asyncio.sleep(0.02)


# ----------------------------------------------------------------------------------------------- contract
class TestHttpDriver(DriverContract):
    """The whole driver contract, through HTTP, against a SimLab served by uvicorn on a free port."""

    seconds_per_sim_hour = 0.1  # a ~6 h job takes ~0.6 s: long enough to be caught unfinished

    @pytest.fixture(autouse=True)
    def _servers(self):
        self.servers: list[ServerThread] = []
        yield
        for server in self.servers:
            server.stop()

    def serve(self, lab: SimLabDriver) -> HttpDriver:
        app = create_app(lab, token="contract-token", seconds_per_sim_hour=self.seconds_per_sim_hour)
        server = ServerThread(app).start()
        self.servers.append(server)
        return HttpDriver(server.url, token="contract-token", retries=2, backoff_s=0.05)

    def driver_factory(self) -> HttpDriver:
        return self.serve(x_lab(noise_sd=0.1, seed=7, envelope=ENVELOPE))

    def faulty_driver_factory(self) -> HttpDriver:
        return self.serve(x_lab(seed=7, faults=FaultPlan(bad_reading_probability=1.0)))


# ----------------------------------------------------------------------------------------------- behaviour
def test_envelope_is_fetched_from_the_server(serve_lab):
    server = serve_lab(x_lab(envelope=ENVELOPE))
    lab = HttpDriver(server.url)
    assert lab.envelope == ENVELOPE  # synchronous first use
    assert asyncio.run(lab.fetch_envelope()) == ENVELOPE


def test_out_of_envelope_job_raises_envelope_violation_with_every_message(serve_lab):
    server = serve_lab(x_lab(envelope=ENVELOPE))
    lab = HttpDriver(server.url)
    with pytest.raises(EnvelopeViolation) as refused:
        asyncio.run(lab.submit(make_job("hot", x=500.0, hazards=["Pyrophoric"])))
    assert refused.value.job_key == "hot"
    assert refused.value.violations == (
        "x=500 is outside the bench envelope 0..100; lower it or use another station",
        "hazard class 'Pyrophoric' is forbidden on the bench; drop the reagent that carries it or use another lab",
    )


def test_errors_map_to_setup_error_and_instrument_fault(serve_lab):
    server = serve_lab(x_lab(), token="s3cret", seconds_per_sim_hour=1.0)  # nothing finishes during the test

    async def scenario():
        anonymous = HttpDriver(server.url, retries=0)
        with pytest.raises(SetupError, match="401"):
            await anonymous.submit(make_job("k"))
        async with HttpDriver(server.url, token="s3cret") as lab:
            await lab.submit(make_job("k", x=1.0))
            with pytest.raises(SetupError, match="different job"):
                await lab.submit(make_job("k", x=2.0))
            with pytest.raises(SetupError, match="not stations"):
                await lab.submit(LabJob(job_key="xrd", candidate=Conditions(values={}, id="c"), steps=("xrd",)))
            with pytest.raises(InstrumentFault, match="has no result yet"):
                await lab.result(JobHandle(job_key="k", driver="http"))
            with pytest.raises(InstrumentFault, match="belongs to driver 'simlab'"):
                await lab.status(JobHandle(job_key="k", driver="simlab"))

    asyncio.run(scenario())


def test_lab_clock_follows_the_answers(serve_lab):
    server = serve_lab(x_lab())

    async def scenario():
        lab = HttpDriver(server.url)
        handle = await lab.submit(make_job("tick"))
        await wait_done(lab, [handle])
        result = await lab.result(handle)
        await lab.status(handle)
        return lab.now, result

    now, result = asyncio.run(scenario())
    assert now >= result.completed_s > 0


def test_an_unreachable_lab_fails_after_the_retries_and_reports_unhealthy(serve_lab):
    server = serve_lab(x_lab())
    url = server.url
    server.stop()
    lab = HttpDriver(url, retries=2, backoff_s=0.01)
    with pytest.raises(InstrumentFault, match=r"did not answer POST /jobs after 3 attempts \(ConnectError"):
        asyncio.run(lab.submit(make_job("lost")))
    health = asyncio.run(lab.health())
    assert health["is_ok"] is False and "did not answer GET /health" in health["reason"]


def test_5xx_answers_are_retried(serve_lab):
    app = create_app(x_lab())
    calls = {"n": 0}

    @app.middleware("http")
    async def flaky(request, call_next):
        if request.url.path == "/jobs":
            calls["n"] += 1
            if calls["n"] <= 2:
                return JSONResponse({"error": "instrument_fault", "message": "busy"}, status_code=503)
        return await call_next(request)

    server = ServerThread(app).start()
    try:
        lab = HttpDriver(server.url, retries=3, backoff_s=0.01)
        handle = asyncio.run(lab.submit(make_job("patient")))
        assert handle.job_key == "patient" and calls["n"] == 3 and lab.n_retries == 2
        with pytest.raises(InstrumentFault, match="HTTP 503: busy"):
            calls["n"] = 0
            asyncio.run(HttpDriver(server.url, retries=1, backoff_s=0.01).submit(make_job("impatient")))
    finally:
        server.stop()


def test_the_driver_rides_out_a_server_restart(serve_lab, tmp_path):
    """Stop the server mid-campaign and bring it back on the same port and journal while the driver keeps asking."""
    journal_path = tmp_path / "lab.db"
    first = serve_lab(x_lab(stations=ONE_EACH, durations_s=SLOW_SYNTHESIS), journal_path=journal_path,
                      seconds_per_sim_hour=0.05)
    port = first.port
    lab = HttpDriver(first.url, retries=10, backoff_s=0.05, max_backoff_s=0.3, timeout_s=5.0)
    keys = [f"r{i}" for i in range(4)]

    async def campaign():
        handles = [await lab.submit(make_job(k, x=float(i))) for i, k in enumerate(keys)]
        while await lab.status(handles[0]) != "done":
            await asyncio.sleep(0.02)
        restarted = threading.Event()

        def restart():
            first.stop()
            time.sleep(0.3)  # the driver meets a closed port meanwhile
            serve_lab(x_lab(stations=ONE_EACH, durations_s=SLOW_SYNTHESIS), port=port, journal_path=journal_path,
                      seconds_per_sim_hour=0.05)
            restarted.set()

        thread = threading.Thread(target=restart)
        thread.start()
        await asyncio.sleep(0.1)
        handles.append(await lab.submit(make_job("during-restart", x=9.0)))  # retried until the server is back
        await wait_done(lab, handles)
        thread.join()
        assert restarted.is_set()
        return [await lab.result(h) for h in handles]

    results = asyncio.run(campaign())
    assert lab.n_retries > 0  # it did meet the closed port
    assert [r.value for r in results] == [0.0, 1.0, 2.0, 3.0, 9.0]
    assert {r.status for r in results} == {"ok"}
    journal = LabJournal(journal_path)
    for key in [*keys, "during-restart"]:
        assert journal.count_events("completed", key) == 1
        assert journal.count_events("accepted", key) == 1
    assert journal.count_events("resubmitted") >= 1
    journal.close()


def test_one_client_per_event_loop(serve_lab):
    server = serve_lab(x_lab())
    lab = HttpDriver(server.url)
    handle = asyncio.run(lab.submit(make_job("loop-1")))
    assert asyncio.run(lab.status(handle)) in ("queued", "running", "done")  # a second loop, a second client
    assert asyncio.run(lab.capabilities())["remote_url"] == server.url


def test_bad_construction_is_a_setup_error():
    with pytest.raises(SetupError, match="http://"):
        HttpDriver("127.0.0.1:8000")
    with pytest.raises(SetupError, match="retries"):
        HttpDriver("http://127.0.0.1:1", retries=-1)


@pytest.mark.skipif("http" not in available_drivers(), reason='needs http = "instruments.http_driver:HttpDriver" '
                    'under [project.entry-points."closedloop.instruments"] in pyproject.toml, then pip install -e .')
def test_http_driver_is_registered():
    lab = load_driver("http", base_url="http://127.0.0.1:9", retries=0)
    assert isinstance(lab, HttpDriver)  # constructing it contacts nothing
