"""The checks a simulated lab runs on what it is given: its stations, durations and consumables when it is built, and
a job's own parameters (``priority``, ``ttl_s``, ``consumables``) when the job is submitted.

Each check raises ``SetupError`` with the fix before anything is queued or simulated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from instruments.base import LabJob
from instruments.faults import FaultPlan
from instruments.simlab_records import TRANSFER_ROBOT
from vocabulary.domain import SetupError

__all__ = ["as_model", "check_consumables", "check_stations", "job_consumables", "job_priority", "job_ttl"]


def check_stations(
    stations: Mapping[str, int], durations_s: Mapping[str, tuple[float, float]], faults: FaultPlan
) -> None:
    """Every station has a capacity, a lognormal duration and a name that is not the robot's; every station-down
    window names a station."""
    if not stations:
        raise SetupError("stations is empty; give at least one, e.g. stations={'synthesis': 1}")
    for name, capacity in stations.items():
        if name == TRANSFER_ROBOT:
            raise SetupError(f"station name {TRANSFER_ROBOT!r} is reserved for the transfer robot; rename it")
        if not isinstance(capacity, int) or capacity < 1:
            raise SetupError(f"station {name!r} has capacity {capacity!r}; give a whole number >= 1")
        if name not in durations_s:
            raise SetupError(f"station {name!r} has no duration; pass durations_s={{{name!r}: (median_s, log_sd)}}")
        median_s, log_sd = durations_s[name]
        if not (median_s > 0 and log_sd >= 0 and math.isfinite(median_s) and math.isfinite(log_sd)):
            raise SetupError(
                f"station {name!r} duration ({median_s!r}, {log_sd!r}) needs median_s > 0 and log_sd >= 0"
            )
    unknown = sorted({station for station, _, _ in faults.station_down} - set(stations))
    if unknown:
        raise SetupError(
            f"faults.station_down names {unknown}, which are not stations of this lab {list(stations)}"
        )


def check_consumables(
    initial_stock: Mapping[str, float], consumable_use: Mapping[str, Mapping[str, float]], stations: Mapping[str, int]
) -> None:
    """Stock levels are finite and >= 0, and every station's use names a stocked consumable."""
    for name, units in initial_stock.items():
        if not (units >= 0 and math.isfinite(units)):
            raise SetupError(f"consumable {name!r} starts with {units!r} units; give a finite number >= 0")
    for station, use in consumable_use.items():
        if station not in stations:
            raise SetupError(f"consumable_use names station {station!r}, which is not one of {list(stations)}")
        for name, units in use.items():
            if name not in initial_stock:
                raise SetupError(
                    f"station {station!r} uses consumable {name!r}, which is not stocked; "
                    f"add it to consumables={{{name!r}: units}}"
                )
            if not (units >= 0 and math.isfinite(units)):
                raise SetupError(f"station {station!r} uses {units!r} units of {name!r}; give a number >= 0")


def job_priority(job: LabJob) -> float:
    """The job's queue priority (lower runs sooner; default 0)."""
    raw = job.parameters.get("priority", 0)
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw):
        raise SetupError(f"job {job.job_key!r} has priority={raw!r}; give a finite number (lower runs sooner)")
    return float(raw)


def job_ttl(job: LabJob, default_ttl_s: float | None) -> float | None:
    """The job's time-to-live in seconds from submission (its own ``ttl_s`` or the lab's default); None for none."""
    raw = job.parameters.get("ttl_s", default_ttl_s)
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not (raw > 0 and math.isfinite(raw)):
        raise SetupError(f"job {job.job_key!r} has ttl_s={raw!r}; give a positive number of seconds")
    return float(raw)


def job_consumables(job: LabJob, stock: Mapping[str, float]) -> dict[str, float]:
    """The units of each consumable the job's first step uses beyond the station's own use."""
    raw = job.parameters.get("consumables", {})
    if not isinstance(raw, Mapping):
        raise SetupError(f"job {job.job_key!r} has consumables={raw!r}; give a mapping name -> units")
    needs = {}
    for name, units in raw.items():
        if name not in stock:
            raise SetupError(
                f"job {job.job_key!r} needs consumable {name!r}, which this lab does not stock "
                f"(stocked: {sorted(stock) or 'none'})"
            )
        is_number = isinstance(units, (int, float)) and not isinstance(units, bool)
        if not (is_number and units >= 0 and math.isfinite(units)):
            raise SetupError(f"job {job.job_key!r} needs {units!r} units of {name!r}; give a number >= 0")
        needs[name] = float(units)
    return needs


def as_model(model: type[BaseModel], value: Any, what: str) -> Any:
    """Accept a model, its dict (as read from a TOML spec or JSON) or None (the model's default)."""
    if value is None:
        return model()
    if isinstance(value, model):
        return value
    try:
        return model.model_validate(dict(value))
    except (TypeError, ValueError) as exc:
        raise SetupError(f"{what}={value!r} is not a valid {model.__name__}: {exc}") from exc
