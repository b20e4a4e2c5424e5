"""The background extraction worker: one thread that works through stored jobs.

The jobs themselves live in the database (table ``extraction_jobs``, written in
the same transaction as the turn they come from), so an acknowledged turn's
extraction survives ``kill -9`` and a restart resumes it. This module only
decides when the worker runs: woken after a commit that added jobs, started at
start-up when jobs were left over, stopped by :meth:`JobRunner.stop`.

A database that is busy or unreachable for a while (a PostgreSQL restart, a failover)
is logged as one WARNING line when the worker first meets it and one when the worker
next finds the database answering; the attempts in between are DEBUG lines, never
tracebacks. Any other failure is logged with its traceback: it is a bug or damage.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from memorysync_local._storage.errors import StorageBusy

logger = logging.getLogger("memorysync.local")


class JobRunner:
    """Runs ``run_next()`` on a background thread until it returns False (no job left).

    ``run_next`` does one job (extract outside any transaction, then store the
    facts and delete the job in one) and says whether there was one.
    """

    def __init__(self, run_next: Callable[[], bool]) -> None:
        self._run_next = run_next
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._wanted = False  # jobs were added since the worker last looked
        self._idle = True
        self._stopping = False
        self._outage_since: float | None = None  # monotonic time the database stopped answering

    def wake(self) -> None:
        """Jobs were committed: make sure the worker looks (starting it if needed)."""
        with self._cond:
            if self._stopping:
                return  # they stay stored; the next start resumes them
            self._wanted = True
            self._idle = False
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="memorysync-extract", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()

    def wait_idle(self, timeout: float | None) -> bool:
        """Block until no stored job is waiting or running; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._idle and not self._wanted, timeout)

    def stop(self, drain_timeout: float) -> None:
        """Let the worker drain for up to ``drain_timeout`` s, then stop after the job in
        hand. Jobs not done stay stored for the next start."""
        self.wait_idle(drain_timeout)
        with self._cond:
            self._stopping = True
            thread = self._thread
            self._cond.notify_all()
        if thread is not None:
            thread.join()

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._wanted = False
            while not self._stopping:
                try:
                    more = self._run_next()
                except StorageBusy as exc:
                    # Retryable: the job stays stored and is tried again on the next
                    # wake (on PostgreSQL, every few seconds) or start.
                    self._paused(exc)
                    break
                except Exception:
                    # The database failed otherwise (closed, damaged): the job stays
                    # stored and is tried again on the next wake or start.
                    logger.exception("background extraction could not run a stored job")
                    break
                self._resumed()
                if not more:
                    break
            with self._cond:
                if not self._wanted or self._stopping:
                    self._idle = True
                    self._cond.notify_all()
                self._cond.wait_for(lambda: self._wanted or self._stopping)
                if self._stopping:
                    return

    def _paused(self, exc: StorageBusy) -> None:
        if self._outage_since is None:
            self._outage_since = time.monotonic()
            logger.warning(
                "background extraction paused: %s (%s); stored jobs wait for the database",
                exc.message,
                exc.detail,
            )
        else:
            logger.debug("background extraction still paused (%s)", exc.detail)

    def _resumed(self) -> None:
        if self._outage_since is not None:
            paused = time.monotonic() - self._outage_since
            self._outage_since = None
            logger.warning(
                "background extraction resumed: the database answers again (paused %.1f s)",
                paused,
            )
