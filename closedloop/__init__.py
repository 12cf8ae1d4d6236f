"""closedloop's public face for users of its environments. Nothing else in the project imports it.

- ``import closedloop.envs`` registers the gymnasium environment ``closedloop/Campaign-v0``.
- verifiers finds the taskset under the id ``closedloop``
  (``verifiers.v1.utils.loaders.taskset_class("closedloop")``): ``CampaignTaskset`` and its default harness
  ``CampaignHarness`` are exported here lazily, so ``import closedloop`` does not import verifiers.
- ``closedloop/openenv/`` is the OpenEnv environment's folder (``closedloop env serve SPEC``).
"""

from __future__ import annotations

__distribution__ = "closedloop"  # vocabulary.namespace reads this line to tell our packages from others

from typing import Any

import vocabulary  # noqa: F401  (its import checks that no foreign package shadows one of our names)

__all__ = ["CampaignHarness", "CampaignTaskset"]

_LAZY = {"CampaignTaskset": "orchestrator.environment.verifiers_taskset",
         "CampaignHarness": "orchestrator.environment.verifiers_taskset"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'closedloop' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
