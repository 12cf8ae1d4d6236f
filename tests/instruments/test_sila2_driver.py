"""Sila2Driver against a real SiLA 2 server started in-process on 127.0.0.1 from the repo's
ClosedLoopExperiment.sila.xml: the driver contract, waiting/running/finished statuses, cancel, errors, TLS and the
install hint."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest

pytest.importorskip("sila2", reason='the SiLA 2 adapter needs pip install "closedloop[sila2]"')

from instruments import EnvelopeViolation, LabJob, SafetyEnvelope
from instruments.adapters.sila2_driver import Sila2Driver
from instruments.adapters.sila2_server import FEATURE_XML, load_feature, serve_sila_lab
from instruments.testing import DriverContract
from vocabulary.domain import Conditions, InstrumentFault, MissingDependency, SetupError

ENVELOPE = SafetyEnvelope(name="sila bench", parameters={"x": (0.0, 100.0)}, forbidden_hazards={"pyrophoric"})


def measure_x(job: LabJob) -> tuple[float, float]:
    """The instrument's answer: 2x, with an uncertainty of 0.1."""
    return 2.0 * job.candidate.values["x"], 0.1


def x_job(key: str, x: float = 1.0, **parameters) -> LabJob:
    return LabJob(job_key=key, candidate=Conditions(values={"x": x}, id=f"c-{key}"), parameters=parameters)


async def wait_terminal(driver: Sila2Driver, handles, timeout_s: float = 20.0) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while True:
        states = [await driver.status(h) for h in handles]
        if all(s in ("done", "failed", "cancelled") for s in states):
            return states
        assert time.monotonic() < deadline, f"jobs still {states}"
        await asyncio.sleep(0.02)


@pytest.fixture
def sila_lab():
    """Start SiLA servers on free loopback ports: ``sila_lab(measure, **serve_sila_lab_kwargs)``; all stopped after."""
    servers = []

    def start(measure=measure_x, **kwargs):
        kwargs.setdefault("envelope", ENVELOPE)
        server = serve_sila_lab(measure, **kwargs)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop(grace_period=0)


# ----------------------------------------------------------------------------------------------- contract
class TestSila2Driver(DriverContract):
    """The whole driver contract over gRPC against a SiLA 2 server built from the repo's feature definition."""

    experiment_s = 0.3  # long enough for a job to be caught waiting or running

    @pytest.fixture(autouse=True)
    def _servers(self, sila_lab):
        self.sila_lab = sila_lab

    def driver_factory(self) -> Sila2Driver:
        server = self.sila_lab(measure_x, experiment_s=self.experiment_s)
        return Sila2Driver("127.0.0.1", server.sila_port, insecure=True)

    def faulty_driver_factory(self) -> Sila2Driver:
        def lamp_failure(job: LabJob) -> float:
            raise InstrumentFault("bad reading: the lamp failed during the read")

        server = self.sila_lab(lamp_failure, experiment_s=0.05)
        return Sila2Driver("127.0.0.1", server.sila_port, insecure=True)


# ----------------------------------------------------------------------------------------------- behaviour
def test_the_feature_definition_in_the_repo_is_what_the_server_serves(sila_lab):
    feature = load_feature()
    assert FEATURE_XML.name == "ClosedLoopExperiment.sila.xml" and FEATURE_XML.parent.name == "adapters"
    assert list(feature._observable_commands) == ["RunExperiment"]
    assert sorted(feature._unobservable_properties) == ["InstrumentStatus", "SafetyEnvelope"]
    driver = Sila2Driver("127.0.0.1", sila_lab().sila_port, insecure=True)

    async def scenario():
        capabilities = await driver.capabilities()
        envelope = await driver.fetch_envelope()
        await driver.aclose()
        return capabilities, envelope

    capabilities, envelope = asyncio.run(scenario())
    assert "org.closedloop/experiment/ClosedLoopExperiment/v1" in capabilities["implemented_features"]
    assert capabilities["server_type"] == "ClosedLoopLab"
    assert envelope == ENVELOPE  # the SafetyEnvelope property, read over SiLA


def test_value_and_uncertainty_come_back_from_the_observable_command(sila_lab):
    server = sila_lab(experiment_s=0.2)
    driver = Sila2Driver("127.0.0.1", server.sila_port, insecure=True)

    async def scenario():
        first, second = await driver.submit(x_job("a", 3.0)), await driver.submit(x_job("b", 4.0))
        seen = {await driver.status(first), await driver.status(second)}
        busy = await driver.health()
        await wait_terminal(driver, [first, second])
        results = [await driver.result(first), await driver.result(second)]
        await driver.aclose()
        return seen, busy, results

    seen, busy, (first, second) = asyncio.run(scenario())
    assert seen <= {"queued", "running"} and "queued" in seen  # one instrument: the second job waits
    assert busy["is_ok"] is True and busy["instrument_status"].startswith("Busy: running job")
    assert (first.value, first.uncertainty, second.value) == (6.0, 0.1, 8.0)
    assert first.station_log[0][0] == "ClosedLoopExperiment" and first.station_time_s > 0.1


