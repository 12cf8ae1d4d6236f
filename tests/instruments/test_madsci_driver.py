"""MadsciDriver against a real MADSci REST node (madsci.node_module.RestNode) served by uvicorn on 127.0.0.1 in the
test: the driver contract, argument mapping from the node's /info, failed and refused actions, and health.

MADSci 0.8.1 cannot start a node with the pydantic this project runs (pydantic-core 2.50): two of its models
(``OwnershipInfo``, ``NodeClientCapabilities``) call pydantic's wrap-serializer handler as ``nxt(self, info)``, and
pydantic-core now refuses a ``SerializationInfo`` where an index key belongs. ``madsci_compat`` below swaps the body
of those two serializers for the documented ``nxt(self)`` in this test process only; everything else that serves the
node is MADSci's own code.
"""

# No "from __future__ import annotations": MADSci reads the action's annotations as real types.
import asyncio
import threading
import time
from typing import ClassVar

import pytest

pytest.importorskip("madsci.node_module", reason='the MADSci tests need pip install "closedloop[madsci]"')

from instruments import EnvelopeViolation, LabJob, SafetyEnvelope
from instruments.adapters.madsci_driver import MadsciDriver
from instruments.server import ServerThread
from instruments.testing import DriverContract
from vocabulary.domain import Conditions, InstrumentFault, SetupError

ENVELOPE = SafetyEnvelope(name="madsci bench", parameters={"dye": (0.0, 200.0, "µL")}, forbidden_hazards={"H224"})


def _exclude_none(self, nxt, info):
    serialized = nxt(self)
    return {k: v for k, v in serialized.items() if v is not None}


@pytest.fixture(scope="module")
def madsci_compat():
    """Let MADSci 0.8.1 serialise its models under pydantic-core 2.50 (see the module docstring); undone after."""
    from madsci.common.types.auth_types import OwnershipInfo
    from madsci.common.types.node_types import NodeClientCapabilities

    functions = [cls.__pydantic_decorators__.model_serializers["exclude_unset_by_default"].func
                 for cls in (OwnershipInfo, NodeClientCapabilities)]
    originals = [fn.__code__ for fn in functions]
    for fn in functions:
        fn.__code__ = _exclude_none.__code__
    yield
    for fn, code in zip(functions, originals, strict=True):
        fn.__code__ = code


def assay_node_class(*, fails: bool = False, seconds: float = 0.2):
    """A MADSci node with one action, ``measure``, that reads the absorbance of a dye/buffer mix.

    Each call makes a new class: MADSci keeps a node's status, history and action table in class variables.
    """
    from madsci.common.types.action_types import ActionFailed
    from madsci.common.types.node_types import NodeStatus, RestNodeConfig
    from madsci.node_module import RestNode
    from madsci.node_module.helpers import action

    class AssayNode(RestNode):
        config_model = RestNodeConfig
        node_status = NodeStatus(initializing=True)
        node_state: ClassVar[dict] = {}
        action_handlers: ClassVar[dict] = {}
        action_history: ClassVar[dict] = {}
        _action_lock = threading.Lock()
        seen_args: ClassVar[list] = []

        @action(blocking=True)
        def measure(self, dye: float, buffer: float = 50.0, job_key: str = "") -> dict:
            """Mix and read one well; returns the absorbance and its standard deviation."""
            self.seen_args.append({"dye": dye, "buffer": buffer, "job_key": job_key})
            time.sleep(seconds)
            if fails:
                return ActionFailed(errors="bad reading: the plate reader lamp failed")
            return {"value": round(dye / (dye + buffer), 6), "uncertainty": 0.01}

    return AssayNode


@pytest.fixture(scope="module")
def madsci_node(madsci_compat, tmp_path_factory):
    """Serve MADSci nodes on free loopback ports: ``madsci_node(**assay_node_class_kwargs) -> (node, url)``.

    One node per distinct set of arguments serves the whole module (a node takes most of a second to start); a
    driver is still new in every test, and MADSci names every action by a fresh ULID.
    """
    from madsci.common.types.node_types import RestNodeConfig

    settings_dir = tmp_path_factory.mktemp("madsci")
    (settings_dir / ".madsci").mkdir()
    nodes, servers = {}, []
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MADSCI_SETTINGS_DIR", str(settings_dir))  # MADSci's logs and files go here, not ~/.madsci

        def start(**kwargs):
            key = tuple(sorted(kwargs.items()))
            if key not in nodes:
                node = assay_node_class(**kwargs)(node_config=RestNodeConfig(
                    node_name="assay", node_url="http://127.0.0.1:2000", enable_registry_resolution=False,
                    enable_rate_limiting=False))
                node.start_node(testing=True)  # builds node.rest_api, MADSci's FastAPI app, without uvicorn
                server = ServerThread(node.rest_api).start()
                servers.append(server)
                nodes[key] = node, server.url
            return nodes[key]

        yield start
        for server in servers:
            server.stop()


def dye_job(key: str, dye: float = 10.0, **parameters) -> LabJob:
    return LabJob(job_key=key, candidate=Conditions(values={"dye": dye, "buffer": 30.0}, id=f"c-{key}"),
                  parameters=parameters)


