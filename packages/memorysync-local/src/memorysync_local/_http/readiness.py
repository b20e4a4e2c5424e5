"""Readiness: whether the storage answers now (``GET /ready``), beside liveness (``/health``).

A load balancer asks often, and while PostgreSQL is down a read can wait for a pooled
connection for up to 30 s. So one check runs at a time, on a thread of its own (never
one of the routes' workers), and a probe waits for it at most ``READY_TIMEOUT_SECONDS``:
a probe that arrives while a check is still waiting shares that check, and answers
503 when it does not finish in time. The log gets one line when the storage stops
answering and one when it answers again, not one per probe.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future

from memorysync_local._storage.errors import StorageError

logger = logging.getLogger("memorysync.local")

READY_TIMEOUT_SECONDS = 2.0


class Readiness:
    """Runs ``check`` (a read that raises when the storage cannot be reached) for probes."""

    def __init__(self, check: Callable[[], object], timeout: float = READY_TIMEOUT_SECONDS):
        self._check = check
        self.timeout = timeout
        self._lock = threading.Lock()
        self._running: Future[None] | None = None
        self._down = False

    async def probe(self) -> str | None:
        """None when the storage answered; else why not, in words a client may see."""
        with self._lock:
            running = self._running
            if running is None or running.done():
                running = self._running = Future()
                threading.Thread(
                    target=self._run, args=(running,), name="memorysync-ready", daemon=True
                ).start()
        try:
            await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(running)), self.timeout)
        except asyncio.TimeoutError:
            return self._failed(f"the storage did not answer within {self.timeout:g} s")
        except StorageError as exc:
            return self._failed(f"the storage cannot be reached: {exc.message}")
        except Exception as exc:  # a closed store, a bug: not ready either way
            return self._failed(f"the storage cannot be read ({type(exc).__name__})")
        with self._lock:
            if self._down:
                self._down = False
                logger.info("readiness: the storage answers again")
        return None

    def _run(self, running: Future[None]) -> None:
        running.set_running_or_notify_cancel()
        try:
            self._check()
        except BaseException as exc:
            running.set_exception(exc)
        else:
            running.set_result(None)

    def _failed(self, reason: str) -> str:
        with self._lock:
            if not self._down:
                self._down = True
                logger.warning("readiness: not ready, %s", reason)
        return reason
