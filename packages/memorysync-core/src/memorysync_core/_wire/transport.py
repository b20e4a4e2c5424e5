"""The shared httpx client pool and the one place httpx outcomes become typed errors."""

from __future__ import annotations

import asyncio
import email.utils
import json as jsonlib
import math
import ssl
import threading
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from .. import _telemetry as telemetry
from .._errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthError,
    InsufficientStorageError,
    MemorySyncError,
    NotFoundError,
    RateLimitError,
    ResponseFormatError,
    ServerError,
    UnsupportedError,
    ValidationError,
)
from .deadline import within

# --------------------------------------------------------------------------- pool

_PoolKey = tuple[str, str, int]


@dataclass
class _Entry:
    client: httpx.AsyncClient
    refs: int
    # Keeps the transport alive while the entry uses its id() in the key.
    transport: httpx.AsyncBaseTransport | None


_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[_PoolKey, _Entry]] = (
    weakref.WeakKeyDictionary()
)


def _pool_key(base_url: str, api_key: str, transport: httpx.AsyncBaseTransport | None) -> _PoolKey:
    return (base_url, api_key, id(transport) if transport is not None else 0)


def acquire_client(
    loop: asyncio.AbstractEventLoop,
    base_url: str,
    api_key: str,
    transport: httpx.AsyncBaseTransport | None,
) -> httpx.AsyncClient:
    """Take a reference to the shared client of (loop, base_url, key, transport)."""
    pool = _pools.setdefault(loop, {})
    key = _pool_key(base_url, api_key, transport)
    entry = pool.get(key)
    if entry is None or entry.client.is_closed:
        if transport is None:
            client = httpx.AsyncClient(verify=_tls_context(), follow_redirects=False)
        else:
            client = httpx.AsyncClient(transport=transport, follow_redirects=False)
        entry = _Entry(client=client, refs=0, transport=transport)
        pool[key] = entry
    entry.refs += 1
    return entry.client


_TLS: list[ssl.SSLContext | bool] = []


def _tls_context() -> ssl.SSLContext | bool:
    """One TLS context for every client of the process, as httpx builds it by default.

    Building one loads the CA bundle: tens of milliseconds of CPU, holding the
    interpreter lock, for each client (each event loop, each key). Shared, only the first
    client pays. ``True`` (a context per client) on httpx releases before 0.28, which
    have no public way to build it.
    """
    if not _TLS:
        make = getattr(httpx, "create_ssl_context", None)
        _TLS.append(make() if make is not None else True)
    return _TLS[0]


def release_client(
    loop: asyncio.AbstractEventLoop,
    base_url: str,
    api_key: str,
    transport: httpx.AsyncBaseTransport | None,
    client: httpx.AsyncClient,
) -> httpx.AsyncClient | None:
    """Drop a reference; returns the client when this was the last one (caller closes it)."""
    pool = _pools.get(loop)
    if pool is None:
        return None
    key = _pool_key(base_url, api_key, transport)
    entry = pool.get(key)
    if entry is None or entry.client is not client:
        return None
    entry.refs -= 1
    if entry.refs > 0:
        return None
    del pool[key]
    return entry.client


# --------------------------------------------------------------------------- errors


def scrub(text: str, secret: str) -> str:
    """Remove every occurrence of ``secret`` from ``text``."""
    return text.replace(secret, "***") if secret else text


def _parse_retry_after(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(text)
            except (TypeError, ValueError, IndexError):
                return None
            seconds = when.timestamp() - time.time()
    else:
        return None
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def _message_from_body(body: object) -> str | None:
    if not isinstance(body, Mapping):
        return None
    detail = body.get("detail")
    if isinstance(detail, str):
        return detail
    if isinstance(detail, list):
        parts = [
            str(item.get("msg")) if isinstance(item, Mapping) and "msg" in item else str(item)
            for item in detail
        ]
        if parts:
            return "; ".join(parts)
    error = body.get("error")
    if isinstance(error, Mapping) and isinstance(error.get("message"), str):
        return str(error["message"])
    if isinstance(error, str):
        return error
    message = body.get("message")
    if isinstance(message, str):
        return message
    return None


def _retry_after_from(body: object, response: httpx.Response) -> float | None:
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping) and "retry_after" in error:
            found = _parse_retry_after(error["retry_after"])
            if found is not None:
                return found
        if "retry_after" in body:
            found = _parse_retry_after(body["retry_after"])
            if found is not None:
                return found
    header = response.headers.get("retry-after")
    return _parse_retry_after(header) if header is not None else None


def _request_id(response: httpx.Response, body: object) -> str | None:
    rid: str | None = response.headers.get("x-request-id")
    if rid:
        return rid
    if isinstance(body, Mapping):
        found = body.get("request_id")
        if isinstance(found, str):
            return found
    return None


