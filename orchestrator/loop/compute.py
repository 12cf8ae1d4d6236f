"""The compute a campaign's rungs share: the result cache in the ledger's database and the executor of dear rungs,
made on first use and closed with the campaign."""

from __future__ import annotations

from typing import Any

__all__ = ["ComputeResources"]


class ComputeResources:
    """The simulation cache and the rung executor of one campaign; ``n_cache_hits`` counts cached evaluations."""

    def __init__(self) -> None:
        self.cache: Any = None
        self.executor: Any = None
        self.n_cache_hits = 0

    def cache_for(self, engine) -> Any:
        """The result cache in ``engine``'s database (made on first use)."""
        if self.cache is None:
            from simulators.cache import SimulationCache

            self.cache = SimulationCache(engine)
        return self.cache

    def executor_for(self, kind: str) -> Any:
        """The campaign's executor of kind ``kind`` (``screening.executor``; made on first use)."""
        if self.executor is None:
            from simulators import make_executor

            self.executor = make_executor(kind)
        return self.executor

    def close(self) -> None:
        for name in ("executor", "cache"):
            resource = getattr(self, name)
            if resource is not None:
                resource.close()
                setattr(self, name, None)