async def wait_terminal(driver, handles, timeout_s: float = 30.0):
    deadline = time.monotonic() + timeout_s
    while not all([await driver.status(h) in ("done", "failed", "cancelled") for h in handles]):
        assert time.monotonic() < deadline, "jobs did not finish"
        await asyncio.sleep(0.02)


# ----------------------------------------------------------------------------------------------- contract
class TestMadsciDriver(DriverContract):
    """The whole driver contract over HTTP against MADSci's RestNode."""

    @pytest.fixture(autouse=True)
    def _node(self, madsci_node):
        self.madsci_node = madsci_node

    def driver_factory(self) -> MadsciDriver:
        _, url = self.madsci_node()
        return MadsciDriver(url, action="measure", envelope=ENVELOPE)

    def make_job(self, key: str) -> LabJob:
        return dye_job(key, dye=float(5 + len(key)))

    def faulty_driver_factory(self) -> MadsciDriver:
        _, url = self.madsci_node(fails=True, seconds=0.0)
        return MadsciDriver(url, action="measure")


# ----------------------------------------------------------------------------------------------- behaviour
def test_settings_named_like_the_actions_arguments_are_sent(madsci_node):
    node, url = madsci_node(seconds=0.0)
    driver = MadsciDriver(url, action="measure")

    async def scenario():
        handle = await driver.submit(dye_job("mix", dye=10.0, temperature_c=25.0))
        await wait_terminal(driver, [handle])
        result = await driver.result(handle)
        capabilities = await driver.capabilities()
        await driver.aclose()
        return result, capabilities

    result, capabilities = asyncio.run(scenario())
    assert (result.value, result.uncertainty) == (0.25, 0.01)
    # buffer came from the candidate, job_key from the job; temperature_c is no argument of measure, so not sent
    assert type(node).seen_args == [{"dye": 10.0, "buffer": 30.0, "job_key": "mix"}]
    assert capabilities["actions"] == ["measure"] and capabilities["node_name"] == "assay"


def test_a_job_that_cannot_fill_a_required_argument_is_refused_at_submit(madsci_node):
    _, url = madsci_node()
    driver = MadsciDriver(url, action="measure")
    job = LabJob(job_key="dry", candidate=Conditions(values={"buffer": 30.0}, id="dry"))
    with pytest.raises(SetupError, match=r"required argument\(s\) \['dye'\] of action 'measure'"):
        asyncio.run(driver.submit(job))
    with pytest.raises(SetupError, match="has no action 'pipette'; its actions are \\['measure'\\]"):
        asyncio.run(MadsciDriver(url, action="pipette").submit(dye_job("x")))


def test_an_out_of_envelope_job_never_reaches_the_node(madsci_node):
    node, url = madsci_node()
    driver = MadsciDriver(url, action="measure", envelope=ENVELOPE)
    with pytest.raises(EnvelopeViolation, match="hazard class 'H224'"):
        asyncio.run(driver.submit(dye_job("flammable", hazards=["H224"])))
    assert "flammable" not in [args["job_key"] for args in type(node).seen_args]


def test_health_reads_the_node_status_and_an_absent_node_is_unhealthy(madsci_node):
    _, url = madsci_node()
    assert asyncio.run(MadsciDriver(url, action="measure").health())["is_ok"] is True
    gone = asyncio.run(MadsciDriver("http://127.0.0.1:9", action="measure").health())
    assert gone["is_ok"] is False and "127.0.0.1:9" in gone["reason"]
    with pytest.raises(InstrumentFault, match="did not answer GET /info"):
        asyncio.run(MadsciDriver("http://127.0.0.1:9", action="measure", retries=0).submit(dye_job("x")))


def test_a_running_action_cannot_be_cancelled_on_a_node_without_the_cancel_command(madsci_node):
    _, url = madsci_node(seconds=1.0)
    driver = MadsciDriver(url, action="measure")

    async def scenario():
        handle = await driver.submit(dye_job("busy"))
        while await driver.status(handle) != "running":
            await asyncio.sleep(0.02)
        with pytest.raises(InstrumentFault, match="could not cancel job 'busy'"):
            await driver.cancel(handle)
        await wait_terminal(driver, [handle])
        state = await driver.status(handle)
        await driver.aclose()
        return state

    assert asyncio.run(scenario()) == "done"


def test_bad_urls_are_setup_errors():
    with pytest.raises(SetupError, match="must start with http"):
        MadsciDriver("127.0.0.1:2000")


def test_a_locked_node_makes_the_job_wait_then_fail_with_the_nodes_reason(madsci_node):
    import httpx

    _, url = madsci_node(seconds=0.01)
    driver = MadsciDriver(url, action="measure", ready_timeout_s=0.5)
    assert httpx.post(f"{url}/admin/lock").json()["success"] is True
    try:
        async def scenario():
            handle = await driver.submit(dye_job("locked"))
            await wait_terminal(driver, [handle])
            result = await driver.result(handle)
            health = await driver.health()
            await driver.aclose()
            return result, health

        result, health = asyncio.run(scenario())
    finally:
        httpx.post(f"{url}/admin/unlock")
    assert result.status == "failed" and result.reason.startswith("node not ready: Node is locked after 0.5 s")
    assert health["is_ok"] is False and health["node_status"] == "Node is locked"
