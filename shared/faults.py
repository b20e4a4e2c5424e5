"""Fault injection in front of the real ``memorysync-local``, and a short-timeout transport.

``shared.fake_server.FakeServer`` answers from its own little in-memory model. To prove
that turns captured during an outage are stored exactly once by the real server, this
module puts the same scriptable faults in front of a served ``memorysync-local``:

- :class:`FaultProxy` is a ``FakeServer`` whose normal answer (``Fault.ok()``, also the
  ``then`` of a delay or a gate) is the upstream server's answer to the same request.
  Every request is recorded first, so the bodies of failed attempts can be compared
  with the one that finally got through.
- :func:`outage` scripts a total outage: every route answers ``fault`` until the
  returned callable (or ``end_outage``) restores normal service.
- :class:`ShortTimeoutTransport` caps httpx's timeouts for every request it carries,
  so explicit calls against a server that never answers fail in a fraction of a second
  instead of the client's 10 s default. Hand it to an adapter through ``transport=``.

Example::

    from memorysync_local import serve_in_thread
    from shared.faults import FaultProxy, outage
    from shared.fake_server import Fault

    with serve_in_thread(db_path) as upstream, FaultProxy(upstream) as proxy:
        end = outage(proxy, Fault.close())
        ...  # everything fails
        end()  # everything reaches upstream again
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from memorysync_core.errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthError,
    MemorySyncError,
    RateLimitError,
    ResponseFormatError,
    ServerError,
)
from shared.fake_server import _ROUTES, FakeServer, Fault, RecordedRequest

__all__ = [
    "FAULTS",
    "ODD_RECALL_ANSWERS",
    "SLOW_FAULTS",
    "FaultCase",
    "FaultProxy",
    "ShortTimeoutTransport",
    "check_error",
    "end_outage",
    "outage",
]

ALL_ROUTES: tuple[str, ...] = tuple(route for _, route in _ROUTES)

_HOP_BY_HOP = frozenset(
    {"host", "content-length", "connection", "transfer-encoding", "keep-alive", "accept-encoding"}
)


class _Upstream(Protocol):
    base_url: str


class FaultProxy(FakeServer):
    """A ``FakeServer`` that forwards every unfaulted request to ``upstream``.

    ``upstream`` is anything with a ``base_url`` reachable over loopback (a
    ``memorysync_local.ServedServer``). Scripting, recording and faults are those of
    :class:`shared.fake_server.FakeServer`.
    """

    def __init__(self, upstream: _Upstream | str, host: str = "127.0.0.1") -> None:
        super().__init__(host)
        base = upstream if isinstance(upstream, str) else upstream.base_url
        self.upstream_url = base.rstrip("/")
        # The fake server answers on its own loop thread: a blocking client is the
        # simplest correct way to ask upstream (which runs on another thread).
        self._client = httpx.Client(base_url=self.upstream_url, timeout=30.0)

    def stop(self) -> None:
        """Stop serving and close the upstream connection."""
        super().stop()
        self._client.close()

    def _default_answer(self, request: RecordedRequest) -> tuple[int, Any]:
        headers = {k: v for k, v in request.headers.items() if k not in _HOP_BY_HOP}
        response = self._client.request(
            request.method,
            request.path,
            params=request.query or None,
            headers=headers,
            content=request.body or None,
        )
        if response.status_code == 204 or not response.content:
            return response.status_code, None
        return response.status_code, response.json()


def outage(server: FakeServer, fault: Fault) -> Callable[[], None]:
    """Make every route of ``server`` answer ``fault``; returns the function that ends it."""
    for route in ALL_ROUTES:
        server.set_default(route, fault)
    return lambda: end_outage(server)


def end_outage(server: FakeServer) -> None:
    """Every route answers normally again."""
    for route in ALL_ROUTES:
        server.set_default(route, None)


class ShortTimeoutTransport(httpx.AsyncBaseTransport):
    """Caps connect/read/write/pool timeouts of every request at ``seconds``.

    httpx carries the per-request timeout to the transport in
    ``request.extensions["timeout"]``; this wrapper lowers it before delegating.
    """

    def __init__(self, seconds: float, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self.seconds = seconds
        self._inner = inner if inner is not None else httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeouts = dict(request.extensions.get("timeout", {}))
        for name in ("connect", "read", "write", "pool"):
            current = timeouts.get(name)
            timeouts[name] = self.seconds if current is None else min(current, self.seconds)
        request.extensions["timeout"] = timeouts
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        """Close the wrapped transport."""
        await self._inner.aclose()


# --------------------------------------------------------------------------- the fault matrix


@dataclass(frozen=True)
class FaultCase:
    """One way the server misbehaves, and the typed error an explicit call must raise.

    ``status`` is the status the error (and its message) must carry; None for transport
    failures, whose message says ``timeout`` or ``connection error`` instead.
    """

    id: str
    fault: Fault
    error: type[MemorySyncError]
    status: int | None = None
    retry_after: float | None = None

    def __str__(self) -> str:
        return self.id


FAULTS: tuple[FaultCase, ...] = (
    FaultCase("delay-5s", Fault.delay(5), APITimeoutError),
    FaultCase("never-answers", Fault.hang(), APITimeoutError),
    FaultCase("500", Fault.status(500), ServerError, 500),
    FaultCase("502", Fault.status(502), ServerError, 502),
    FaultCase("503", Fault.status(503), ServerError, 503),
    FaultCase("reset-mid-response", Fault.reset(), APIConnectionError),
    FaultCase("malformed-json", Fault.malformed_json(), ResponseFormatError, 200),
    FaultCase("html-error-page", Fault.html(502), ServerError, 502),
    FaultCase("429-retry-after", Fault.rate_limited(0.05), RateLimitError, 429, 0.05),
    FaultCase("429-no-retry-after", Fault.rate_limited(None), RateLimitError, 429),
    FaultCase("401", Fault.status(401), AuthError, 401),
    FaultCase("403", Fault.status(403), AuthError, 403),
    FaultCase("wrong-shape", Fault.json([1, 2, 3]), ResponseFormatError, 200),
)
"""Every fault of the suite, answered persistently (``set_default``) by one route."""

SLOW_FAULTS = frozenset({"delay-5s", "never-answers"})

# Recall answers with an unexpected shape: each must mean "no memories" on the hot path.
ODD_RECALL_ANSWERS: tuple[tuple[str, Any], ...] = (
    ("memories-not-a-list", {"context": "", "memories": "Alice lives in Porto."}),
    ("memories-an-object", {"context": "", "memories": {"value": "Alice lives in Porto."}}),
    ("items-without-text", {"context": "", "memories": [{"memory_id": 1, "score": 0.9}]}),
    ("items-without-text-no-context", {"memories": [{"memory_id": 1}, 7, None]}),
    ("context-not-a-string", {"context": 42, "memories": []}),
    (
        "context-an-object-with-items",
        {"context": {"text": "x"}, "memories": [{"memory_id": 1, "value": "Porto", "score": 1}]},
    ),
    ("answer-a-list", [{"context": "- Alice lives in Porto."}]),
    ("answer-a-string", "Alice lives in Porto."),
)


def check_error(exc: BaseException, case: FaultCase, method: str, route: str, key: str) -> None:
    """Assert ``exc`` is ``case``'s typed error, names ``route`` and its status, not ``key``."""
    assert isinstance(exc, case.error), f"{case.id}: got {type(exc).__name__}: {exc}"
    if case.error is APIConnectionError:
        assert not isinstance(exc, APITimeoutError), f"{case.id}: a reset is not a timeout"
    message = str(exc)
    assert f"{method} {route} -> " in message, message
    if case.status is not None:
        assert message.startswith(f"{method} {route} -> "), message
        assert f"-> {case.status}" in message, message
    else:  # no answer: led by the operation asked for and the server's address
        assert message.startswith("could not "), message
        assert ("timeout" if isinstance(exc, APITimeoutError) else "connection error") in message
    if isinstance(exc, APIStatusError):
        assert exc.status_code == case.status
    if isinstance(exc, RateLimitError):
        assert exc.retry_after == case.retry_after
    for text in (message, repr(exc), repr(exc.args)):
        assert key not in text
