"""One serving process of ``memorysync-local serve``: its settings, and uvicorn on a
socket the caller bound (``serve`` itself, or each of ``--workers`` processes)."""

from __future__ import annotations

import contextlib
import logging
import re
import signal
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from urllib.parse import unquote

import uvicorn
from fastapi import FastAPI

from memorysync_local._http.header_timeout import header_timeout_protocol
from memorysync_local._http.worker_threads import SERVED_WORKER_THREADS, WorkerThreads
from memorysync_local._plans import Plan


@dataclass(frozen=True, repr=False)
class ServeSettings:
    """What ``serve``'s flags decided, for a process to build its app from.

    Passed to ``--workers`` processes by pickling (never on a command line or in the
    environment), so the keys stay out of ``ps``; ``repr`` shows none of them.
    """

    db: str
    keys: Mapping[str, str]
    eval_keys: tuple[str, ...] = ()
    plans: Mapping[str, Plan] = field(default_factory=dict)
    async_extraction: bool = False
    embedder: str = "none"
    extractor: str = "rules"
    log_level: str = "info"
    otel: bool = False

    def __repr__(self) -> str:
        return f"ServeSettings(db=<omitted>, keys=<{len(self.keys)} omitted>)"


# A path segment shaped like a MemorySync key (ms_ and at least 12 more characters).
_KEY_SHAPED = re.compile(r"ms_[A-Za-z0-9_\-]{12,}")


class ScrubbedPaths(logging.Filter):
    """Keeps keys out of uvicorn's access log: a client may put one in the URL.

    The query string is dropped, and a path segment that holds one of the server's
    keys, or is shaped like a key (``ms_...``), is replaced by ``<key omitted>``.
    """

    def __init__(self, keys: Sequence[str]) -> None:
        super().__init__()
        self._keys = [k for k in keys if k]

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            path, sep, _ = args[2].partition("?")
            shown = "/".join(self._segment(part) for part in path.split("/"))
            record.args = (*args[:2], shown + ("?<query omitted>" if sep else ""), *args[3:])
        return True

    def _segment(self, part: str) -> str:
        plain = unquote(part)
        if _KEY_SHAPED.search(plain) or any(key in plain for key in self._keys):
            return "<key omitted>"
        return part


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stopped(Exception):
    """SIGINT or SIGTERM arrived: stop serving and close cleanly."""


def _stop(signum: int, frame: FrameType | None) -> None:
    raise Stopped(signum)


def run_uvicorn(
    app: FastAPI,
    sock: socket.socket,
    settings: ServeSettings,
    threads: int = SERVED_WORKER_THREADS,
    on_server: Callable[[uvicorn.Server], None] | None = None,
) -> None:
    """Serve ``app`` on ``sock`` until SIGINT or SIGTERM, then close its store; its
    routes run on ``threads`` worker threads (``_http.worker_threads``). ``on_server``
    is given the uvicorn server before it starts (to stop it from another thread:
    ``should_exit``).

    uvicorn handles SIGINT/SIGTERM while it serves, then restores the handlers it
    found and raises the signal again. Ours turn that into :class:`Stopped`, so the
    store is closed (background extraction drained or left stored for the next start)
    instead of the process dying, and Ctrl-C prints no traceback.
    """
    config = uvicorn.Config(
        WorkerThreads(app, threads),
        lifespan="off",
        log_level=settings.log_level,
        http=header_timeout_protocol(app.state.body_timeout),  # 408 to a head that trickles
    )
    # After Config: it (re)configures uvicorn's loggers.
    logging.getLogger("uvicorn.access").addFilter(
        ScrubbedPaths([*settings.keys, *settings.eval_keys])
    )
    previous = {sig: signal.signal(sig, _stop) for sig in STOP_SIGNALS}
    server = uvicorn.Server(config)
    if on_server is not None:
        on_server(server)
    try:
        server.run(sockets=[sock])
    except Stopped:
        pass
    finally:
        sock.close()
        # A second signal while closing cuts the drain short: the jobs left stay stored.
        with contextlib.suppress(Stopped):
            app.state.store.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
