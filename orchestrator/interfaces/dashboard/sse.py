"""Live updates as server-sent events: poll the ledger read-only and send one event whenever what a page shows
has changed.

The page does not get the new data over the stream, only the news that there is some: its script turns the event
into an htmx trigger, and htmx fetches the server-rendered fragments again. So the stream stays tiny, a page that
missed events (a reconnect) catches up on the next one, and the HTML has a single source (the templates).

The ledger is polled every ``poll_s`` seconds in a worker thread (SQLite reads block); a campaign run by another
process shows up on the next poll.

Example:
    >>> import asyncio
    >>> values = iter([1, 1, 2])
    >>> async def first_two():
    ...     stream = changes(lambda: next(values), poll_s=0.0, event="campaign")
    ...     return [(await anext(stream)).data, (await anext(stream)).data]
    >>> asyncio.run(first_two())
    [1, 2]
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from fastapi.sse import ServerSentEvent

    from orchestrator.ledger import Ledger

__all__ = ["campaign_signature", "changes", "ledger_signature"]


def ledger_signature(ledger: Ledger) -> list[list[Any]]:
    """What the campaign list shows, compactly: per campaign its id, status, lab experiments and last seq."""
    return [[c.id, c.status, c.n_lab, ledger.n_events(c.id)] for c in ledger.campaigns()]


def campaign_signature(ledger: Ledger, campaign_id: str, run_state: str | None) -> dict[str, Any]:
    """What a campaign page shows, compactly: its last seq, the number of model calls (their panel is redrawn only
    when it grows) and the state of this dashboard's run of it."""
    return {"n_events": ledger.n_events(campaign_id), "n_llm_calls": ledger.count_events(campaign_id, "LLMCall"),
            "run_state": run_state}


async def changes(read: Callable[[], Any], *, poll_s: float, event: str) -> AsyncIterator[ServerSentEvent]:
    """Yield ``read()`` as an SSE event named ``event`` at once, then each time it differs from the last one sent.

    Ends when the client goes away (the response is cancelled) or the server shuts down.
    """
    from fastapi.sse import ServerSentEvent

    last: Any = object()
    while True:
        current = await anyio.to_thread.run_sync(read)
        if current != last:
            last = current
            yield ServerSentEvent(data=current, event=event)
        await anyio.sleep(poll_s)
