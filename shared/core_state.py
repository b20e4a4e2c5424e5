"""Read-only looks into memorysync_core's process state, for tests and the bench.

They read private module state on purpose: the product has no use for these counts,
so they live in the test kit, not in ``src`` (issue 32 item 7).
"""

from __future__ import annotations

import asyncio

from memorysync_core._wire import transport


def shared_client_count(loop: asyncio.AbstractEventLoop) -> int:
    """How many shared ``httpx.AsyncClient`` are open on ``loop``."""
    return len(transport._pools.get(loop, {}))
