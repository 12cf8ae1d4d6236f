"""Adapters: drivers that speak to lab software people already own, each behind the ``InstrumentDriver`` contract.

- ``PyLabRobotDriver`` (``closedloop[pylabrobot]``): a job becomes a PyLabRobot protocol on a liquid handler and a
  plate reader.
- ``Sila2Driver`` (``closedloop[sila2]``): a job is one ``RunExperiment`` of a SiLA 2 server's
  ``ClosedLoopExperiment`` feature (``ClosedLoopExperiment.sila.xml``); ``sila2_server.serve_sila_lab`` serves it.
- ``MadsciDriver`` (httpx only; ``closedloop[madsci]`` for serving a node): a job is one action on a MADSci REST
  node, sent through the node's REST API.

Each adapter is an ``instruments.BaseDriver`` subclass (the kit keeps the jobs, the adapter speaks the library).
Each adapter's library is an optional extra and is imported on first use, so ``import instruments.adapters`` costs
nothing; a missing library is one ``MissingDependency`` line naming its extra.
"""

from typing import Any

_LAZY = {
    "PyLabRobotDriver": "instruments.adapters.pylabrobot_driver",
    "Sila2Driver": "instruments.adapters.sila2_driver",
    "MadsciDriver": "instruments.adapters.madsci_driver",
}

__all__ = ["MadsciDriver", "PyLabRobotDriver", "Sila2Driver"]


def __getattr__(name: str) -> Any:
    """Import an adapter only when asked for (PEP 562)."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'instruments.adapters' has no attribute {name!r}")
