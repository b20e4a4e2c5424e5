"""A pytest plugin that fails the test that leaks a socket, a transport, a task or a thread.

Without it, an object a test forgets to close is found by the garbage collector during
some later test, and that innocent test fails with ``ResourceWarning: unclosed ...``
(with ``filterwarnings = error``). Here every test ends with a full collection, inside
its own teardown, so the warning is charged to the test that caused it:

- ``ResourceWarning`` raised while collecting (unclosed sockets, transports, files,
  event loops) fails the test, naming the object and, when ``tracemalloc`` is tracing
  (``PYTHONTRACEMALLOC=10 python3 dev.py test``), where it was made;
- asyncio's "Task was destroyed but it is pending" and "exception was never retrieved"
  records emitted while collecting fail it too;
- a non-daemon thread the test started and did not join within ``THREAD_GRACE`` seconds
  fails it (such a thread would also keep the interpreter from exiting).

Cost: at the end of collection, everything imported so far is moved out of the
collector's sight (``gc.freeze()``), so each test's collection scans only what tests
made: well under a millisecond, where a full collection of the frameworks' modules takes
0.1 s on a quiet machine and over 0.6 s on a busy one. The same freeze keeps such a pause
from landing inside a test's timed section.

Loading: list ``"shared.leak_guard"`` in the root conftest's ``pytest_plugins``.
"""

from __future__ import annotations

import gc
import logging
import threading
import tracemalloc
import warnings
from collections.abc import Iterator

import pytest

__all__ = ["THREAD_GRACE", "collect_leaks"]

THREAD_GRACE = 10.0
"""How long a thread the test started may take to finish after its teardown (seconds)."""

_TASK_LEAKS = ("Task was destroyed but it is pending", "exception was never retrieved")


class _AsyncioRecords(logging.Handler):
    """Keeps the asyncio logger's records about abandoned tasks and futures."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.found: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if any(marker in message for marker in _TASK_LEAKS):
            self.found.append(message.splitlines()[0])


def _where_made(source: object) -> str:
    if source is None or not tracemalloc.is_tracing():
        return ""
    made = tracemalloc.get_object_traceback(source)
    if made is None:
        return ""
    return "\n    made at:\n      " + "\n      ".join(made.format())


def collect_leaks() -> list[str]:
    """Run a full garbage collection; describe every leak it reveals (empty: none)."""
    handler = _AsyncioRecords()
    asyncio_logger = logging.getLogger("asyncio")
    asyncio_logger.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            gc.collect()
    finally:
        asyncio_logger.removeHandler(handler)
    leaks = [
        f"{w.message}{_where_made(w.source)}"
        for w in caught
        if issubclass(w.category, ResourceWarning)
    ]
    return leaks + handler.found


def _unjoined(started: set[threading.Thread]) -> list[threading.Thread]:
    left = []
    for thread in started:
        if not thread.daemon:
            thread.join(THREAD_GRACE)
            if thread.is_alive():
                left.append(thread)
    return left


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what importing and collecting made: per-test collections skip it."""
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _leak_guard() -> Iterator[None]:
    """Fail the current test if it leaves an unclosed resource or a running thread."""
    before = set(threading.enumerate())
    yield
    leaks = collect_leaks()
    threads = _unjoined(set(threading.enumerate()) - before)
    leaks += [f"thread {t.name!r} still running after the test" for t in threads]
    if leaks:
        pytest.fail("the test leaked:\n  " + "\n  ".join(leaks), pytrace=False)
