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
import contextlib
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
        # An event of this probe's loop, set from the check's thread: the check's outcome
        # is read from its own future, so a probe that gave up leaves nothing pending.
        loop = asyncio.get_running_loop()
        finished = asyncio.Event()

        def wake(_: Future[None]) -> None:
            with contextlib.suppress(RuntimeError):  # that probe's loop is closed
                loop.call_soon_threadsafe(finished.set)

        running.add_done_callback(wake)
        try:
            await asyncio.wait_for(finished.wait(), self.timeout)
        except asyncio.TimeoutError:
            return self._failed(f"the storage did not answer within {self.timeout:g} s")
        failure = running.exception()
        if isinstance(failure, StorageError):
            return self._failed(f"the storage cannot be reached: {failure.message}")
        if failure is not None:  # a closed store, a bug: not ready either way
            return self._failed(f"the storage cannot be read ({type(failure).__name__})")
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
