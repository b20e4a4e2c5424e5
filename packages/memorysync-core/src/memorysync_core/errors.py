"""The one exception tree of MemorySync calls.

```text
MemorySyncError                  message, status_code, request_id, route
├── APIConnectionError           transport failure (refused, reset, protocol error)
│   └── APITimeoutError          the request timed out
├── APIStatusError               any non-2xx answer (status_code, request_id)
│   ├── AuthError                401 / 403
│   ├── ValidationError          400 / 409 / 422
│   ├── NotFoundError            404
│   ├── RateLimitError           429, with retry_after seconds (or None)
│   ├── ServerError              5xx except 501
│   │   └── InsufficientStorageError  507: the server cannot store now; never retried
│   └── UnsupportedError         501, or an extension route the server lacks
├── ResponseFormatError          a 2xx answer that is not JSON or has the wrong shape
└── UnsupportedUserIdError       a user id this server cannot take in X-End-User-ID
                                 (also a ValueError; raised before anything is sent)
```

Messages read ``"<METHOD> <route> -> <status>: <server message>"`` where the route is
the path template (``/v1/memory/{tenant_id}/{user_id}/list``); ``repr()`` shows only
the class, status and request id. The API key never appears in either. A transport
failure names the operation and the server instead: ``"could not add a turn at
https://...: GET /org/projects -> connection error: ConnectError: ..."``. Misuse of the
API (a blank key, both ``memory_ids`` and ``filters``) raises ``ValueError`` or
``TypeError`` instead.

Example:
    ```python
    from memorysync_core import MemorySyncAPI
    from memorysync_core.errors import RateLimitError

    async def remember(api: MemorySyncAPI) -> None:
        try:
            await api.add_memory(user_id="alice", text="Alice is vegetarian.")
        except RateLimitError as exc:
            print("try again in", exc.retry_after, "seconds")
    ```
"""

from __future__ import annotations

from ._errors import (
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
    UnsupportedUserIdError,
    ValidationError,
)

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
