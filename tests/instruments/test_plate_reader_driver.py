"""The notebook's example driver (``notebooks/plate_reader_driver.py``), a ``BaseDriver`` subclass with a simulated
clock: the whole contract, plus what the kit must not break for it (cancel mid-incubation, the simulated clock, its
metrics)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from instruments import BaseDriver, LabJob, SimulatedClock
from instruments.testing import DriverContract
from vocabulary.domain import Conditions

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
sys.path.insert(0, str(NOTEBOOKS))
from plate_reader_driver import READ_S, PlateReaderDriver  # noqa: E402

sys.path.remove(str(NOTEBOOKS))


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("reader") / "calibration.csv"
    path.write_text("x,absorbance\n" + "".join(f"{x},{0.02 * x:.2f}\n" for x in range(1, 51)))
    return path


def plate(key: str, x: float = 3.0, **parameters) -> LabJob:
    return LabJob(job_key=key, candidate=Conditions(values={"x": x}, id=f"c-{key}"), parameters=parameters)


class TestPlateReaderContract(DriverContract):
    @pytest.fixture(autouse=True)
    def _table(self, table):
        self.table = table

    def driver_factory(self):
        return PlateReaderDriver(oracle_csv=str(self.table), value_column="absorbance", noise_sd=0.01, seed=7)

    def faulty_driver_factory(self):
        return PlateReaderDriver(oracle_csv=str(self.table), value_column="absorbance", bad_read_probability=1.0)


def test_it_is_a_kit_driver_with_a_simulated_clock(table):
    reader = PlateReaderDriver(oracle_csv=str(table), value_column="absorbance")
    assert isinstance(reader, BaseDriver) and isinstance(reader, SimulatedClock)


def test_a_plate_reads_its_table_value_on_the_simulated_clock(table):
    reader = PlateReaderDriver(oracle_csv=str(table), value_column="absorbance", incubation_s=600.0)
    handle = asyncio.run(reader.submit(plate("p1", x=10.0, plate_type="384-well")))
    finished_s = reader.run_until_complete([handle])
    result = asyncio.run(reader.result(handle))
    assert result.value == pytest.approx(0.2) and result.completed_s == finished_s
    (incubator, in_s, out_s), (reader_head, read_in_s, read_out_s) = result.station_log
    assert (incubator, reader_head) == ("incubator", "reader")
    assert read_out_s - read_in_s == pytest.approx(READ_S["384-well"]) and read_in_s == out_s and in_s == 0.0


def test_a_cancelled_plate_leaves_the_incubator_to_the_next_one(table):
    reader = PlateReaderDriver(oracle_csv=str(table), value_column="absorbance", n_incubator_slots=1)

    async def scenario():
        first, second = await reader.submit(plate("first")), await reader.submit(plate("second"))
        reader.run_until(60.0)  # first incubates, second waits for the slot
        states = (await reader.status(first), await reader.status(second))
        await reader.cancel(first)
        reader.run_until_complete([second])
        return states, await reader.status(first), await reader.result(second)

    states, first_state, second = asyncio.run(scenario())
    assert states == ("running", "queued") and first_state == "cancelled"
    assert second.station_log[0][1] == 60.0  # the slot was freed when the first plate was ejected
    metrics = reader.metrics()
    assert metrics.n_jobs["cancelled"] == 1 and metrics.n_jobs["done"] == 1
    assert [row[:2] for row in metrics.gantt] == [("first", "incubator"), ("second", "incubator"),
                                                  ("second", "reader")]


def test_a_plate_cancelled_before_its_process_starts_never_runs(table):
    reader = PlateReaderDriver(oracle_csv=str(table), value_column="absorbance")

    async def scenario():
        handle = await reader.submit(plate("early"))
        await reader.cancel(handle)  # the simpy process has not taken its first step
        reader.run_until(10_000.0)
        return await reader.status(handle)

    assert asyncio.run(scenario()) == "cancelled"
    assert reader.metrics().gantt == []
