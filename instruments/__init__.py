"""Instrument drivers: the async ``InstrumentDriver`` protocol, the driver kit (``BaseDriver``: subclass it and
write only the instrument's logic), the clock capabilities (``LabClock``, ``SimulatedClock``), the simulated lab,
safety envelopes, fault plans, ground-truth oracles and the remote lab over HTTP.

``HttpDriver`` (httpx) and the lab server (``create_app``, ``serve``, ``run_server``, ``ServerThread``; FastAPI and
uvicorn) load on first use, so ``import instruments`` stays light. The conformance suite lives in
``instruments.testing`` (it imports pytest, so it is not re-exported here).

Example:
    >>> import instruments
    >>> "simlab" in instruments.available_drivers()
    True
"""

__distribution__ = "closedloop"  # vocabulary.namespace reads this line to tell our packages from others

from typing import Any

from instruments.base import (
    TERMINAL_STATES,
    InstrumentDriver,
    JobHandle,
    JobState,
    LabClock,
    LabJob,
    LabResult,
    SimulatedClock,
)
from instruments.envelope import (
    RESERVED_PARAMETERS,
    EnvelopeViolation,
    ParameterLimit,
    SafetyEnvelope,
)
from instruments.faults import FaultPlan
from instruments.journal import LabJournal
from instruments.kit import BaseDriver, BookEntry, JobBook
from instruments.oracle import FunctionOracle, Oracle, TableOracle
from instruments.registry import available_drivers, load_driver
from instruments.simlab import SimLabDriver
from instruments.simlab_records import LabMetrics

_LAZY = {
    "HttpDriver": "instruments.http_driver",
    "ServerThread": "instruments.server",
    "create_app": "instruments.server",
    "run_server": "instruments.server",
    "serve": "instruments.server",
}

__all__ = [
    "RESERVED_PARAMETERS",
    "TERMINAL_STATES",
    "BaseDriver",
    "BookEntry",
    "EnvelopeViolation",
    "FaultPlan",
    "FunctionOracle",
    "HttpDriver",
    "InstrumentDriver",
    "JobBook",
    "JobHandle",
    "JobState",
    "LabClock",
    "LabJob",
    "LabJournal",
    "LabMetrics",
    "LabResult",
    "Oracle",
    "ParameterLimit",
    "SafetyEnvelope",
    "ServerThread",
    "SimLabDriver",
    "SimulatedClock",
    "TableOracle",
    "available_drivers",
    "create_app",
    "load_driver",
    "run_server",
    "serve",
]


def __getattr__(name: str) -> Any:
    """Import the HTTP pieces only when asked for (PEP 562)."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'instruments' has no attribute {name!r}")
