"""The outermost ASGI layer: request ids, the key before the body, body limits, no raw 500.

FastAPI reads and parses a body before it resolves the route's dependencies, so
the key check there comes too late to spare the server an unauthenticated 8 MiB
body. This layer runs first: a request that carries a body to a route that needs
a key is answered 401 before one byte of the body is read; then the body is read
here, at most ``MAX_BODY_BYTES`` (413 past it, however it is framed: declared or
chunked) and with at most ``body_timeout`` seconds between two pieces of it
(408 when it stalls, and the connection is closed, so a client that stalls
cannot hold it), and handed to the app whole.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memorysync_local._plans import KeyRing

logger = logging.getLogger("memorysync.local")

MAX_BODY_BYTES = 8 * 1024 * 1024
BODY_TIMEOUT_SECONDS = 10.0
# Routes that answer without a key (everything else needs one).
PUBLIC_PATHS = frozenset({"/health", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})


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

        if _has_body(scope) and scope.get("path") not in PUBLIC_PATHS:
            refusal = self._key_refusal(scope)
            if refusal is not None:
                await _send_json(send_with_id, 401, {"detail": refusal})
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
            await self.app(scope, receive_body, send_with_id)
        except Exception:
            logger.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            if not started:
                await _send_json(
                    send_with_id, 500, {"detail": "internal error in memorysync-local"}
                )

    def _key_refusal(self, scope: Scope) -> str | None:
        """Why the request's key is refused (as the route's own check words it), or None."""
        for name, value in scope.get("headers", []):
            if name == b"x-api-key":
                key = value.decode("latin-1")
                if not key.strip():
                    break
                return None if self.keys.lookup(key) is not None else "unknown API key"
        return "missing X-API-Key header"

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
