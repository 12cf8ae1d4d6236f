"""PyLabRobotDriver on PyLabRobot's own chatterbox liquid handler and plate reader: the driver contract, the
protocol it runs (tips, volumes, plate moves), a reading that comes back through ``PlateReader``, faults and the
install hint."""

from __future__ import annotations

import asyncio
import contextlib
import sys

import pytest

pytest.importorskip("pylabrobot", reason='the PyLabRobot adapter needs pip install "closedloop[pylabrobot]"')

from pylabrobot.liquid_handling import LiquidHandler
from pylabrobot.plate_reading import PlateReader
from pylabrobot.resources import set_volume_tracking
from pylabrobot.resources.volume_tracker import does_volume_tracking

from instruments import FunctionOracle, LabJob
from instruments.adapters.pylabrobot_driver import PyLabRobotDriver
from instruments.testing import DriverContract
from vocabulary.domain import Conditions, InstrumentFault, MissingDependency, SetupError


def absorbance(candidate) -> float:
    """Ground truth of the simulated assay: absorbance rises with the dye fraction of the well."""
    values = candidate.values
    return round(values["dye"] / (values["dye"] + values["buffer"]), 6)


def well_job(key: str, buffer: float = 50.0, dye: float = 10.0, **parameters) -> LabJob:
    return LabJob(job_key=key, candidate=Conditions(values={"buffer": buffer, "dye": dye}, id=f"c-{key}"),
                  parameters=parameters)


async def run_jobs(driver: PyLabRobotDriver, *jobs: LabJob, timeout_s: float = 20.0):
    handles = [await driver.submit(job) for job in jobs]
    for _ in range(int(timeout_s / 0.01)):
        if all([await driver.status(h) in ("done", "failed", "cancelled") for h in handles]):
            break
        await asyncio.sleep(0.01)
    return handles


@pytest.fixture
def volume_tracking():
    """PyLabRobot's volume tracking on for one test (it is a process-wide switch), then back as it was."""
    before = does_volume_tracking()
    set_volume_tracking(True)
    yield
    set_volume_tracking(before)


# ----------------------------------------------------------------------------------------------- contract
class TestPyLabRobotDriver(DriverContract):
    """The whole driver contract against a STARlet deck on PyLabRobot's chatterbox backends."""

    def driver_factory(self) -> PyLabRobotDriver:
        return PyLabRobotDriver.simulated(FunctionOracle(absorbance, property="absorbance"))

    def make_job(self, key: str) -> LabJob:
        return well_job(key, buffer=50.0, dye=float(5 + len(key)))

    def faulty_driver_factory(self) -> PyLabRobotDriver:
        def broken_reader(candidate) -> float:
            raise InstrumentFault("lamp failure: no light reached the detector")

        return PyLabRobotDriver.simulated(FunctionOracle(broken_reader))


# ----------------------------------------------------------------------------------------------- the protocol
def test_reading_is_the_ground_truth_of_the_well_the_robot_filled(capsys, volume_tracking):
    driver = PyLabRobotDriver.simulated(absorbance, reagent_volume_ul=300.0)

    async def scenario():
        handles = await run_jobs(driver, well_job("a", buffer=60.0, dye=20.0), well_job("b", buffer=30.0, dye=30.0))
        results = [await driver.result(h) for h in handles]
        await driver.aclose()
        return results

    first, second = asyncio.run(scenario())
    assert (first.value, second.value) == (0.25, 0.5)
    assert [station for station, _, _ in first.station_log] == ["liquid_handler", "plate_reader"]
    # one well per job, in column order, holding exactly what was dispensed into it
    assert sorted(driver.plate_map) == ["assay_well_A1", "assay_well_B1"]
    assay = driver.liquid_handler.deck.get_resource("assay")
    assert assay.get_well("A1").tracker.get_used_volume() == pytest.approx(80.0)
    assert assay.get_well("B1").tracker.get_used_volume() == pytest.approx(60.0)
    buffer_source = driver.sources["buffer"]
    assert buffer_source.tracker.get_used_volume() == pytest.approx(300.0 - 60.0 - 30.0)
    # a fresh tip per transfer, and the plate back on its carrier after each read
    assert asyncio.run(driver.capabilities())["n_tips_free"] == 96 - 4
    assert assay.parent is not driver.plate_reader and assay.parent.name.startswith("plate_carrier")
    printed = capsys.readouterr().out  # the chatterbox backends print every operation they are sent
    assert printed.count("Aspirating:") == 4 and printed.count("Dispensing:") == 4
    assert "Reading absorbance at wavelength 450." in printed


