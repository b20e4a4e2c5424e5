"""The 1 ms heartbeat that measures how responsive an event loop stays.

Standard library only: ``published_budget`` runs this very source in another
interpreter, with the released packages and none of this repository.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any


async def with_heartbeat(work: Callable[[], Awaitable[Any]]) -> list[float]:
    """Run ``work`` while a 1 ms heartbeat records its lateness (seconds per tick)."""
    loop = asyncio.get_running_loop()
    lags: list[float] = []
    stop = asyncio.Event()

    async def heartbeat() -> None:
        while not stop.is_set():
            before = loop.time()
            await asyncio.sleep(0.001)
            lags.append(max(0.0, loop.time() - before - 0.001))

    ticker = asyncio.create_task(heartbeat())
    await asyncio.sleep(0.01)
    try:
        await work()
    finally:
        stop.set()
        await ticker
    return lags
