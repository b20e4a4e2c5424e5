"""``serve --workers N``: N serving processes on one port and one database.

One process answers requests with one interpreter: at 100k memories a recall costs
about 8 ms of CPU, so 20 concurrent clients queue behind one CPU whatever the
machine has. With ``--workers N`` the parent process:

1. does the start-up work once, before any worker opens the database (create or
   migrate it, re-index words an older analyzer made, embed memories stored without a
   vector), so N workers never race to do it;
2. binds N listening sockets on the port (``SO_REUSEPORT``: the kernel spreads new
   connections over them) and starts N worker processes (``spawn``: a fresh
   interpreter each), each serving one socket. The parent keeps them open, so
   connections that arrive while a worker starts or is replaced wait in its queue;
3. replaces a worker that dies, and on SIGINT or SIGTERM sends each worker one
   SIGTERM and waits for it to drain (its background extraction finished or left
   stored) before it exits.

Every worker opens the database itself. What makes that safe is the storage, not this
module: SQLite serialises writers (``BEGIN IMMEDIATE``, WAL), each worker's
in-memory vector index checks the per-user change counters the database keeps before
a search, and PostgreSQL is shared by design. SQLite's queue of extraction jobs has no
claims, so one worker (the lead) works it and looks for the others' jobs twice a
second (``_service.extraction_jobs``).

Why not ``uvicorn.run(workers=N)``: it builds each worker's app from an import string,
so these settings (keys included) would have to travel through the environment; and
it would do the start-up work N times at once. The supervision here is ours for that
reason, and small.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from types import FrameType

import uvicorn

from memorysync_local._cli.serving import STOP_SIGNALS, ServeSettings, run_uvicorn
from memorysync_local._extraction.llm import load_extractor
from memorysync_local._http.app import app_over, refuse_unusable_vectors
from memorysync_local._http.otel import instrument, start_sdk
from memorysync_local._http.worker_threads import WORKER_PROCESS_THREADS
from memorysync_local._plans import KeyRing
from memorysync_local._recall.embedder_setting import load_embedder
from memorysync_local._recall.embedding import Embedder
from memorysync_local._service.store import DRAIN_SECONDS, Store

# How long a stopping worker gets beyond its drain before it is killed.
STOP_GRACE_SECONDS = 10.0
# A worker that dies within RETRY_RESET_SECONDS of its start, or cannot start, is
# started again after a delay: RETRY_FIRST_SECONDS, doubling up to RETRY_MAX_SECONDS.
RETRY_RESET_SECONDS = 60.0
RETRY_FIRST_SECONDS = 1.0
RETRY_MAX_SECONDS = 30.0


def prepare(settings: ServeSettings, embedder: Embedder | None) -> Store:
    """Open the database once and do the start-up work; the store is returned open (the
    caller reads what it needs for the banner, then closes it) and works no jobs."""
    store = Store(
        settings.db,
        load_extractor(settings.extractor),
        async_extraction=settings.async_extraction,
        embedder=embedder,
        job_role="idle",
    )
    refuse_unusable_vectors(store)  # closes the store when it raises
    return store


def serve_workers(settings: ServeSettings, sockets: list[socket.socket]) -> int:
    """Serve with one worker process on each of ``sockets`` (listening on one port)
    until SIGINT or SIGTERM; the exit status (1 when a worker could not start)."""
    supervisor = _Supervisor(settings, sockets)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in STOP_SIGNALS}
    try:
        return supervisor.run(stop)
    finally:
        supervisor.signal_all()
        # Closed before the drain: a connection arriving now is refused at once, as by a
        # stopping single-process serve, not queued on a socket no worker accepts from.
        for sock in sockets:
            sock.close()
        supervisor.join_all()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class _Supervisor:
    """Starts, watches and stops the worker processes."""

    def __init__(self, settings: ServeSettings, sockets: list[socket.socket]) -> None:
        self._settings = settings
        self._sockets = sockets
        self._context = multiprocessing.get_context("spawn")
        self._workers: dict[int, BaseProcess] = {}

    def run(self, stop: threading.Event) -> int:
        for index in range(len(self._sockets)):
            if not self._start(index, stop):
                return 1
            if stop.is_set():
                return 0
        pids = ", ".join(str(worker.pid) for worker in self._workers.values())
        print(f"{len(self._workers)} worker processes serving: pids {pids}", flush=True)
        retry = _Retry(len(self._workers))
        while not stop.is_set():
            wait([worker.sentinel for worker in self._workers.values()], timeout=0.5)
            for index, worker in list(self._workers.items()):
                if worker.is_alive() or stop.is_set() or not retry.due(index):
                    continue
                if not self._start(index, stop):
                    # The others keep serving; this one is tried again later.
                    print(
                        f"worker {index}: tried again in {retry.failed(index):.0f} s",
                        file=sys.stderr,
                        flush=True,
                    )
                    continue
                retry.started(index)
                print(
                    f"worker {index} (pid {worker.pid}) exited with status {worker.exitcode}; "
                    f"pid {self._workers[index].pid} serves in its place",
                    file=sys.stderr,
                    flush=True,
                )
        return 0

    def _start(self, index: int, stop: threading.Event) -> bool:
        """Start worker ``index`` and wait until it serves; False (with a line saying so)
        when it exits first. A stop asked for meanwhile is not a failure."""
        receiver, sender = self._context.Pipe(duplex=False)
        worker = self._context.Process(
            target=_worker,
            args=(self._settings, self._sockets[index], index, sender),
            name=f"memorysync-worker-{index}",
        )
        worker.start()
        sender.close()
        self._workers[index] = worker
        with receiver:
            # No time limit: loading a large model on a busy machine may take minutes.
            ready: Sequence[object] = ()
            while not ready and not stop.is_set():
                ready = wait([receiver, worker.sentinel], timeout=0.5)
            started = receiver in ready and _received(receiver)
        if started or stop.is_set():
            return True
        worker.join(DRAIN_SECONDS)  # it exited (or closed the pipe): its status
        print(
            f"worker {index} failed to start (exit status {worker.exitcode})",
            file=sys.stderr,
            flush=True,
        )
        return False

    def signal_all(self) -> None:
        """One SIGTERM to each live worker: it stops accepting and drains."""
        for worker in self._workers.values():
            if worker.is_alive() and worker.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.pid, signal.SIGTERM)

    def join_all(self) -> None:
        """Wait for the signalled workers to drain, together; kill the stragglers."""
        deadline = time.monotonic() + DRAIN_SECONDS + STOP_GRACE_SECONDS
        for worker in self._workers.values():
            worker.join(max(0.0, deadline - time.monotonic()))
            if worker.is_alive():
                worker.kill()
                worker.join()


class _Retry:
    """When a dead worker may be started again: at once after a worker that served for
    ``RETRY_RESET_SECONDS``; after a delay that doubles (to ``RETRY_MAX_SECONDS``) for
    one that died sooner or could not start, so a worker that always crashes does not
    reload its model in a tight loop."""

    def __init__(self, workers: int) -> None:
        now = time.monotonic()
        self._started = dict.fromkeys(range(workers), now)
        self._delay: dict[int, float] = {}
        self._not_before: dict[int, float] = {}

    def due(self, index: int) -> bool:
        """Whether dead worker ``index`` may be started now."""
        now = time.monotonic()
        if index not in self._not_before:  # just found dead
            if now - self._started[index] >= RETRY_RESET_SECONDS:
                self._delay.pop(index, None)
                self._not_before[index] = now
            else:
                self._not_before[index] = now + self._next_delay(index)
        return now >= self._not_before[index]

    def started(self, index: int) -> None:
        self._started[index] = time.monotonic()
        del self._not_before[index]

    def failed(self, index: int) -> float:
        """The seconds until the next try of worker ``index``, which could not start."""
        delay = self._next_delay(index)
        self._not_before[index] = time.monotonic() + delay
        return delay

    def _next_delay(self, index: int) -> float:
        delay = min(RETRY_MAX_SECONDS, 2 * self._delay.get(index, RETRY_FIRST_SECONDS / 2))
        self._delay[index] = delay
        return delay


def _received(receiver: Connection) -> bool:
    try:
        return bool(receiver.recv())
    except (EOFError, OSError):
        return False


def _worker(settings: ServeSettings, sock: socket.socket, index: int, started: Connection) -> None:
    """A worker process: its own store and app, served on the parent's socket."""
    # Ctrl-C at a terminal signals the whole process group; the parent then sends each
    # worker one SIGTERM. In a group of its own a worker gets only that one, so a
    # second signal never cuts its drain short.
    os.setpgrp()
    watch = _ParentWatch(index, multiprocessing.parent_process())
    store = Store(
        settings.db,
        load_extractor(settings.extractor),
        async_extraction=settings.async_extraction,
        # Strict: the parent loaded this model; a worker that cannot fails to start
        # rather than answer by words alone beside workers that answer by meaning.
        embedder=load_embedder(settings.embedder),
        job_role="lead" if index == 0 else "follower",
    )
    app = app_over(store, KeyRing(dict(settings.keys), settings.eval_keys, dict(settings.plans)))
    if settings.otel and instrument(app):
        exporting = start_sdk()
        if index == 0:  # the same line from every worker would say nothing more
            print(exporting, flush=True)
    with contextlib.suppress(OSError):  # a parent gone meanwhile: the watch stops this one
        started.send(True)
    started.close()
    run_uvicorn(app, sock, settings, threads=WORKER_PROCESS_THREADS, on_server=watch.serving)


