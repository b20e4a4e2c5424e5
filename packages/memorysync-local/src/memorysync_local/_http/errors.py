"""Error answers: one shape per kind, a request id on every answer, never a raw 500.

Validation errors keep FastAPI's ``{"detail": [{"loc", "msg", "type"}]}`` shape,
with the field's dotted path at the start of each ``msg`` so that a client
which shows only the message still learns which field was wrong. Storage failures
arrive as the storage-neutral errors (``_storage.errors``; each backend translates
its engine's own): busy is a retryable 503, unwritable or corrupt storage a 507.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from memorysync_local._http.guard import route_template
from memorysync_local._service.quota import QuotaExceeded
from memorysync_local._storage.errors import StorageBusy, StorageCorrupt, StorageUnwritable

logger = logging.getLogger("memorysync.local")


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


async def _storage_busy(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StorageBusy)
    logger.warning("database busy on %s: %s", route_template(request.scope), exc.detail)
    return JSONResponse(
        {"error": {"message": exc.message, "type": "storage_busy", "retry_after": 1}},
        status_code=503,
        headers={"Retry-After": "1"},
    )


async def _storage_failed(request: Request, exc: Exception) -> JSONResponse:
    # Full, read-only, failing or damaged storage lasts until an operator acts: a
    # distinct 507 with no retry hint, and the storage engine's own words in the log.
    assert isinstance(exc, (StorageUnwritable, StorageCorrupt))
    kind = exc.reason if isinstance(exc, StorageUnwritable) else "corrupt"
    logger.error("storage failure on %s (%s): %s", route_template(request.scope), kind, exc.detail)
    return JSONResponse(
        {"error": {"message": exc.message, "type": f"storage_{kind}"}}, status_code=507
    )


def install_error_handlers(app: FastAPI) -> None:
    """Answer validation, HTTP, quota and storage errors in their documented shapes."""
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(QuotaExceeded, _quota_error)
    app.add_exception_handler(StorageBusy, _storage_busy)
    app.add_exception_handler(StorageUnwritable, _storage_failed)
    app.add_exception_handler(StorageCorrupt, _storage_failed)
