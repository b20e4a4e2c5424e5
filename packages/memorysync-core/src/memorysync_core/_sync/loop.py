"""One persistent background event loop per process, for callers that are synchronous.

Framework hooks that are plain functions (and may run inside the caller's own event
loop) cannot await. :class:`~memorysync_core.SyncUserMemory` therefore runs all its
network I/O on a dedicated daemon thread's loop: callers hand work over with
``call_soon_threadsafe`` / ``run_coroutine_threadsafe`` and never touch their own loop.

Lifecycle:

- started lazily, on first use;
- after ``fork`` the child starts a fresh loop on first use (the parent's thread does
  not exist there). Where ``os.register_at_fork`` exists the loop is forgotten at fork
  time; a process-id check covers interpreters without it;
- at interpreter exit the live memories are flushed within one shared deadline
  (:data:`EXIT_FLUSH_SECONDS`), then the loop stops.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

_logger = logging.getLogger("memorysync.sync")

T = TypeVar("T")

# Total time the exit handler spends flushing captured turns before the loop stops.
EXIT_FLUSH_SECONDS = 5.0


class _Flushable(Protocol):
    def _flush_at_exit(self, timeout: float) -> int: ...


class BackgroundLoop:
    """The background loop: started lazily, re-created after fork, stopped at exit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._generation = 0
        self._stopped = False
        self._on_fork: list[Callable[[], None]] = []

    @property
    def generation(self) -> int:
        """Changes after a fork: state bound to an older generation's loop is stale."""
        self._check_fork()
        return self._generation

    @property
    def running(self) -> bool:
        """True once the loop thread has started (and not stopped) in this process."""
        self._check_fork()
        return self._loop is not None and not self._stopped

    def on_fork(self, reset: Callable[[], None]) -> None:
        """Call ``reset`` in a forked child, before the child uses the loop."""
        self._on_fork.append(reset)

    def _check_fork(self) -> None:
        if self._pid != os.getpid():
            self.after_fork_in_child()

    def loop(self) -> asyncio.AbstractEventLoop:
        """The background loop, started on first use."""
        self._check_fork()
        loop = self._loop
        if loop is not None:
            return loop
        with self._lock:
            if self._loop is None:
                self._start()
            assert self._loop is not None
            return self._loop

    def _start(self) -> None:
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        thread = threading.Thread(target=run, name="memorysync-loop", daemon=True)
        thread.start()
        ready.wait()
        self._loop, self._thread, self._stopped = loop, thread, False

    def in_loop_thread(self) -> bool:
        """True when called from the background loop's own thread."""
        return self._thread is not None and threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``coro`` on the background loop; a thread-safe future of its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop())

    def call_soon(self, callback: Callable[[], object]) -> None:
        """Schedule ``callback`` on the background loop without waiting for it."""
        self.loop().call_soon_threadsafe(callback)

    def after_fork_in_child(self) -> None:
        """Forget the parent's loop and thread; the next use starts new ones."""
        self._lock = threading.Lock()
        self._loop = None
        self._thread = None
        self._stopped = False
        self._pid = os.getpid()
        self._generation += 1
        for reset in self._on_fork:
            reset()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the loop (pending callbacks get ``timeout`` seconds) and join the thread."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop, self._thread, self._stopped = None, None, True
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        if not thread.is_alive():
            loop.close()


LOOP = BackgroundLoop()