class _ParentWatch:
    """Stops this worker as one SIGTERM would when ``parent`` is gone (``kill -9`` of
    the first process): an orphaned worker would keep serving on the port with no one
    to stop it.

    Not with a signal: a worker that is already draining (its parent signalled it, then
    died) would take it as a second one, which cuts the drain short. uvicorn is asked to
    stop instead (``should_exit``, what its own handler of a first signal sets), which
    does nothing to a worker that has stopped serving."""

    def __init__(self, index: int, parent: BaseProcess | None) -> None:
        self._index = index
        self._lock = threading.Lock()
        self._server: uvicorn.Server | None = None
        self.gone = threading.Event()  # set once the parent is gone and the stop asked
        if parent is not None:  # (always, under the supervisor)
            threading.Thread(
                target=self._watch, args=(parent,), name="memorysync-parent-watch", daemon=True
            ).start()

    def serving(self, server: uvicorn.Server) -> None:
        """The server to stop (at once, if the parent is already gone)."""
        with self._lock:
            self._server = server
            if self.gone.is_set():
                server.should_exit = True

    def _watch(self, parent: BaseProcess) -> None:
        parent.join()
        print(
            f"worker {self._index}: the first process is gone; this worker stops",
            file=sys.stderr,
            flush=True,
        )
        with self._lock:
            if self._server is not None:
                self._server.should_exit = True
            self.gone.set()
