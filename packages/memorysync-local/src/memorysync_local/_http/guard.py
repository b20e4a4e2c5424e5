"""The outermost ASGI layer: request ids, the key before the body, body limits, no raw 500.

FastAPI reads and parses a body before it resolves the route's dependencies, so
the key check there comes too late to spare the server an unauthenticated 8 MiB
body. This layer runs first: a request that carries a body to a route that needs
a key is answered 401 before one byte of the body is read; then the body is read
here, at most ``MAX_BODY_BYTES`` (413 past it, however it is framed: declared or
chunked) and with at most ``body_timeout`` seconds between two pieces of it
(408 when it stalls, and the connection is closed, so a client that stalls
cannot hold it), and handed to the app whole.

Before the app sees a keyed request, its path and query are checked as the bodies'
strings are: percent-escapes that are not UTF-8 (``%ff``, an encoded surrogate) are a
400, never decoded to U+FFFD (which would name another user); a NUL character is a
422 (neither backend can store or match one). A failure is logged with the route's
template (``/memory/{memory_id}/history``), never the path itself, which
may carry an id or a key.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import Callable, Iterable, Sequence
from typing import Any
from urllib.parse import unquote_to_bytes

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memorysync_local._http import fast_recall
from memorysync_local._http.dependencies import UNAUTHORIZED, find_caller
from memorysync_local._plans import KeyRing

# FastAPI 0.137.2+ keeps an included router's routes nested; this lists them all.
_route_contexts: Callable[[Sequence[BaseRoute]], Iterable[Any]] | None
try:
    from fastapi.routing import iter_route_contexts as _route_contexts
except ImportError:  # pragma: no cover - older FastAPI copies them into the app's routes
    _route_contexts = None

logger = logging.getLogger("memorysync.local")

MAX_BODY_BYTES = 8 * 1024 * 1024
BODY_TIMEOUT_SECONDS = 10.0
# Routes that answer without a key (everything else needs one).
PUBLIC_PATHS = frozenset(
    {"/health", "/ready", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"}
)


class GuardMiddleware:
    """Request ids, the key checked before any body is read, a capped and timed body read,
    and no unhandled exception.

    A bug must not become a traceback in the client (the embedded transport
    re-raises app exceptions into the caller): it becomes a logged 500 with a
    JSON body instead.
    """

    def __init__(
        self, app: ASGIApp, *, keys: KeyRing, body_timeout: float = BODY_TIMEOUT_SECONDS
    ) -> None:
        self.app = app
        self.keys = keys
        self.body_timeout = body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = f"req_{secrets.token_hex(12)}"
        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        public = scope.get("path") in PUBLIC_PATHS
        refusal = None if public else self._key_refusal(scope)
        if refusal is not None and _has_body(scope):
            await _send_json(send_with_id, 401, {"detail": refusal})
            return
        # Without a key the route answers 401 itself, before reading any id.
        problem = _target_problem(scope) if refusal is None else None
        if problem is not None:
            await _send_json(send_with_id, *problem)
            return
        if _declared_length(scope) > MAX_BODY_BYTES:
            await _send_json(send_with_id, 413, _too_large())
            return
        body = await self._read_body(receive)
        if body is None:
            return  # the client went away before its body arrived: nothing to answer
        if isinstance(body, int):
            if body == 413:
                await _send_json(send_with_id, 413, _too_large())
            else:
                await _send_json(send_with_id, 408, _stalled(self.body_timeout), close=True)
            return
        replayed = False

        async def receive_body() -> Message:
            # The whole body once; after it, whatever the server says (a disconnect).
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        try:
            await self._to_app(scope, body, receive_body, send_with_id)
        except Exception:
            # The route's template, never the path: it may carry an id or a key.
            logger.exception("unhandled error on %s %s", scope.get("method"), route_template(scope))
            if not started:
                await _send_json(
                    send_with_id, 500, {"detail": "internal error in memorysync-local"}
                )

    async def _to_app(self, scope: Scope, body: bytes, receive: Receive, send: Send) -> None:
        """The app's answer; an ordinary recall's from ``fast_recall`` (the same bytes,
        without FastAPI's routing and dependency solving)."""
        if fast_recall.wanted(scope):
            fast = await fast_recall.answer(scope, self.keys, body)
            if fast is not None:
                await fast(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _key_refusal(self, scope: Scope) -> str | None:
        """The 401 answer's detail when the request's key is missing or unknown, else None."""
        key = None
        for name, value in scope.get("headers", []):
            if name == b"x-api-key":
                key = value.decode("latin-1")  # as Starlette decodes a header
                break
        return None if find_caller(self.keys, key) is not None else UNAUTHORIZED

    async def _read_body(self, receive: Receive) -> bytes | int | None:
        """The request body, the status that refuses it (413 too large, 408 stalled),
        or None when the client disconnected."""
        chunks: list[bytes] = []
        size = 0
        while True:
            try:
                message = await asyncio.wait_for(receive(), self.body_timeout)
            except asyncio.TimeoutError:
                return 408
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                return 413
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


def route_template(scope: Scope) -> str:
    """The template of the route that serves ``scope`` (``/memory/{memory_id}``), for logs;
    ``<no route>`` when none matches."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str):
        return path
    app = scope.get("app")
    for candidate in _flat_routes(getattr(getattr(app, "router", None), "routes", [])):
        try:
            match, _ = candidate.matches(scope)
        except Exception:  # a scope the route cannot read: not this route
            continue
        if match == Match.FULL and isinstance(getattr(candidate, "path", None), str):
            return str(candidate.path)
    return "<no route>"


def _flat_routes(routes: list[BaseRoute]) -> Iterable[Any]:
    """Every route, those of included routers too, each with its full ``path``."""
    return routes if _route_contexts is None else _route_contexts(routes)


def _target_problem(scope: Scope) -> tuple[int, dict[str, Any]] | None:
    """The status and answer that refuse the request's path or query, or None.

    The path is read raw (the ASGI server has already decoded ``scope["path"]``,
    replacing bad bytes) and percent-decoded here as strict UTF-8.
    """
    raw = scope.get("raw_path")
    if isinstance(raw, bytes):
        path = _strict_text(unquote_to_bytes(raw.partition(b"?")[0]))
        if path is None:
            return 400, {"detail": "path: not valid UTF-8 once percent-decoded"}
    else:
        path = str(scope.get("path", ""))
    if "\x00" in path:
        return 422, _nul_refusal(["path"])
    for name, value in _query_items(scope.get("query_string", b"")):
        if name is None or value is None:
            return 400, {"detail": "query: not valid UTF-8 once percent-decoded"}
        if "\x00" in name or "\x00" in value:
            return 422, _nul_refusal(["query", name.replace("\x00", "")])
    return None


def _strict_text(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _query_items(query: bytes) -> list[tuple[str | None, str | None]]:
    """The query's (name, value) pairs, percent-decoded as strict UTF-8 (None: not UTF-8)."""
    items: list[tuple[str | None, str | None]] = []
    for part in query.split(b"&"):
        if not part:
            continue
        name, _, value = part.replace(b"+", b" ").partition(b"=")
        items.append((_strict_text(unquote_to_bytes(name)), _strict_text(unquote_to_bytes(value))))
    return items


def _nul_refusal(loc: list[str]) -> dict[str, Any]:
    where = ".".join(loc)
    msg = f"{where}: contains a NUL character"
    return {"detail": [{"loc": loc, "msg": msg, "type": "value_error"}]}


def _has_body(scope: Scope) -> bool:
    for name, value in scope.get("headers", []):
        if name == b"transfer-encoding":
            return True
        if name == b"content-length" and value.strip() not in (b"", b"0"):
            return True
    return False


def _too_large() -> dict[str, str]:
    return {"detail": f"body: request body larger than {MAX_BODY_BYTES} bytes"}


def _stalled(timeout: float) -> dict[str, str]:
    return {"detail": f"body: no part of the request body arrived for {timeout:g} seconds"}


def _declared_length(scope: Scope) -> int:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return 0
    return 0


async def _send_json(send: Send, status: int, body: dict[str, Any], *, close: bool = False) -> None:
    payload = json.dumps(body).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
    ]
    if close:
        # A stalled client gets its connection back closed, so it cannot hold it.
        # (401 and 413 leave it open: the server discards the rest of the body, and
        # closing with unread bytes would reset the connection before the client
        # reads the answer.)
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
