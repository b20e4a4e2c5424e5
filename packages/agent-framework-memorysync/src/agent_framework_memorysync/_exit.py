"""At interpreter exit, deliver what open providers still hold, for a bounded time.

Agent Framework has no close hook for context providers, and applications often end
without closing them: the turns captured by the last run would be lost. One ``atexit``
handler closes every provider that still holds turns, on a fresh event loop, each for
at most :data:`EXIT_FLUSH_TIMEOUT` seconds.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._provider import MemorySyncContextProvider

_logger = logging.getLogger("memorysync.agent_framework")

EXIT_FLUSH_TIMEOUT = 5.0
# Weak: a provider the application dropped is not kept alive for the exit handler.
_OPEN: weakref.WeakSet[MemorySyncContextProvider] = weakref.WeakSet()


def track(provider: MemorySyncContextProvider) -> None:
    """Close ``provider`` at exit if it still holds turns then."""
    _OPEN.add(provider)


def untrack(provider: MemorySyncContextProvider) -> None:
    """``provider`` was closed: nothing to do for it at exit."""
    _OPEN.discard(provider)


def drain_at_exit(timeout: float = EXIT_FLUSH_TIMEOUT) -> int:
    """Close every open provider that holds turns; the turns left undelivered. Never raises."""
    left = 0
    for provider in list(_OPEN):
        if not provider.pending:
            continue
        try:
            # close() is bounded itself; the margin covers releasing the connection.
            asyncio.run(asyncio.wait_for(provider.close(timeout), timeout + 1.0))
        except Exception as exc:  # exit must go on whatever happens
            _logger.warning("flush at exit failed: %s", type(exc).__name__)
        left += provider.pending
    return left


atexit.register(drain_at_exit)
