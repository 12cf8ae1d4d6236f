"""Run async driver calls from synchronous graph nodes, even inside a notebook's running event loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["LoopThread"]

T = TypeVar("T")


class LoopThread:
    """One event loop on a daemon thread, kept for a campaign's life so drivers keep their connections.

    Example:
        >>> async def two(): return 2
        >>> with LoopThread() as loop:
        ...     loop.run(two())
        2
    """

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="closedloop-io", daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run a coroutine on the loop and wait for its result (seconds of wall time for ``timeout``)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    def close(self) -> None:
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
        self._loop.close()

    def __enter__(self) -> LoopThread:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
