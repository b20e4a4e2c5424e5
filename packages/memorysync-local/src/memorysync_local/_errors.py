"""Error answers: one shape per kind, a request id on every answer, never a raw 500.

Validation errors keep FastAPI's ``{"detail": [{"loc", "msg", "type"}]}`` shape,
with the field's dotted path at the start of each ``msg`` so that a client
which shows only the message still learns which field was wrong.
"""

from __future__ import annotations

import json
import logging
import secrets
import sqlite3
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memorysync_local._store import QuotaExceeded

logger = logging.getLogger("memorysync_local")

MAX_BODY_BYTES = 8 * 1024 * 1024


def _where(loc: Sequence[Any]) -> str:
    parts = [str(p) for p in loc if p != "body"]
    return ".".join(parts) if parts else "body"


def _clean_error(error: dict[str, Any]) -> dict[str, Any]:
    loc = list(error.get("loc", ()))
    msg = str(error.get("msg", "invalid value"))
    if error.get("type") == "json_invalid":
        ctx = error.get("ctx") or {}
        msg = f"body: malformed JSON ({ctx.get('error', 'cannot be parsed')})"
        loc = ["body"]
    elif error.get("type") == "missing" and loc and loc[0] == "body" and len(loc) == 1:
        msg = "body: a JSON object is required"
    else:
        msg = f"{_where(loc)}: {msg}"
    return {"loc": loc, "msg": msg, "type": str(error.get("type", "value_error"))}


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    detail = [_clean_error(dict(e)) for e in exc.errors()]
    return JSONResponse({"detail": detail}, status_code=422)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    detail = exc.detail
    if exc.status_code == 400 and detail == "There was an error parsing the body":
        detail = "body: cannot be parsed as JSON (malformed, too deep, or not UTF-8)"
    return JSONResponse(
        {"detail": detail}, status_code=exc.status_code, headers=exc.headers or None
    )


async def _quota_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, QuotaExceeded)
    return JSONResponse(
        {
            "error": {
                "message": str(exc),
                "type": "quota_exceeded",
                "retry_after": exc.retry_after,
            },
            "retry_after": exc.retry_after,
        },
        status_code=429,
        headers={"Retry-After": str(exc.retry_after)},
    )


async def _database_busy(request: Request, exc: Exception) -> JSONResponse:
    logger.warning("database error on %s: %s", request.url.path, exc.__class__.__name__)
    return JSONResponse(
        {"error": {"message": "the database is busy; retry shortly", "retry_after": 1}},
        status_code=503,
        headers={"Retry-After": "1"},
    )


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(QuotaExceeded, _quota_error)
    app.add_exception_handler(sqlite3.OperationalError, _database_busy)


class GuardMiddleware:
    """Outermost layer: request ids, a body size cap, and no unhandled exception.

    A bug must not become a traceback in the client (the embedded transport
    re-raises app exceptions into the caller): it becomes a logged 500 with a
    JSON body instead.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

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

        if _declared_length(scope) > MAX_BODY_BYTES:
            await _send_json(send_with_id, 413, _too_large())
            return
        received = 0

        async def receive_capped() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > MAX_BODY_BYTES:
                    raise _BodyTooLarge
            return message

        try:
            await self.app(scope, receive_capped, send_with_id)
        except _BodyTooLarge:
            if not started:
                await _send_json(send_with_id, 413, _too_large())
        except Exception:
            logger.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            if not started:
                await _send_json(
                    send_with_id, 500, {"detail": "internal error in memorysync-local"}
                )


class _BodyTooLarge(Exception):
    pass


def _too_large() -> dict[str, str]:
    return {"detail": f"body: request body larger than {MAX_BODY_BYTES} bytes"}


def _declared_length(scope: Scope) -> int:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return 0
    return 0


async def _send_json(send: Send, status: int, body: dict[str, Any]) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})
