"""A scriptable fake MemorySync server on loopback, for tests and fault injection.

It is a real HTTP/1.1 socket server (raw asyncio streams on its own event loop in a
background thread), so it works the same from async tests, sync tests and threads,
and it can misbehave in ways a mocked transport cannot: answer late or never, reset
the connection mid-response, send malformed JSON or an HTML error page.

Quick start (the ``fake_server`` pytest fixture yields a started server)::

    from shared.fake_server import Fault

    async def test_something(fake_server):
        fake_server.script("/v1/memory/recall", [Fault.delay(5), Fault.status(503)])
        api = MemorySyncAPI("ms_test", base_url=fake_server.base_url)
        ...  # first recall answers after 5 s, the second gets a 503, then defaults
        assert fake_server.requests_to("/v1/memory/recall")[0].json["prompt"] == "hi"

Outside pytest: ``with FakeServer() as server: ...`` (or ``start()`` / ``stop()``).

Scripting
---------
- ``server.script(route, responses, *, method=None)`` queues one :class:`Fault` per
  future request to ``route``; each request consumes one, then the route falls back to
  its default. ``route`` is a literal path (``"/v1/memory/recall"``) or a template with
  ``{placeholders}`` matching one raw path segment each
  (``"/v1/memory/{tenant_id}/{user_id}/list"``). ``method`` restricts the match.
- ``server.set_default(route, fault, *, method=None)`` makes ``fault`` the answer to
  every request of that route until changed (``fault=None`` restores the normal
  default), e.g. ``set_default("/v1/history/append", Fault.status(503))`` for a
  server that stays down.
- ``server.reset()`` forgets scripts, defaults, recorded requests and stored state.

Faults (all static constructors of :class:`Fault`)
--------------------------------------------------
``ok()`` the route's normal answer · ``json(body, status=200, headers=None)`` any JSON
(also a body of the wrong shape) · ``status(code, body=None, headers=None)`` any status,
default body ``{"detail": "fake <code>"}`` · ``rate_limited(retry_after=None,
where="error"|"top"|"header")`` a 429 with the hint in ``error.retry_after``, at the top
level or in a ``Retry-After`` header · ``malformed_json(status=200)`` · ``html(status=502)``
an HTML error page · ``text(body, status=200, content_type="text/plain")`` · ``delay(seconds,
then=None)`` answer ``then`` (default ``ok()``) late · ``gate(event, then=None)`` answer
once a ``threading.Event`` is set (deterministic, no sleeps) · ``hang()`` never answer
(the connection stays open until the client gives up) · ``reset()`` send half a response
then reset the connection (RST) · ``close()`` close the connection without answering.

Recording and waiting
---------------------
``server.requests`` lists every :class:`RecordedRequest` (``method``, ``path`` raw,
``unquoted_path``, ``query``, ``headers`` lower-cased, ``body`` bytes, ``json``,
``route`` template) in arrival order; it is recorded before the fault runs.
``requests_to(route, method=None)`` filters them. ``wait_for_requests(count, route=None,
timeout=5.0)`` blocks (sync) and ``await wait_for_requests_async(...)`` awaits until at
least ``count`` matching requests arrived, and returns them (TimeoutError otherwise).

Default answers (contract-shaped, with a little state)
------------------------------------------------------
``GET /org/projects`` → one project with ``tenant_id = server.tenant_id`` (``"fake"``).
Stored memories live in ``server.memories`` (dicts with ``memory_id``, ``user_id``,
``text``, ``source``, ``metadata``, ``created_at``); ``server.seed_memory(user_id, text,
session_id=None, score=0.9)`` adds one. ``/memory/add`` stores its text as a memory
(``client_ref`` re-sends answer ``skipped/already_ingested``); ``add_turn`` stores each new
user turn's text as a memory (a naive "extraction") and recognises replays (same
speaker + occurred_at + text); recall/query return the user's memories (best ``score``
first, ``k`` of them) and a ``context`` of ``"- text"`` lines; list pages with
``limit``/``offset``; forget deletes by ids or filters for the ``X-End-User-ID`` user.
Transcripts live in ``server.history``: append dedupes on ``idempotency_key``
(``created: false``), ``extract`` user turns become memories; list and delete work as
the contract says. ``server.accepted_turns`` are the new (``created: true``) turns in
order — "exactly one accepted write per turn" is ``len(server.accepted_turns)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import itertools
import json as jsonlib
import re
import socket
import struct
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

try:
    import pytest
except ModuleNotFoundError:  # the bench uses FakeServer without the test tools
    pytest = None  # type: ignore[assignment]

__all__ = ["FakeServer", "Fault", "RecordedRequest", "fake_server"]

_ROUTES: tuple[tuple[str, str], ...] = (
    ("GET", "/org/projects"),
    ("POST", "/v1/memory/add_turn"),
    ("POST", "/v1/memory/recall"),
    ("POST", "/v1/memory/query"),
    ("GET", "/v1/memory/{tenant_id}/{user_id}/list"),
    ("GET", "/v1/memory/status/{memory_id}"),
    ("DELETE", "/memory/forget"),
    ("POST", "/memory/add"),
    ("POST", "/v1/history/append"),
    ("POST", "/v1/history/list"),
    ("POST", "/v1/history/delete"),
)


def _compile(route: str) -> re.Pattern[str]:
    parts = re.split(r"(\{[^/{}]+\})", route)
    pattern = "".join("[^/]+" if p.startswith("{") else re.escape(p) for p in parts)
    return re.compile(f"^{pattern}$")


_COMPILED = tuple((method, route, _compile(route)) for method, route in _ROUTES)


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class Fault:
    """One scripted answer. Build it with the static constructors."""

    kind: str
    code: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()
    seconds: float = 0.0
    then: Fault | None = None
    event: threading.Event | None = None

    @staticmethod
    def ok() -> Fault:
        """The route's normal (default) answer."""
        return Fault("ok")

    @staticmethod
    def json(body: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Fault:
        """Any JSON body with any status (also a body of the wrong shape)."""
        return Fault(
            "respond",
            code=status,
            body=jsonlib.dumps(body).encode(),
            headers=tuple((headers or {}).items()),
        )

    @staticmethod
    def status(code: int, body: Any = None, headers: Mapping[str, str] | None = None) -> Fault:
        """Status ``code``; the body defaults to ``{"detail": "fake <code>"}``."""
        return Fault.json({"detail": f"fake {code}"} if body is None else body, code, headers)

    @staticmethod
    def rate_limited(retry_after: float | None = None, where: str = "error") -> Fault:
        """A 429 with the hint in ``error.retry_after``, at the ``top`` level or a ``header``."""
        if retry_after is None:
            return Fault.json({"detail": "rate limited"}, 429)
        if where == "error":
            return Fault.json(
                {"error": {"message": "rate limited", "retry_after": retry_after}}, 429
            )
        if where == "top":
            return Fault.json({"detail": "rate limited", "retry_after": retry_after}, 429)
        if where == "header":
            return Fault.json({"detail": "rate limited"}, 429, {"Retry-After": f"{retry_after:g}"})
        raise ValueError(f"where must be 'error', 'top' or 'header', got {where!r}")

    @staticmethod
    def malformed_json(status: int = 200) -> Fault:
        """A body announced as JSON that does not parse."""
        return Fault("respond", code=status, body=b'{"context": "- Lives in Lis')

    @staticmethod
    def html(status: int = 502) -> Fault:
        """An HTML error page, as a proxy in front of the service would send."""
        phrase = _phrase(status)
        page = (
            f"<html><head><title>{status} {phrase}</title></head>"
            f"<body><h1>{phrase}</h1></body></html>"
        )
        return Fault("respond", code=status, body=page.encode(), content_type="text/html")

    @staticmethod
    def text(body: str, status: int = 200, content_type: str = "text/plain") -> Fault:
        """Any text body."""
        return Fault("respond", code=status, body=body.encode(), content_type=content_type)

    @staticmethod
    def delay(seconds: float, then: Fault | None = None) -> Fault:
        """Answer ``then`` (default: the normal answer) after ``seconds``."""
        return Fault("delay", seconds=seconds, then=then)

    @staticmethod
    def gate(event: threading.Event, then: Fault | None = None) -> Fault:
        """Answer ``then`` once ``event`` is set."""
        return Fault("gate", event=event, then=then)

    @staticmethod
    def hang() -> Fault:
        """Never answer; the connection stays open until the client closes it."""
        return Fault("hang")

    @staticmethod
    def reset() -> Fault:
        """Send the head and part of the body, then reset the connection."""
        return Fault("reset")

    @staticmethod
    def close() -> Fault:
        """Close the connection without sending anything."""
        return Fault("close")


def _phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    route: str | None

    @property
    def unquoted_path(self) -> str:
        """The path with %-escapes decoded."""
        return unquote(self.path)

    @property
    def json(self) -> Any:
        """The body parsed as JSON (None when empty or not JSON)."""
        if not self.body:
            return None
        try:
            return jsonlib.loads(self.body)
        except ValueError:
            return None


@dataclass
class _Script:
    method: str | None
    route: str
    pattern: re.Pattern[str]
    queue: list[Fault] = field(default_factory=list)


class _Reply(Exception):
    """Raised by a default handler to answer an error."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(status)
        self.status = status
        self.body = body


class _TrackedStreamProtocol(asyncio.StreamReaderProtocol):
    """A stream protocol whose transport stays in ``open_transports`` until it is lost."""

    def __init__(self, open_transports: set[asyncio.BaseTransport], handler: Any) -> None:
        super().__init__(asyncio.StreamReader(), handler)
        self._open_transports = open_transports
        self._tracked: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._tracked = transport
        self._open_transports.add(transport)
        super().connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self._open_transports.discard(self._tracked)  # type: ignore[arg-type]
        super().connection_lost(exc)


class FakeServer:
    """A scriptable MemorySync server on 127.0.0.1 (see the module docstring)."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = 0
        self.tenant_id = "fake"
        self.requests: list[RecordedRequest] = []
        self.memories: list[dict[str, Any]] = []
        self.history: list[dict[str, Any]] = []
        self.accepted_turns: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._scripts: list[_Script] = []
        self._defaults: list[_Script] = []
        self._listeners: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self._ids = itertools.count(1)
        self._history_ids = itertools.count(1_000_000_000_001)
        self._request_ids = itertools.count(1)
        self._replays: set[tuple[str, str, str, str]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._listening: socket.socket | None = None
        # Accepted sockets not yet owned by a transport: closed at stop if still here.
        self._unowned: set[socket.socket] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        # Every accepted connection's transport until it is closed: a strong reference,
        # so none can be collected unclosed, whatever became of its handler.
        self._transports: set[asyncio.BaseTransport] = set()

    # ------------------------------------------------------------------ lifecycle

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://{self.host}:{self.port}"

    def start(self) -> FakeServer:
        """Start serving in a background thread; returns self."""
        if self._thread is not None:
            return self
        ready = threading.Event()
        loop = asyncio.new_event_loop()
        self._loop = loop

        def run() -> None:
            asyncio.set_event_loop(loop)
            listening = socket.create_server((self.host, 0))
            listening.setblocking(False)
            self.port = listening.getsockname()[1]
            self._listening = listening
            loop.add_reader(listening.fileno(), self._accept, listening)
            ready.set()
            loop.run_forever()

        self._thread = threading.Thread(target=run, name="fake-memorysync", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the fake server did not start within 10 s")
        return self

    def stop(self) -> None:
        """Stop serving: every open connection is closed, the thread joined."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        future = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
        with contextlib.suppress(Exception):
            future.result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
        self._loop = None
        self._thread = None

    def _accept(self, listening: socket.socket) -> None:
        """Accept what is waiting; each socket stays ours until its transport owns it.

        Our own accept rather than ``loop.create_server``: under load, asyncio dropped
        an accepted socket unclosed now and then when a client connected as the server
        stopped (a ResourceWarning in whichever later test collected it).
        """
        while True:
            try:
                conn, _ = listening.accept()
            except (BlockingIOError, InterruptedError):
                return
            conn.setblocking(False)
            self._unowned.add(conn)
            asyncio.get_running_loop().create_task(self._adopt(conn))

    async def _adopt(self, conn: socket.socket) -> None:
        await asyncio.get_running_loop().connect_accepted_socket(self._protocol, conn)
        self._unowned.discard(conn)

    async def _shutdown(self) -> None:
        listening = self._listening
        assert listening is not None
        asyncio.get_running_loop().remove_reader(listening.fileno())
        listening.close()
        # Then: end the registered handlers and let every other task of this loop run
        # on (a handler not yet started: cancelling one before it starts would skip
        # the ``finally`` that closes its socket), until this is the loop's only task.
        me = asyncio.current_task()
        deadline = asyncio.get_running_loop().time() + 10.0
        while asyncio.get_running_loop().time() < deadline:
            for task in list(self._tasks):
                task.cancel()
            others = asyncio.all_tasks() - {me}
            if not others:
                break
            await asyncio.wait(others, timeout=0.05, return_when=asyncio.FIRST_COMPLETED)
        # Whatever no handler closed is closed here.
        for conn in list(self._unowned):
            conn.close()
        for transport in list(self._transports):
            transport.abort()  # type: ignore[attr-defined]
        # abort() closes the socket in a callback it schedules now (call_soon): this
        # task resumes after it.
        await asyncio.sleep(0)

    def _protocol(self) -> asyncio.StreamReaderProtocol:
        """The stream protocol of one accepted connection (its transport tracked)."""
        return _TrackedStreamProtocol(self._transports, self._connection)

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ scripting

    def script(self, route: str, responses: Sequence[Fault], *, method: str | None = None) -> None:
        """Queue ``responses`` for the next requests to ``route`` (one each, in order)."""
        with self._lock:
            for existing in self._scripts:
                if existing.route == route and existing.method == method:
                    existing.queue.extend(responses)
                    return
            self._scripts.append(_Script(method, route, _compile(route), list(responses)))

    def set_default(self, route: str, fault: Fault | None, *, method: str | None = None) -> None:
        """Answer every request to ``route`` with ``fault`` (None: the normal answer)."""
        with self._lock:
            self._defaults = [
                d for d in self._defaults if not (d.route == route and d.method == method)
            ]
            if fault is not None:
                self._defaults.append(_Script(method, route, _compile(route), [fault]))

    def reset(self) -> None:
        """Forget scripts, defaults, recorded requests and stored state."""
        with self._lock:
            self._scripts.clear()
            self._defaults.clear()
            self.requests.clear()
            self.memories.clear()
            self.history.clear()
            self.accepted_turns.clear()
            self._replays.clear()

    def seed_memory(
        self,
        user_id: str,
        text: str,
        *,
        session_id: str | None = None,
        score: float = 0.9,
        source: str = "seed",
    ) -> int:
        """Store a memory directly; returns its id."""
        with self._lock:
            return self._store_memory(user_id, text, source, {}, session_id, score=score)

    # ------------------------------------------------------------------ recording

    def requests_to(self, route: str, method: str | None = None) -> list[RecordedRequest]:
        """The recorded requests whose path matches ``route`` (literal or template)."""
        pattern = _compile(route)
        with self._lock:
            return [
                r
                for r in self.requests
                if pattern.match(r.path) and (method is None or r.method == method.upper())
            ]

    def _matching(self, route: str | None, method: str | None) -> list[RecordedRequest]:
        if route is None:
            return [r for r in self.requests if method is None or r.method == method.upper()]
        pattern = _compile(route)
        return [
            r
            for r in self.requests
            if pattern.match(r.path) and (method is None or r.method == method.upper())
        ]

    def wait_for_requests(
        self,
        count: int,
        route: str | None = None,
        *,
        method: str | None = None,
        timeout: float = 30.0,
    ) -> list[RecordedRequest]:
        """Block until ``count`` matching requests arrived; TimeoutError after ``timeout``."""
        with self._arrived:
            ok = self._arrived.wait_for(
                lambda: len(self._matching(route, method)) >= count, timeout
            )
            found = self._matching(route, method)
        if not ok:
            raise TimeoutError(
                f"{len(found)} of {count} requests to {route or 'any route'} arrived"
            )
        return found

    async def wait_for_requests_async(
        self,
        count: int,
        route: str | None = None,
        *,
        method: str | None = None,
        timeout: float = 30.0,
    ) -> list[RecordedRequest]:
        """Await until ``count`` matching requests arrived; TimeoutError after ``timeout``."""
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        entry = (loop, event)
        with self._lock:
            self._listeners.append(entry)
        try:
            deadline = loop.time() + timeout
            while True:
                event.clear()
                with self._lock:
                    found = self._matching(route, method)
                if len(found) >= count:
                    return found
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise TimeoutError(
                        f"{len(found)} of {count} requests to {route or 'any route'} arrived"
                    )
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(event.wait(), remaining)
        finally:
            with self._lock:
                self._listeners.remove(entry)

    def _record(self, request: RecordedRequest) -> Fault:
        with self._arrived:
            self.requests.append(request)
            self._arrived.notify_all()
            for loop, event in self._listeners:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(event.set)
            for script in self._scripts:
                if script.queue and self._applies(script, request):
                    return script.queue.pop(0)
            for default in self._defaults:
                if self._applies(default, request):
                    return default.queue[0]
        return Fault.ok()

    @staticmethod
    def _applies(script: _Script, request: RecordedRequest) -> bool:
        if script.method is not None and script.method.upper() != request.method:
            return False
        return bool(
            script.pattern.match(request.path) or script.pattern.match(request.unquoted_path)
        )

    # ------------------------------------------------------------------ HTTP

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                request = await self._read_request(head, reader)
                if request is None:
                    return
                fault = self._record(request)
                if not await self._perform(fault, request, reader, writer):
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        except asyncio.CancelledError:
            # Only stop() cancels connections; end quietly.
            return
        finally:
            self._tasks.discard(task)
            with contextlib.suppress(Exception):
                writer.close()
                # Until the socket is really closed: stop() may end the loop right after,
                # and a transport left half-closed warns (ResourceWarning) when collected,
                # in whichever later test the collection happens.
                await asyncio.wait_for(writer.wait_closed(), 10.0)

    async def _read_request(
        self, head: bytes, reader: asyncio.StreamReader
    ) -> RecordedRequest | None:
        lines = head.decode("latin-1").split("\r\n")
        try:
            method, target, _ = lines[0].split(" ", 2)
        except ValueError:
            return None
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
                if size == 0:
                    await reader.readuntil(b"\r\n")
                    break
                body += await reader.readexactly(size)
                await reader.readexactly(2)
        else:
            length = int(headers.get("content-length", "0") or 0)
            body = await reader.readexactly(length) if length else b""
        parts = urlsplit(target)
        route = next(
            (r for m, r, p in _COMPILED if m == method.upper() and p.match(parts.path)), None
        )
        return RecordedRequest(
            method=method.upper(),
            path=parts.path,
            query=dict(parse_qsl(parts.query)),
            headers=headers,
            body=body,
            route=route,
        )

    async def _perform(
        self,
        fault: Fault,
        request: RecordedRequest,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        """Run ``fault``; False when the connection must be closed afterwards."""
        while fault.kind in ("delay", "gate"):
            if fault.kind == "delay":
                await asyncio.sleep(fault.seconds)
            else:
                assert fault.event is not None
                # A threading.Event (set from any thread) cannot be awaited: poll it.
                while not fault.event.is_set():  # noqa: ASYNC110
                    await asyncio.sleep(0.005)
            fault = fault.then or Fault.ok()
        if fault.kind == "hang":
            with contextlib.suppress(ConnectionError):
                while await reader.read(65536):
                    pass
            return False
        if fault.kind == "close":
            return False
        if fault.kind == "reset":
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                b"content-length: 200\r\n\r\n" + b'{"context": "- Lives'
            )
            with contextlib.suppress(ConnectionError):
                await writer.drain()
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return False
        if fault.kind == "ok":
            status, payload = self._default_answer(request)
            body = b"" if status == 204 else jsonlib.dumps(payload).encode()
            await self._write(writer, status, body, "application/json", ())
        else:
            await self._write(writer, fault.code, fault.body, fault.content_type, fault.headers)
        return request.headers.get("connection", "").lower() != "close"

    async def _write(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        body: bytes,
        content_type: str,
        headers: tuple[tuple[str, str], ...],
    ) -> None:
        lines = [f"HTTP/1.1 {status} {_phrase(status)}"]
        names = {name.lower() for name, _ in headers}
        if "x-request-id" not in names:
            lines.append(f"x-request-id: req_fake_{next(self._request_ids)}")
        if status not in (204, 304):
            lines.append(f"content-type: {content_type}")
            lines.append(f"content-length: {len(body)}")
        lines.extend(f"{name}: {value}" for name, value in headers)
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        if status not in (204, 304):
            writer.write(body)
        await writer.drain()

    # ------------------------------------------------------------------ default answers

    def _default_answer(self, request: RecordedRequest) -> tuple[int, Any]:
        handlers = {
            "/org/projects": self._projects,
            "/v1/memory/add_turn": self._add_turn,
            "/v1/memory/recall": self._recall,
            "/v1/memory/query": self._query,
            "/v1/memory/{tenant_id}/{user_id}/list": self._list,
            "/v1/memory/status/{memory_id}": self._status,
            "/memory/forget": self._forget,
            "/memory/add": self._add,
            "/v1/history/append": self._append,
            "/v1/history/list": self._history_list,
            "/v1/history/delete": self._history_delete,
        }
        handler = handlers.get(request.route or "")
        if handler is None:
            return 404, {"detail": "Not Found"}
        if request.method in ("POST", "DELETE") and not isinstance(request.json, dict):
            return 422, {"detail": [{"msg": "the body must be a JSON object", "loc": ["body"]}]}
        try:
            with self._lock:
                return 200, handler(request)
        except _Reply as reply:
            return reply.status, reply.body

    @staticmethod
    def _need(body: Mapping[str, Any], *names: str) -> None:
        for name in names:
            value = body.get(name)
            if value is None or (isinstance(value, str) and not value.strip()):
                raise _Reply(
                    422, {"detail": [{"msg": f"field required: {name}", "loc": ["body", name]}]}
                )

    def _store_memory(
        self,
        user_id: str,
        text: str,
        source: str,
        metadata: Mapping[str, Any],
        session_id: str | None,
        *,
        score: float = 0.9,
        client_ref: str | None = None,
        derived_from: str | None = None,
    ) -> int:
        inner = {k: v for k, v in metadata.items() if isinstance(v, (str, int, float, bool))}
        if session_id is not None:
            inner["session_id"] = session_id
        memory_id = next(self._ids)
        self.memories.append(
            {
                "memory_id": memory_id,
                "user_id": user_id,
                "text": text,
                "source": source,
                "created_at": _now(),
                "metadata": {"metadata": inner},
                "score": score,
                "client_ref": client_ref,
                "derived_from": derived_from,
            }
        )
        return memory_id

    def _public(self, memory: Mapping[str, Any], *, recall: bool = False) -> dict[str, Any]:
        item = {
            "memory_id": memory["memory_id"],
            "text": memory["text"],
            "source": memory["source"],
            "created_at": memory["created_at"],
            "metadata": memory["metadata"],
        }
        if recall:
            item["value"] = memory["text"]
            item["score"] = memory["score"]
        return item

    def _of_user(self, user_id: str) -> list[dict[str, Any]]:
        return [m for m in self.memories if m["user_id"] == user_id]

    def _projects(self, request: RecordedRequest) -> Any:
        return [
            {
                "id": "proj_fake0000000000",
                "name": "Fake",
                "tenant_id": self.tenant_id,
                "is_default": True,
                "memory_count": len(self.memories),
                "created_at": "2026-11-29T10:00:00Z",
                "updated_at": "2026-11-29T10:00:00Z",
            }
        ]

    def _add_turn(self, request: RecordedRequest) -> Any:
        body = request.json
        self._need(body, "tenant_id", "user_id", "text")
        role = body.get("role") or "user"
        replay_key = (
            body["user_id"],
            str(body.get("speaker")),
            str(body.get("occurred_at")),
            body["text"],
        )
        answer = {"request_id": f"req_turn_{next(self._request_ids)}", "memory_id": None}
        if body.get("speaker") is not None and replay_key in self._replays:
            return {
                **answer,
                "status": "ok",
                "processing_status": "skipped_replay",
                "already_exists": True,
            }
        self._replays.add(replay_key)
        if role != "user":
            return {
                **answer,
                "status": "ok",
                "processing_status": "skipped_non_user_turn",
                "already_exists": False,
            }
        metadata = body.get("metadata") or {}
        self._store_memory(
            body["user_id"],
            body["text"],
            body.get("source") or "api",
            metadata,
            metadata.get("session_id") if isinstance(metadata, dict) else None,
        )
        return {
            **answer,
            "status": "processing",
            "processing_status": "distilling",
            "already_exists": False,
        }

    def _ranked(self, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        self._need(body, "tenant_id", "user_id", "prompt")
        k = body.get("k") or 10
        ranked = sorted(self._of_user(body["user_id"]), key=lambda m: -float(m["score"]))
        return [self._public(m, recall=True) for m in ranked[: int(k)]]

    def _recall(self, request: RecordedRequest) -> Any:
        memories = self._ranked(request.json)
        context = "\n".join("- " + m["text"] for m in memories)
        return {"context": context, "memories": memories, "latency_ms": 0.1}

    def _query(self, request: RecordedRequest) -> Any:
        return {"memories": self._ranked(request.json)}

    def _list(self, request: RecordedRequest) -> Any:
        user_id = unquote(request.path.split("/")[4])
        memories = list(reversed(self._of_user(user_id)))
        limit = int(request.query.get("limit", "0") or 0)
        offset = int(request.query.get("offset", "0") or 0)
        page = memories[offset : offset + limit] if limit else memories[offset:]
        return {"memories": [self._public(m) for m in page], "total": len(memories)}

    def _status(self, request: RecordedRequest) -> Any:
        raw = request.path.rsplit("/", 1)[-1]
        number = (
            int(raw[2:] if raw.startswith("m_") else raw)
            if raw.removeprefix("m_").isdigit()
            else -1
        )
        if not any(m["memory_id"] == number for m in self.memories):
            raise _Reply(404, {"detail": f"memory {raw} not found"})
        return {"memory_id": number, "status": "ready"}

    def _forget(self, request: RecordedRequest) -> Any:
        body = request.json
        user_id = request.headers.get("x-end-user-id")
        if not user_id:
            raise _Reply(422, {"detail": "X-End-User-ID header required"})
        ids, filters = body.get("memory_ids"), body.get("filters")
        if (ids is None) == (filters is None) or ids == [] or filters == {}:
            raise _Reply(422, {"detail": "exactly one of memory_ids or filters is required"})
        mine = self._of_user(user_id)
        if ids is not None:
            doomed = [m for m in mine if m["memory_id"] in set(ids)]
        else:
            doomed = [
                m
                for m in mine
                if all(
                    (
                        m["metadata"]["metadata"].get("session_id") == v
                        if k == "session_id"
                        else True
                    )
                    and (m["source"] == v if k == "source" else True)
                    for k, v in filters.items()
                )
            ]
        if body.get("dry_run"):
            return [m["memory_id"] for m in doomed]
        for memory in doomed:
            self.memories.remove(memory)
        return [m["memory_id"] for m in doomed]

    def _add(self, request: RecordedRequest) -> Any:
        body = request.json
        user_id = request.headers.get("x-end-user-id")
        if not user_id:
            raise _Reply(422, {"detail": "X-End-User-ID header required"})
        self._need(body, "text")
        ref = body.get("client_ref")
        if ref is not None:
            earlier = [m for m in self._of_user(user_id) if m["client_ref"] == ref]
            if earlier:
                return {
                    "status": "skipped",
                    "reason": "already_ingested",
                    "memory_ids": [m["memory_id"] for m in earlier],
                }
        memory_id = self._store_memory(
            user_id,
            body["text"],
            body.get("source") or "api",
            body.get("metadata") or {},
            body.get("session_id"),
            client_ref=ref,
        )
        memory = self.memories[-1]
        return {
            "id": memory_id,
            "text": memory["text"],
            "source": memory["source"],
            "metadata": memory["metadata"],
            "created_at": memory["created_at"],
        }

    def _append(self, request: RecordedRequest) -> Any:
        body = request.json
        self._need(body, "tenant_id", "user_id", "session_id")
        turns = body.get("turns")
        if not isinstance(turns, list) or not 1 <= len(turns) <= 100:
            raise _Reply(
                422,
                {"detail": [{"msg": "turns must hold 1 to 100 items", "loc": ["body", "turns"]}]},
            )
        items, request_ids = [], []
        for turn in turns:
            role = str(turn.get("role", "user")).lower()
            role = {"human": "user", "ai": "assistant"}.get(role, role)
            key = turn.get("idempotency_key")
            existing = next(
                (
                    h
                    for h in self.history
                    if key is not None
                    and h["idempotency_key"] == key
                    and h["user_id"] == body["user_id"]
                    and h["session_id"] == body["session_id"]
                ),
                None,
            )
            if existing is not None:
                items.append({**self._turn_public(existing), "created": False})
                continue
            stored = {
                "id": f"h_{next(self._history_ids)}",
                "user_id": body["user_id"],
                "session_id": body["session_id"],
                "role": role,
                "content": turn.get("content"),
                "seq": turn.get("seq"),
                "occurred_at": turn.get("occurred_at") or _now(),
                "payload": turn.get("payload"),
                "source": body.get("source"),
                "created_at": _now(),
                "idempotency_key": key,
            }
            self.history.append(stored)
            self.accepted_turns.append(stored)
            items.append({**self._turn_public(stored), "created": True})
            if body.get("extract", True) and role == "user" and stored["content"]:
                self._store_memory(
                    body["user_id"],
                    str(stored["content"]),
                    body.get("source") or "api",
                    body.get("metadata") or {},
                    body["session_id"],
                    derived_from=stored["id"],
                )
                request_ids.append(f"req_hist_{next(self._request_ids)}")
        return {"items": items, "request_ids": request_ids, "status": "ok"}

    @staticmethod
    def _turn_public(stored: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in stored.items() if k not in ("user_id", "idempotency_key")}

    def _session_turns(self, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        return [
            h
            for h in self.history
            if h["user_id"] == body["user_id"]
            and h["session_id"] == body.get("session_id")
            and (body.get("source") is None or h["source"] == body.get("source"))
        ]

    def _history_list(self, request: RecordedRequest) -> Any:
        body = request.json
        self._need(body, "tenant_id", "user_id", "session_id")
        turns = self._session_turns(body)
        limit = int(body.get("limit") or 0)
        shown = turns[-limit:] if limit else turns
        return {"items": [self._turn_public(h) for h in shown], "total": len(turns)}

    def _history_delete(self, request: RecordedRequest) -> Any:
        body = request.json
        self._need(body, "tenant_id", "user_id")
        if (body.get("session_id") is None) == (body.get("ids") is None):
            raise _Reply(422, {"detail": "exactly one of session_id or ids is required"})
        if body.get("ids") is not None:
            wanted = set(body["ids"])
            doomed = [
                h for h in self.history if h["user_id"] == body["user_id"] and h["id"] in wanted
            ]
        else:
            doomed = self._session_turns(body)
        doomed_ids = {h["id"] for h in doomed}
        self.history[:] = [h for h in self.history if h["id"] not in doomed_ids]
        facts: list[str] = []
        if body.get("delete_derived_facts"):
            derived = [m for m in self.memories if m["derived_from"] in doomed_ids]
            facts = [f"m_{m['memory_id']}" for m in derived]
            self.memories[:] = [m for m in self.memories if m["derived_from"] not in doomed_ids]
        return {"deleted_ids": [h["id"] for h in doomed], "deleted_fact_ids": facts}


def _fake_server() -> Iterator[FakeServer]:
    """A started :class:`FakeServer` on loopback, stopped after the test."""
    server = FakeServer().start()
    try:
        yield server
    finally:
        server.stop()


if pytest is not None:
    fake_server = pytest.fixture(_fake_server, name="fake_server")
