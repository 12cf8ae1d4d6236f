"""Instrument drivers: the async ``InstrumentDriver`` protocol, the simulated lab and ground-truth oracles.

The conformance suite lives in ``instruments.testing`` (it imports pytest, so it is not re-exported here).

Example:
    >>> import instruments
    >>> "simlab" in instruments.available_drivers()
    True
"""

from instruments.base import TERMINAL_STATES, InstrumentDriver, JobHandle, JobState, LabJob, LabResult
from instruments.oracle import FunctionOracle, Oracle, TableOracle
from instruments.registry import available_drivers, load_driver
from instruments.simlab import LabMetrics, SimLabDriver

__all__ = [
    "TERMINAL_STATES",
    "FunctionOracle",
    "InstrumentDriver",
    "JobHandle",
    "JobState",
    "LabJob",
    "LabMetrics",
    "LabResult",
    "Oracle",
    "SimLabDriver",
    "TableOracle",
    "available_drivers",
    "load_driver",
]