def test_fluorescence_and_luminescence_use_their_reader_calls(capsys):
    for measurement, printed in (("fluorescence", "Reading fluorescence"), ("luminescence", "Reading luminescence")):
        driver = PyLabRobotDriver.simulated(absorbance, measurement=measurement)

        async def scenario(driver=driver):
            (handle,) = await run_jobs(driver, well_job("f", buffer=10.0, dye=30.0))
            value = (await driver.result(handle)).value
            await driver.aclose()
            return value

        assert asyncio.run(scenario()) == 0.75
        assert printed in capsys.readouterr().out


def test_an_exhausted_reagent_fails_the_job_with_pylabrobots_error(volume_tracking):
    driver = PyLabRobotDriver.simulated(absorbance, reagent_volume_ul=15.0)

    async def scenario():
        ok, starved = await run_jobs(driver, well_job("ok", buffer=10.0, dye=5.0), well_job("starved", buffer=10.0))
        return await driver.result(ok), await driver.result(starved)

    with contextlib.redirect_stdout(None):
        ok, starved = asyncio.run(scenario())
    assert ok.status == "ok"
    assert starved.status == "failed" and starved.reason.startswith("liquid handling failed: TooLittleLiquidError")
    assert starved.value is None


def test_tips_running_out_fails_the_job_before_touching_the_deck():
    driver = PyLabRobotDriver.simulated(absorbance)
    driver.tip_spots = driver.tip_spots[:3]  # two transfers per job: the second job finds one tip

    async def scenario():
        first, second = await run_jobs(driver, well_job("t1"), well_job("t2"))
        health = await driver.health()
        return await driver.result(first), await driver.result(second), health

    with contextlib.redirect_stdout(None):
        first, second, health = asyncio.run(scenario())
    assert first.status == "ok"
    assert second.reason == "consumable exhausted: 2 tips needed, 1 left; load fresh tip racks and build a new driver"
    assert health["is_ok"] is True and health["n_tips_free"] == 1


def test_volumes_beyond_a_well_are_refused_at_submit():
    driver = PyLabRobotDriver.simulated(absorbance)
    with pytest.raises(Exception, match="more than a well of 'assay' holds") as refused:
        asyncio.run(driver.submit(well_job("flood", buffer=300.0, dye=300.0)))
    assert type(refused.value).__name__ == "EnvelopeViolation"


def test_a_job_without_a_deck_reagent_is_a_setup_error():
    driver = PyLabRobotDriver.simulated(absorbance)
    job = LabJob(job_key="dry", candidate=Conditions(values={"temperature_c": 25.0}, id="dry"))
    with pytest.raises(SetupError, match=r"names no reagent on the deck \['buffer', 'dye'\]"):
        asyncio.run(driver.submit(job))


def test_a_saved_deck_json_runs_the_same_protocol(tmp_path, capsys):
    """The path a campaign spec gives (lab.parameters.liquid_handler): PyLabRobot's own JSON, backends included."""
    simulated = PyLabRobotDriver.simulated(absorbance)
    path = tmp_path / "deck.json"
    simulated.liquid_handler.deck.get_resource("plate_reader").backend = _plain_chatterbox_reader()
    simulated.liquid_handler.save(str(path))
    driver = PyLabRobotDriver(str(path), reagents={"buffer": "reagents_well_A1", "dye": "reagents_well_B1"},
                              plate="assay", tip_racks=["tips"])
    assert isinstance(driver.liquid_handler, LiquidHandler) and isinstance(driver.plate_reader, PlateReader)

    async def scenario():
        (handle,) = await run_jobs(driver, well_job("json"))
        result = await driver.result(handle)
        await driver.aclose()
        return result

    result = asyncio.run(scenario())
    assert result.status == "ok" and result.value == 0.0  # PyLabRobot's plain chatterbox reader reads 0.0
    assert "Reading absorbance at wavelength 450." in capsys.readouterr().out


def _plain_chatterbox_reader():
    from pylabrobot.plate_reading.chatterbox import PlateReaderChatterboxBackend

    return PlateReaderChatterboxBackend()


def test_deck_problems_are_setup_errors_naming_the_fix():
    simulated = PyLabRobotDriver.simulated(absorbance)
    lh = simulated.liquid_handler
    with pytest.raises(SetupError, match="reagent source 'reagents_well_H12x' is not on the deck"):
        PyLabRobotDriver(lh, reagents={"buffer": "reagents_well_H12x"}, plate="assay")
    with pytest.raises(SetupError, match="cannot load a PyLabRobot liquid handler"):
        PyLabRobotDriver("/nonexistent/deck.json", reagents={"buffer": "x"}, plate="assay")


def test_missing_pylabrobot_names_the_extra(monkeypatch):
    for module in [name for name in sys.modules if name == "pylabrobot" or name.startswith("pylabrobot.")]:
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingDependency, match=r'pip install "closedloop\[pylabrobot\]"'):
        PyLabRobotDriver.simulated(absorbance)
