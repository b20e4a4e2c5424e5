"""How many worker threads the served server runs its routes on at once.

FastAPI runs the routes (plain ``def``: storage calls are synchronous) on the event
loop's default thread pool, 40 threads. Under 20 concurrent clients on 2 cores,
20 threads then run Python by turns under one interpreter lock: each request is
slow and the slowest waited 2-5x the median (recall at 100k memories: p50 40 ms,
p99 110-200 ms). With 4 threads the others wait in line, in order, and the p99
stays within about 1.5x the median (p99 45-85 ms on the same runs).

Each process of ``serve --workers N`` runs ``WORKER_PROCESS_THREADS``: fewer threads
under each interpreter lock (measured, 2 workers at 100,000 memories, 20 clients, four
paired rounds: p99 131-144 ms with 4 threads each, 93-107 ms with 2, 82-105 ms with 1;
the server's CPU a recall 7.4 -> 6.7 ms), and 2 rather than 1 so one slow request (a
write that extracts) does not hold up every recall of its worker.

Only ``serve`` sets this: it owns its event loop. An embedded server runs on the
caller's loop, whose thread pool is the caller's to size.
"""

from __future__ import annotations

import anyio.to_thread
from starlette.types import ASGIApp, Receive, Scope, Send

SERVED_WORKER_THREADS = 4
WORKER_PROCESS_THREADS = 2


class WorkerThreads:
    """ASGI wrapper: sizes the serving loop's default thread pool on the first request."""

    def __init__(self, app: ASGIApp, threads: int = SERVED_WORKER_THREADS) -> None:
        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads!r}")
        self.app = app
        self.threads = threads
        self._sized = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._sized:
            # One serving loop per process (uvicorn's), so once is enough.
            anyio.to_thread.current_default_thread_limiter().total_tokens = self.threads
            self._sized = True
        await self.app(scope, receive, send)
