"""One deadline around an awaitable, without a task of its own where Python allows."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")

if sys.version_info >= (3, 11):

    async def within(seconds: float, awaitable: Awaitable[T]) -> T:
        """``await awaitable``; ``TimeoutError`` once ``seconds`` have passed.

        ``asyncio.timeout`` runs it in the caller's task: on 3.11, ``wait_for`` wraps it
        in a task of its own, whose scheduling costs the hot paths several loop turns.
        """
        async with asyncio.timeout(seconds):
            return await awaitable

else:  # pragma: no cover - Python 3.10

    async def within(seconds: float, awaitable: Awaitable[T]) -> T:
        """``await awaitable``; ``asyncio.TimeoutError`` once ``seconds`` have passed."""
        task = asyncio.ensure_future(awaitable)
        # Cancelled at the deadline, it may still end in an error (a connection closing
        # then): read it, so that asyncio does not log it as never retrieved.
        task.add_done_callback(retrieve_error)
        return await asyncio.wait_for(task, seconds)


def retrieve_error(task: asyncio.Future[Any]) -> None:
    """Done callback: read a task's error so asyncio does not log it as never retrieved.

    For tasks whose waiters may all be gone (cancelled callers, a deadline that passed).
    """
    if not task.cancelled():
        task.exception()
