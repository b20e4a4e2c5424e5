"""The exception tree (documented in :mod:`memorysync_core.errors`)."""

from __future__ import annotations

__all__ = [
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "AuthError",
    "InsufficientStorageError",
    "MemorySyncError",
    "NotFoundError",
    "RateLimitError",
    "ResponseFormatError",
    "ServerError",
    "UnsupportedError",
    "UnsupportedUserIdError",
    "ValidationError",
]


class MemorySyncError(Exception):
    """Base class of every error raised by a MemorySync call.

    ``message`` names the route (``"POST /v1/memory/recall -> 503: ..."``), never the key.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        request_id: str | None = None,
        route: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.request_id = request_id
        self.route = route

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status_code={self.status_code!r}, "
            f"request_id={self.request_id!r})"
        )

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only constructor: teach pickle (and copy) how to rebuild us.
        return (_rebuild, (type(self), self.message, dict(self.__dict__)))


def _rebuild(cls: type[MemorySyncError], message: str, state: dict[str, object]) -> MemorySyncError:
    exc = cls.__new__(cls)
    Exception.__init__(exc, message)
    exc.__dict__.update(state)
    return exc


class APIConnectionError(MemorySyncError):
    """The request never got an HTTP answer: connection refused or reset, protocol error."""


class APITimeoutError(APIConnectionError):
    """The request timed out (connect, read, write or pool timeout)."""


class APIStatusError(MemorySyncError):
    """The server answered with a non-2xx status; ``status_code`` is always set."""

    status_code: int

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        request_id: str | None = None,
        route: str | None = None,
    ) -> None:
        super().__init__(message, status_code=status_code, request_id=request_id, route=route)


class AuthError(APIStatusError):
    """401 or 403: a bad key or a missing scope."""


class ValidationError(APIStatusError):
    """400, 409 or 422: the server rejected the request. Never retried."""


class NotFoundError(APIStatusError):
    """404: the resource is not visible to the caller."""


class RateLimitError(APIStatusError):
    """429: a rate or quota limit. ``retry_after`` is the server's hint in seconds, if any."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int = 429,
        request_id: str | None = None,
        route: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, status_code=status_code, request_id=request_id, route=route)
        self.retry_after = retry_after

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status_code={self.status_code!r}, "
            f"request_id={self.request_id!r}, retry_after={self.retry_after!r})"
        )


class ServerError(APIStatusError):
    """5xx: the server failed. Retried by the retry policy (except 501 and 507)."""


class InsufficientStorageError(ServerError):
    """507: the server cannot store anything now (disk full, read-only, I/O error).

    Never retried: the condition lasts until an operator frees space or repairs the
    storage, so asking again within a retry policy's seconds cannot help. Reads may
    still work. A ``ServerError``, so code that catches 5xx catches it too.
    """


class UnsupportedError(APIStatusError):
    """501, or an extension route the server lacks: this server does not offer the call.

    Never retried (asking again cannot help). ``memorysync-local`` answers 501 for
    the official client's routes it does not serve; ``list_sessions()`` raises it
    against a server without the ``/x-local`` extension (the hosted service).
    """


class ResponseFormatError(MemorySyncError):
    """A 2xx answer whose body is not JSON or does not have the contract's shape."""


class UnsupportedUserIdError(MemorySyncError, ValueError):
    """A user id that cannot travel in ``X-End-User-ID`` to a server that cannot decode it.

    Raised before the request is sent: an id with characters outside printable ASCII
    (or leading or trailing whitespace) needs the header encoding, and the server does
    not list ``end-user-id-encoding`` among the capabilities of ``GET /health``. Sent
    raw, the id would name another user (or fail). Also a ``ValueError``.
    """