def _decode_json(response: httpx.Response) -> object:
    try:
        return jsonlib.loads(response.content)
    except (ValueError, UnicodeDecodeError):
        return _NOT_JSON


_NOT_JSON = object()

# Set when the first request of the process has ended, however: its lazy imports are done.
REQUESTS_MADE = threading.Event()


def status_error(
    response: httpx.Response, *, method: str, route: str, secret: str
) -> APIStatusError:
    """Translate a non-2xx answer into the typed error of its status class."""
    status = response.status_code
    body = _decode_json(response)
    server_message = _message_from_body(body)
    if server_message is None:
        server_message = response.reason_phrase or "error"
        if body is _NOT_JSON and response.content:
            server_message += " (non-JSON body)"
    if len(server_message) > 500:
        server_message = server_message[:500] + "..."
    message = scrub(f"{method} {route} -> {status}: {server_message}", secret)
    # A server may echo anything as its request id, the key included: scrub it too.
    rid = _request_id(response, body)
    rid = scrub(rid, secret) if rid is not None else None
    kwargs: dict[str, Any] = {"status_code": status, "request_id": rid, "route": route}
    if status == 429:
        return RateLimitError(message, retry_after=_retry_after_from(body, response), **kwargs)
    cls: type[APIStatusError]
    if status in (401, 403):
        cls = AuthError
    elif status in (400, 409, 422):
        cls = ValidationError
    elif status == 404:
        cls = NotFoundError
    elif status == 501:
        cls = UnsupportedError  # not retried: the server does not offer this call
    elif status == 507:
        cls = InsufficientStorageError  # not retried: lasts until storage is freed
    elif status >= 500:
        cls = ServerError
    else:
        cls = APIStatusError
    return cls(message, **kwargs)


def transport_error(
    exc: httpx.HTTPError, *, method: str, route: str, secret: str
) -> MemorySyncError:
    """Translate an httpx transport exception (never includes the key)."""
    detail = scrub(str(exc), secret)
    if isinstance(exc, httpx.TimeoutException):
        return APITimeoutError(f"{method} {route} -> timeout: {type(exc).__name__}", route=route)
    return APIConnectionError(
        f"{method} {route} -> connection error: {type(exc).__name__}"
        + (f": {detail}" if detail else ""),
        route=route,
    )


def decode_body(response: httpx.Response, *, method: str, route: str, secret: str = "") -> Any:
    """The JSON body of a 2xx answer (None for 204 or an empty body)."""
    if response.status_code == 204 or not response.content:
        return None
    body = _decode_json(response)
    if body is _NOT_JSON:
        rid = response.headers.get("x-request-id")
        raise ResponseFormatError(
            f"{method} {route} -> {response.status_code}: the answer is not JSON",
            status_code=response.status_code,
            request_id=scrub(rid, secret) if rid else None,
            route=route,
        )
    return body


async def send(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    route: str,
    headers: Mapping[str, str],
    secret: str,
    json: Any = None,
    params: Mapping[str, Any] | None = None,
    timeout: float,
) -> Any:
    """Send one request; return its decoded JSON body or raise a typed error.

    ``timeout`` is one deadline for the whole attempt: connecting, sending the body and
    reading the whole answer, headers and body. httpx's own timeouts bound each read
    alone, so a server that trickles a byte a second would hold the call for as long
    as it keeps trickling; past the deadline the attempt raises ``APITimeoutError``.

    One ``memorysync.http`` span per attempt, named by the route template (never the
    ids in the path), with the status and the request id.
    """
    attributes = {"http.request.method": method, "memorysync.route": route}
    with telemetry.span("memorysync.http", attributes) as current:
        request = client.request(
            method,
            url,
            headers=dict(headers),
            json=json,
            params=dict(params) if params is not None else None,
            timeout=timeout,
        )
        try:
            response = await within(timeout, request)
        except asyncio.TimeoutError as exc:
            raise APITimeoutError(
                f"{method} {route} -> timeout: no complete answer within {timeout:g} s",
                route=route,
            ) from exc
        except httpx.HTTPError as exc:
            raise transport_error(exc, method=method, route=route, secret=secret) from exc
        finally:
            REQUESTS_MADE.set()
        current.set_attribute("http.response.status_code", response.status_code)
        request_id = response.headers.get("x-request-id")
        if request_id:
            current.set_attribute("memorysync.request_id", scrub(request_id, secret))
        if not response.is_success:
            raise status_error(response, method=method, route=route, secret=secret)
        return decode_body(response, method=method, route=route, secret=secret)
