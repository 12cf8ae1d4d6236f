"""``PyLabRobotDriver``: run each closedloop job as a PyLabRobot protocol on a liquid handler and a plate reader.

One job is one well. For every reagent the job names, the liquid handler picks up a fresh tip, aspirates the
volume from that reagent's source container, dispenses it into the job's well and discards the tip. The plate then
goes into the plate reader (``move_plate``), the reader reads that well, and the plate goes back. The reading of the
well is the job's value. Volumes are µL; the lab clock is seconds since the driver was built.

Which reagents, how much: a job's settings (a ``Conditions`` candidate's values and the job's numeric parameters)
whose names are reagents on the deck are the volumes to transfer. ``{"buffer": 50.0, "dye": 12.5}`` moves 50 µL
of buffer and 12.5 µL of dye. Settings that name no reagent are not liquid and the protocol leaves them alone.

The driver speaks only PyLabRobot's frontends (``LiquidHandler``, ``PlateReader``), so the same driver runs a
Hamilton STAR and a CLARIOstar, or PyLabRobot's chatterbox backends. ``PyLabRobotDriver.simulated(oracle)``
builds the chatterbox deck, with a plate reader backend that reads the project's ground truth for the candidate in
the well: the reading comes back through ``PlateReader.read_*`` exactly as a real reader's would.

Jobs run one at a time (one robot arm), in a worker task on the event loop that submits them (the orchestrator keeps
one loop for a campaign's life). A cancel while a job runs stops it between two transfers, as an operator would.

Example:
    >>> import asyncio
    >>> from vocabulary.domain import Conditions
    >>> from instruments.base import LabJob
    >>> async def one_well():
    ...     lab = PyLabRobotDriver.simulated(lambda c: 0.1 * c.values["dye"], reagents=("buffer", "dye"))
    ...     job = LabJob(job_key="w1", candidate=Conditions(values={"buffer": 50.0, "dye": 20.0}, id="c1"))
    ...     handle = await lab.submit(job)
    ...     while await lab.status(handle) not in ("done", "failed"):
    ...         await asyncio.sleep(0.01)
    ...     await lab.aclose()
    ...     return (await lab.result(handle)).value, lab.plate_map
    >>> value, plate_map = asyncio.run(one_well())  # doctest: +ELLIPSIS
    Setting up the liquid handler...
    >>> value, sorted(plate_map)
    (2.0, ['assay_well_A1'])
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from instruments.base import LabJob
from instruments.envelope import RESERVED_PARAMETERS, EnvelopeViolation, SafetyEnvelope
from instruments.kit import BaseDriver, BookEntry
from vocabulary.domain import SetupError, import_optional

__all__ = ["PyLabRobotDriver", "oracle_reader_backend"]

Measurement = Literal["absorbance", "fluorescence", "luminescence"]


def _plr(module: str = "pylabrobot") -> Any:
    return import_optional(module, "pylabrobot", "the PyLabRobot driver")


class PyLabRobotDriver(BaseDriver):
    """``InstrumentDriver`` over a PyLabRobot ``LiquidHandler`` and ``PlateReader``.

    Args:
        liquid_handler: a ``LiquidHandler``, or the path of one saved with ``lh.save(path)`` (its deck and backend
            come back with it; a spec's ``lab.parameters`` can only name a path).
        reagents: reagent name -> name of its source container on the deck (a well such as
            ``"reagents_well_A1"``, or a trough).
        plate: name of the assay plate on the deck; each job takes its next free well, in column order.
        plate_reader: the ``PlateReader``, or its name on the deck; None finds the one plate reader on the deck.
        tip_racks: names of the tip racks to use, in order; None uses every tip rack on the deck whose tips hold
            liquid (so not a Hamilton deck's teaching rack).
        measurement: what the reader measures: ``"absorbance"`` (at ``wavelength_nm``), ``"fluorescence"``
            (``excitation_nm`` / ``emission_nm`` at ``focal_height_mm``) or ``"luminescence"``.
        envelope: the lab's safety envelope; default: each reagent's volume 0..the tip's capacity, µL, and only the
            deck's reagents.
        property: the name of the measured property in capabilities.
    """

    name = "pylabrobot"
    version = "0.1.0"

    def __init__(
        self,
        liquid_handler: Any,
        reagents: Mapping[str, str],
        plate: str,
        *,
        plate_reader: Any = None,
        tip_racks: Iterable[str] | None = None,
        measurement: Measurement = "absorbance",
        wavelength_nm: int = 450,
        excitation_nm: int = 485,
        emission_nm: int = 528,
        focal_height_mm: float = 7.5,
        envelope: SafetyEnvelope | None = None,
        property: str = "value",
    ) -> None:
        liquid_handling = _plr("pylabrobot.liquid_handling")
        plate_reading = _plr("pylabrobot.plate_reading")
        if isinstance(liquid_handler, str):
            try:
                liquid_handler = liquid_handling.LiquidHandler.load(liquid_handler)
            except (OSError, ValueError, KeyError) as exc:
                raise SetupError(f"cannot load a PyLabRobot liquid handler from {liquid_handler!r}: {exc}; "
                                 "save one with lh.save(path)") from exc
        if not isinstance(liquid_handler, liquid_handling.LiquidHandler):
            raise SetupError(f"liquid_handler must be a pylabrobot LiquidHandler or a path, got {liquid_handler!r}")
        if measurement not in ("absorbance", "fluorescence", "luminescence"):
            raise SetupError(f"{measurement=} is not one of absorbance, fluorescence, luminescence")
        if not reagents:
            raise SetupError("reagents is empty; map each reagent name to its source container on the deck")
        self.liquid_handler = liquid_handler
        deck = liquid_handler.deck
        self.sources = {name: self._resource(container, "reagent source") for name, container in reagents.items()}
        self.plate = self._resource(plate, "assay plate")
        self.plate_reader = self._find_reader(plate_reader, plate_reading.PlateReader)
        tip_rack_type = _plr("pylabrobot.resources").TipRack
        racks = ([self._resource(name, "tip rack") for name in tip_racks] if tip_racks is not None
                 else [r for r in deck.get_all_resources() if isinstance(r, tip_rack_type) and _holds_liquid(r)])
        if not racks:
            raise SetupError("the deck has no tip rack; assign one (e.g. hamilton_96_tiprack_300uL) or name tip_racks")
        self.tip_spots = [spot for rack in racks for spot in rack.get_all_items()]
        self.wells = list(self.plate.get_all_items())
        self.tip_max_ul = float(self.tip_spots[0].make_tip().maximal_volume)
        self.measurement = measurement
        self.wavelength_nm, self.excitation_nm, self.emission_nm = wavelength_nm, excitation_nm, emission_nm
        self.focal_height_mm = focal_height_mm
        self.property = property
        self.envelope = envelope or SafetyEnvelope(
            name="pylabrobot deck",
            parameters={name: (0.0, self.tip_max_ul, "µL") for name in self.sources},
            allowed_reagents=set(self.sources),
        )
        #: well name -> the candidate dispensed into it; what a plate map exported with the run would say.
        self.plate_map: dict[str, Any] = {}
        self._n_tips_used = 0
        self._n_wells_used = 0
        self._has_set_up: list[Any] = []
        super().__init__()

    # ------------------------------------------------------------------------------------------- construction
    @classmethod
    def simulated(
        cls, oracle: Callable[[Any], float], *, reagents: Iterable[str] = ("buffer", "dye"),
        reagent_volume_ul: float = 360.0, **params: Any,
    ) -> PyLabRobotDriver:
        """A STARlet deck on PyLabRobot's chatterbox backends, whose plate reader reads ``oracle(candidate)``.

        The deck: one 300 µL tip rack, a reagent plate (reagent ``i`` in well ``i`` of column 1, filled with
        ``reagent_volume_ul`` µL, which matters when PyLabRobot's volume tracking is on), the assay plate
        (``"assay"``) and a plate reader (``"plate_reader"``). ``params`` go to the constructor.
        """
        resources = _plr("pylabrobot.resources")
        hamilton = _plr("pylabrobot.resources.hamilton")
        corning = _plr("pylabrobot.resources.corning")
        liquid_handling = _plr("pylabrobot.liquid_handling")
        backends = _plr("pylabrobot.liquid_handling.backends")
        plate_reading = _plr("pylabrobot.plate_reading")
        names = list(reagents)
        if not 0 < len(names) <= 8:
            raise SetupError(f"the simulated deck holds 1..8 reagents in one column, got {len(names)}")
        deck = hamilton.STARLetDeck()
        tip_carrier = hamilton.TIP_CAR_480_A00("tip_carrier")
        tip_carrier[0] = hamilton.hamilton_96_tiprack_300uL("tips")
        plate_carrier = hamilton.PLT_CAR_L5AC_A00("plate_carrier")
        plate_carrier[0] = source_plate = corning.cor_96_wellplate_360uL_Fb("reagents")
        plate_carrier[1] = corning.cor_96_wellplate_360uL_Fb("assay")
        deck.assign_child_resource(tip_carrier, rails=3)
        deck.assign_child_resource(plate_carrier, rails=15)
        samples: dict[str, Any] = {}
        reader = plate_reading.PlateReader(
            name="plate_reader", size_x=100, size_y=100, size_z=50,
            backend=oracle_reader_backend(oracle, samples),
        )
        deck.assign_child_resource(reader, location=resources.Coordinate(620, 100, 0))
        lh = liquid_handling.LiquidHandler(backend=backends.LiquidHandlerChatterboxBackend(num_channels=8), deck=deck)
        sources = {}
        for row, name in enumerate(names):
            well = source_plate.get_well(f"{'ABCDEFGH'[row]}1")
            well.tracker.set_volume(reagent_volume_ul)
            sources[name] = well.name
        params.setdefault("tip_racks", ["tips"])
        driver = cls(lh, sources, "assay", plate_reader=reader, **params)
        driver.plate_map = samples  # the simulated reader looks up what the driver dispensed
        return driver

    def _resource(self, name: Any, what: str) -> Any:
        if not isinstance(name, str):
            return name
        try:
            return self.liquid_handler.deck.get_resource(name)
        except Exception as exc:  # PyLabRobot raises ResourceNotFoundError
            raise SetupError(f"{what} {name!r} is not on the deck {self.liquid_handler.deck.name!r}: {exc}") from exc

    def _find_reader(self, plate_reader: Any, reader_type: type) -> Any:
        if plate_reader is not None:
            reader = self._resource(plate_reader, "plate reader")
        else:
            found = [r for r in self.liquid_handler.deck.get_all_resources() if isinstance(r, reader_type)]
            if len(found) != 1:
                raise SetupError(f"the deck holds {len(found)} plate readers; pass plate_reader= (one of them)")
            reader = found[0]
        if not isinstance(reader, reader_type):
            raise SetupError(f"plate_reader {reader!r} is not a pylabrobot PlateReader")
        return reader

    # ------------------------------------------------------------------------------------------- the kit's hooks
    async def describe(self) -> dict[str, Any]:
        """Stations, reagents, the measurement, and how many wells and tips are left."""
        return {
            "stations": ["liquid_handler", "plate_reader"],
            "reagents": sorted(self.sources),
            "property": self.property,
            "measurement": self._measurement_label(),
            "deck": self.liquid_handler.deck.name,
            "liquid_handler_backend": type(self.liquid_handler.backend).__name__,
            "plate_reader_backend": type(self.plate_reader.backend).__name__,
            "n_wells_free": len(self.wells) - self._n_wells_used,
            "n_tips_free": len(self.tip_spots) - self._n_tips_used,
            "max_transfer_ul": self.tip_max_ul,
        }

    async def validate(self, job: LabJob) -> None:
        """Refuse a job naming no deck reagent (``SetupError``) or holding more liquid than a well
        (``EnvelopeViolation``); nothing runs."""
        volumes = self.transfers(job)
        capacity = float(self.wells[0].max_volume)
        if sum(volumes.values()) > capacity:
            problem = (f"the job's volumes add up to {sum(volumes.values()):g} µL, more than a well of "
                       f"{self.plate.name!r} holds ({capacity:g} µL); lower them")
            raise EnvelopeViolation.for_job(job.job_key, [problem], self.envelope.name)

    async def diagnose(self) -> dict[str, Any]:
        """Wells and tips left; ``is_ok`` is False once the plate or the tips run out."""
        n_wells = len(self.wells) - self._n_wells_used
        n_tips = len(self.tip_spots) - self._n_tips_used
        return {
            "is_ok": n_wells > 0 and n_tips > 0,
            "n_wells_free": n_wells,
            "n_tips_free": n_tips,
            "is_liquid_handler_set_up": bool(self.liquid_handler.setup_finished),
        }

    async def aclose(self) -> None:
        """Stop the worker and the machines this driver set up."""
        await super().aclose()
        for machine in reversed(self._has_set_up):
            if machine.setup_finished:
                await machine.stop()
        self._has_set_up.clear()

    # ------------------------------------------------------------------------------------------- the protocol
    def transfers(self, job: LabJob) -> dict[str, float]:
        """Reagent -> µL for ``job``: its settings that name a reagent on the deck.

        Raises:
            SetupError: no setting names a deck reagent, or a volume is not a finite number >= 0.
        """
        settings: dict[str, Any] = dict(getattr(job.candidate, "values", None) or {})
        settings.update({k: v for k, v in job.parameters.items() if k not in RESERVED_PARAMETERS})
        volumes = {name: settings[name] for name in self.sources if name in settings}
        if not volumes:
            raise SetupError(
                f"job {job.job_key!r} names no reagent on the deck {sorted(self.sources)}; give volumes in µL as "
                "candidate values or job parameters named after the reagents"
            )
        bad = {k: v for k, v in volumes.items()
               if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0}
        if bad:
            raise SetupError(f"job {job.job_key!r}: volumes {bad} must be finite numbers of µL >= 0")
        return {name: float(v) for name, v in volumes.items() if v > 0}

    async def run(self, entry: BookEntry) -> None:
        """One well: transfer the job's reagents, then read it; a cancel stops it between two transfers."""
        job, log, stage = entry.job, [], "set-up"
        try:
            await self._set_up()
            volumes = self.transfers(job)
            shortage = self._consumable_shortage(len(volumes))
            if shortage:
                self.finish(entry, reason=f"consumable exhausted: {shortage}")
                return
            well = self.wells[self._n_wells_used]
            self._n_wells_used += 1
            stage, start = "liquid handling", self.book.now()
            for reagent, volume_ul in volumes.items():
                if entry.is_cancel_requested:
                    break
                await self._transfer(self.sources[reagent], well, volume_ul)
            self.plate_map[well.name] = job.candidate
            log.append(("liquid_handler", start, self.book.now()))
            if entry.is_cancel_requested:
                self.mark_cancelled(entry)
                return
            stage, start = "reading", self.book.now()
            value = await self._read(well)
            log.append(("plate_reader", start, self.book.now()))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a robot or reader error fails this job, never the driver
            self.finish(entry, reason=f"{stage} failed: {type(exc).__name__}: {exc}", station_log=log)
            return
        if value is None or not math.isfinite(value):
            self.finish(entry, reason=f"bad reading: the reader returned {value!r} for well {well.name!r}",
                        station_log=log)
        else:
            self.finish(entry, value=float(value), station_log=log)

    def _consumable_shortage(self, n_tips: int) -> str:
        if self._n_wells_used >= len(self.wells):
            return f"no free well on plate {self.plate.name!r}; load a fresh plate and build a new driver"
        n_left = len(self.tip_spots) - self._n_tips_used
        if n_tips > n_left:
            return f"{n_tips} tips needed, {n_left} left; load fresh tip racks and build a new driver"
        return ""

    async def _set_up(self) -> None:
        for machine in (self.liquid_handler, self.plate_reader):
            if not machine.setup_finished:
                await machine.setup()
                self._has_set_up.append(machine)

    async def _transfer(self, source: Any, well: Any, volume_ul: float) -> None:
        tip = self.tip_spots[self._n_tips_used]
        self._n_tips_used += 1
        lh = self.liquid_handler
        await lh.pick_up_tips([tip])
        try:
            await lh.aspirate([source], vols=[volume_ul])
            await lh.dispense([well], vols=[volume_ul])
        finally:
            await lh.discard_tips()

    async def _read(self, well: Any) -> float | None:
        origin = self.plate.parent
        if origin is not self.plate_reader:
            await self.liquid_handler.move_plate(self.plate, self.plate_reader)
        try:
            if self.measurement == "absorbance":
                reads = await self.plate_reader.read_absorbance(
                    wavelength=self.wavelength_nm, wells=[well], use_new_return_type=True)
            elif self.measurement == "fluorescence":
                reads = await self.plate_reader.read_fluorescence(
                    excitation_wavelength=self.excitation_nm, emission_wavelength=self.emission_nm,
                    focal_height=self.focal_height_mm, wells=[well], use_new_return_type=True)
            else:
                reads = await self.plate_reader.read_luminescence(
                    focal_height=self.focal_height_mm, wells=[well], use_new_return_type=True)
        finally:
            if origin is not self.plate_reader and origin is not None:
                await self.liquid_handler.move_plate(self.plate, origin)
        value = reads[0]["data"][well.get_row()][well.get_column()]
        return None if value is None else float(value)

    def _measurement_label(self) -> str:
        if self.measurement == "absorbance":
            return f"absorbance at {self.wavelength_nm} nm"
        if self.measurement == "fluorescence":
            return f"fluorescence ex {self.excitation_nm} nm / em {self.emission_nm} nm"
        return "luminescence"

    def __repr__(self) -> str:
        return (f"PyLabRobotDriver(deck={self.liquid_handler.deck.name!r}, reagents={sorted(self.sources)}, "
                f"plate={self.plate.name!r}, {self.measurement})")


def _holds_liquid(tip_rack: Any) -> bool:
    spots = tip_rack.get_all_items()
    return bool(spots) and spots[0].make_tip().maximal_volume > 0


def oracle_reader_backend(oracle: Callable[[Any], float], samples: Mapping[str, Any]) -> Any:
    """A chatterbox ``PlateReaderBackend`` whose readings are ``oracle(candidate)`` for the candidate in each well.

    A test double for the one thing a simulation cannot do (measure); the plate, the wells, the masking and the
    returned records are PyLabRobot's chatterbox reader's. ``samples`` maps well names to candidates (the driver's
    ``plate_map``); a well without a sample, or without liquid when volume tracking is on, reads None.
    """
    chatterbox = _plr("pylabrobot.plate_reading.chatterbox")
    volume_tracker = _plr("pylabrobot.resources.volume_tracker")

    class OracleReaderBackend(chatterbox.PlateReaderChatterboxBackend):
        def __init__(self) -> None:
            super().__init__()
            self.oracle, self.samples = oracle, samples

        def _grid(self, plate: Any, wells: list[Any]) -> list[list[float | None]]:
            grid: list[list[float | None]] = [[None] * plate.num_items_x for _ in range(plate.num_items_y)]
            for well in wells:
                candidate = self.samples.get(well.name)
                is_empty = volume_tracker.does_volume_tracking() and well.tracker.get_used_volume() <= 0
                if candidate is not None and not is_empty:
                    grid[well.get_row()][well.get_column()] = float(self.oracle(candidate))
            return grid

        async def read_absorbance(self, plate, wells, wavelength):
            self.dummy_absorbance = self._grid(plate, wells)
            return await super().read_absorbance(plate, wells, wavelength)

        async def read_fluorescence(self, plate, wells, excitation_wavelength, emission_wavelength,
                                    focal_height):
            self.dummy_fluorescence = self._grid(plate, wells)
            return await super().read_fluorescence(plate, wells, excitation_wavelength, emission_wavelength,
                                                   focal_height)

        async def read_luminescence(self, plate, wells, focal_height):
            self.dummy_luminescence = self._grid(plate, wells)
            return await super().read_luminescence(plate, wells, focal_height)

    return OracleReaderBackend()

