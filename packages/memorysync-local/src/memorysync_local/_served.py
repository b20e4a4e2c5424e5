"""The server on loopback: uvicorn in a background thread (tests, benchmarks)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterable, Mapping

import uvicorn
from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from memorysync_local._extraction.extractor import ExtractorSetting
from memorysync_local._handle import ServerHandle, app_with_keys, database_argument
from memorysync_local._http.app import DEV_API_KEY
from memorysync_local._http.guard import BODY_TIMEOUT_SECONDS
from memorysync_local._http.header_timeout import header_timeout_protocol
from memorysync_local._plans import DEFAULT_TENANT, Plan
from memorysync_local._recall.embedder_setting import EmbedderSetting
from memorysync_local._recall.embedding import DEFAULT_EMBEDDER
from memorysync_local._storage.target import shown


class _StartSignal:
    """Answers uvicorn's lifespan and sets an event once the server is serving.

    The app itself needs no lifespan; this wrapper only tells the starter that
    the server is up, so nobody has to poll.
    """

    def __init__(self, app: ASGIApp, started: threading.Event) -> None:
        self.app = app
        self.started = started

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.started.set()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return


def bind_socket(host: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    """A listening TCP socket on ``host:port`` (``port=0``: a free port). With
    ``reuse_port``, other such sockets may listen on the same port, and the kernel
    spreads new connections over them (``SO_REUSEPORT``)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    # Accepted sockets inherit this; without it small responses wait ~40 ms on
    # Nagle + delayed ACK when uvicorn is handed a pre-bound socket.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def bind_sockets(host: str, port: int, count: int) -> list[socket.socket]:
    """``count`` listening sockets on one port (``port=0``: a free one), one per
    ``serve --workers`` process: the kernel spreads new connections over them. One
    socket shared by every worker would not: each wake-up lets the first worker to run
    accept every connection waiting (measured: 20 clients, two workers, 82% of the CPU
    in one of them)."""
    first = bind_socket(host, _port_alone(host, port), reuse_port=True)
    sockets = [first]
    try:
        for _ in range(count - 1):
            sockets.append(bind_socket(host, first.getsockname()[1], reuse_port=True))
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _port_alone(host: str, port: int) -> int:
    """``port`` (a free one for 0) once bound by a socket without ``SO_REUSEPORT``.

    ``SO_REUSEPORT`` would also let the group join another server's group on the port
    (a second ``serve --workers`` of the same user), each taking part of the other's
    connections. Bound alone first, a port in use is refused (``EADDRINUSE``) as a
    single-process ``serve`` refuses it. Between this check and the group's bind
    another such group could still take the port: a window of microseconds."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # As bind_socket: a port left in TIME_WAIT by an earlier server is free.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((host, port))
        return int(probe.getsockname()[1])


class ServedServer(ServerHandle):
    """memorysync-local served by uvicorn on loopback from a background thread.

    ``base_url``, ``api_key``, ``tenant_id`` and ``db_path`` say how to reach it;
    ``stop()`` (or leaving the ``with`` block) shuts it down and closes the database.
    ``repr`` never shows the key.

    Example:
        ```python
        from memorysync_local import serve_in_thread

        with serve_in_thread("./demo.db") as srv:
            print(srv.base_url)  # http://127.0.0.1:<free port>
        ```
    """

    def __init__(
        self,
        app: FastAPI,
        *,
        api_key: str,
        tenant_id: str,
        db_path: str,
        host: str = "127.0.0.1",
        port: int = 0,
        start_timeout: float = 30.0,
    ) -> None:
        super().__init__(app, api_key=api_key, tenant_id=tenant_id, db_path=db_path)
        self._socket = bind_socket(host, port)
        bound_host, bound_port = self._socket.getsockname()[:2]
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        self.base_url = f"http://{shown}:{bound_port}"
        started = threading.Event()
        config = uvicorn.Config(
            _StartSignal(app, started),
            lifespan="on",
            log_level="warning",
            access_log=False,
            http=header_timeout_protocol(getattr(app.state, "body_timeout", BODY_TIMEOUT_SECONDS)),
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [self._socket]},
            name="memorysync-local-uvicorn",
            daemon=True,
        )
        self._thread.start()
        if not started.wait(start_timeout):
            self.stop()
            raise RuntimeError(f"memorysync-local did not start within {start_timeout} s")

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving, join the thread, close the socket and the database. Idempotent."""
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout)
        self._socket.close()
        self.store.close()

    def _shut_down(self) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"ServedServer(base_url={self.base_url!r}, db_path={shown(self.db_path)!r})"


def serve_in_thread(
    db_path: str = "./memorysync.db",
    *,
    db: str | None = None,
    api_key: str = DEV_API_KEY,
    tenant_id: str = DEFAULT_TENANT,
    host: str = "127.0.0.1",
    port: int = 0,
    api_keys: Mapping[str, str] | None = None,
    eval_keys: Iterable[str] = (),
    plans: Mapping[str, Plan] | None = None,
    async_extraction: bool = False,
    extractor: ExtractorSetting = None,
    embedder: EmbedderSetting = DEFAULT_EMBEDDER,
) -> ServedServer:
    """Serve memorysync-local on ``host:port`` (default: a free loopback port) in a thread.

    Returns once the server accepts requests. The database (``db_path`` or ``db``),
    keys and plans as :func:`embedded`.
    """
    db_path = database_argument(db_path, db, "./memorysync.db")
    app = app_with_keys(
        db_path,
        api_key=api_key,
        tenant_id=tenant_id,
        api_keys=api_keys,
        eval_keys=eval_keys,
        plans=plans,
        async_extraction=async_extraction,
        extractor=extractor,
        embedder=embedder,
    )
    try:
        return ServedServer(
            app, api_key=api_key, tenant_id=tenant_id, db_path=db_path, host=host, port=port
        )
    except BaseException:
        app.state.store.close()
        raise