class CallerLoops:
    """A private event loop per calling thread, for a call whose caller waits anyway.

    A synchronous caller that waits for a recall gains nothing from handing it to the
    background loop: the hand-over and the way back wake two threads, which on a busy
    machine each wait for a CPU. Run on a loop of the caller's own thread instead, the
    recall wakes nobody. The loop runs only while its thread waits in it; its HTTP
    client is the shared one of that loop (one per thread and server).

    A thread that runs an event loop of its own gets no private loop (it cannot run a
    second one). The loops of threads that ended are closed by the next
    :meth:`settle` (when a memory is attached or closed: never on a recall's clock),
    the exiting thread's at interpreter exit. After ``fork`` the child starts with none.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loops: dict[threading.Thread, asyncio.AbstractEventLoop] = {}
        # A parent's loops in a forked child: never run, never closed (their selector
        # is the parent's), kept so that collecting them warns about nothing.
        self._inherited: list[asyncio.AbstractEventLoop] = []

    def here(self) -> asyncio.AbstractEventLoop | None:
        """This thread's private loop; None when this thread runs an event loop."""
        if _running_loop() is not None:
            return None
        thread = threading.current_thread()
        loop = self._loops.get(thread)
        if loop is not None:
            return loop
        loop = asyncio.new_event_loop()
        with self._lock:
            self._loops[thread] = loop
        return loop

    def settle(self, *, close_mine: bool = False, patience: float = 1.0) -> None:
        """Let this thread's loop finish what other threads left it (closing a client),
        and close the loops of threads that ended (``close_mine``: this one's too).

        Each loop's tasks get ``patience`` seconds, then are cancelled. Does nothing
        from a thread that runs an event loop of its own.
        """
        if _running_loop() is not None:
            return
        current = threading.current_thread()
        with self._lock:
            ended = [t for t in self._loops if t is not current and not t.is_alive()]
            if close_mine and current in self._loops:
                ended.append(current)
            closing = [self._loops.pop(thread) for thread in ended]
            mine = self._loops.get(current)
        for loop in closing:
            _finish(loop, close=True, patience=patience)
        if mine is not None:
            _finish(mine, close=False, patience=patience)

    def after_fork_in_child(self) -> None:
        """Forget the parent's loops (without touching them)."""
        self._inherited.extend(self._loops.values())
        self._loops = {}
        self._lock = threading.Lock()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _finish(loop: asyncio.AbstractEventLoop, *, close: bool, patience: float) -> None:
    """Run ``loop`` until its tasks are done (cancelled after ``patience`` seconds), then
    maybe close it."""
    if loop.is_closed() or loop.is_running():
        return

    async def pending_done() -> None:
        current = asyncio.current_task()
        tasks = {task for task in asyncio.all_tasks() if task is not current}
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=patience)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late, timeout=1.0)
        for _ in range(3):  # closed transports drop their sockets a turn later
            await asyncio.sleep(0)

    try:
        loop.run_until_complete(pending_done())
        if close:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
    except Exception as exc:  # closing must never raise
        _logger.debug("closing a caller loop failed: %s", type(exc).__name__)


CALLER_LOOPS = CallerLoops()

# Memories that may hold undelivered turns; flushed at interpreter exit.
_live: weakref.WeakSet[_Flushable] = weakref.WeakSet()


def track(memory: _Flushable) -> None:
    """Remember ``memory`` so the exit handler flushes it."""
    _live.add(memory)


def untrack(memory: _Flushable) -> None:
    """``memory`` was closed: nothing to flush for it at exit."""
    _live.discard(memory)


def flush_all_at_exit(timeout: float | None = None) -> int:
    """Flush every live memory within one shared deadline, then stop the loop.

    Registered with ``atexit``; returns the number of turns left undelivered. The
    memories of async adapters (an ``AdapterKit``) deliver on a fresh event loop of
    the exiting thread, the synchronous ones on the background loop.
    """
    budget = EXIT_FLUSH_SECONDS if timeout is None else timeout
    deadline = time.monotonic() + budget
    left = 0
    for memory in list(_live):
        remaining = max(deadline - time.monotonic(), 0.0)
        try:
            left += memory._flush_at_exit(remaining)
        except Exception as exc:  # exit must never raise
            _logger.debug("flush at exit failed: %s", type(exc).__name__)
    if left:
        _logger.warning("exiting with %s captured turns undelivered", left)
    if LOOP.running:
        LOOP.stop()
    CALLER_LOOPS.settle(close_mine=True)
    return left


LOOP.on_fork(_live.clear)
LOOP.on_fork(CALLER_LOOPS.after_fork_in_child)
atexit.register(flush_all_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=LOOP.after_fork_in_child)