def test_resubmitting_after_a_client_restart_runs_nothing_twice(sila_lab):
    server = sila_lab(experiment_s=0.05)

    async def run_once():
        driver = Sila2Driver("127.0.0.1", server.sila_port, insecure=True)
        handle = await driver.submit(x_job("again", 5.0))
        await wait_terminal(driver, [handle])
        result = await driver.result(handle)
        await driver.aclose()
        return result

    first, second = asyncio.run(run_once()), asyncio.run(run_once())  # a fresh driver knows nothing of the first
    assert first.value == second.value == 10.0
    assert server.experiment_impl.n_experiments == 1  # the server answered the repeat from the first run


def test_cancel_a_running_experiment(sila_lab):
    server = sila_lab(experiment_s=5.0)
    driver = Sila2Driver("127.0.0.1", server.sila_port, insecure=True)

    async def scenario():
        handle = await driver.submit(x_job("long"))
        while await driver.status(handle) != "running":
            await asyncio.sleep(0.02)
        started = time.monotonic()
        await driver.cancel(handle)
        state = await driver.status(handle)
        with pytest.raises(InstrumentFault, match="cancelled"):
            await driver.result(handle)
        while server.experiment_impl.current is not None:
            await asyncio.sleep(0.02)
        await driver.aclose()
        return state, time.monotonic() - started

    state, stopped_after_s = asyncio.run(scenario())
    assert state == "cancelled" and stopped_after_s < 2.0  # the instrument stopped, it did not run its 5 s


def test_an_out_of_envelope_job_is_refused_before_it_reaches_the_server(sila_lab):
    server = sila_lab()
    driver = Sila2Driver("127.0.0.1", server.sila_port, insecure=True)
    with pytest.raises(EnvelopeViolation, match="x=500"):
        asyncio.run(driver.submit(x_job("hot", 500.0)))
    assert server.experiment_impl.runs == {}


def test_the_server_refuses_what_its_envelope_forbids_even_from_a_driver_that_does_not_check(sila_lab):
    server = sila_lab(experiment_s=0.01)
    permissive = Sila2Driver("127.0.0.1", server.sila_port, insecure=True, envelope={"name": "anything"})

    async def scenario():
        handle = await permissive.submit(x_job("bypass", 1.0, hazards=["pyrophoric"]))
        await wait_terminal(permissive, [handle])
        result = await permissive.result(handle)
        await permissive.aclose()
        return result

    result = asyncio.run(scenario())
    assert result.status == "failed" and result.reason.startswith("measurement failed: refused: hazard class")


def test_an_unreachable_server_is_an_instrument_fault_and_unhealthy():
    driver = Sila2Driver("127.0.0.1", 9, insecure=True, timeout_s=2.0)
    health = asyncio.run(driver.health())
    assert health["is_ok"] is False and "127.0.0.1:9" in health["reason"]
    with pytest.raises(InstrumentFault, match="127.0.0.1:9"):
        asyncio.run(driver.submit(x_job("nowhere")))


def test_tls_with_the_servers_certificate(sila_lab, tmp_path):
    from uuid import uuid4

    from sila2.server.encryption import generate_self_signed_certificate

    server_uuid = uuid4()  # a SiLA server certificate names the server's UUID
    private_key, certificate = generate_self_signed_certificate(server_uuid, "127.0.0.1")
    server = sila_lab(experiment_s=0.01, private_key=private_key, cert_chain=certificate, server_uuid=server_uuid)
    ca = tmp_path / "ca.pem"
    ca.write_bytes(certificate)
    driver = Sila2Driver("127.0.0.1", server.sila_port, root_certs=str(ca))

    async def scenario():
        handle = await driver.submit(x_job("tls", 2.5))
        await wait_terminal(driver, [handle])
        result = await driver.result(handle)
        await driver.aclose()
        return result

    assert asyncio.run(scenario()).value == 5.0


def test_bad_settings_are_setup_errors():
    with pytest.raises(SetupError, match="port=0 is not a TCP port"):
        Sila2Driver("127.0.0.1", 0)


def test_missing_sila2_names_the_extra(monkeypatch):
    for module in [name for name in sys.modules if name == "sila2" or name.startswith("sila2.")]:
        monkeypatch.setitem(sys.modules, module, None)
    driver = Sila2Driver("127.0.0.1", 50052, insecure=True)
    with pytest.raises(MissingDependency, match=r'pip install "closedloop\[sila2\]"'):
        asyncio.run(driver.health())
