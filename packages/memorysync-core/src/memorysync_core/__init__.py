"""memorysync-core: the shared async core of the MemorySync framework adapters.

It speaks the MemorySync HTTP API (hosted or ``memorysync-local``). This namespace is
what an application uses: :class:`MemorySyncAPI` (the client), :class:`UserMemory`
(one user's memory in one session) and :class:`SyncUserMemory` (its synchronous face,
one background event loop per process), the one settings surface every adapter takes
(:class:`AdapterSettings`, :class:`AdapterOptions`), the results and reports
(:class:`RecallResult`, :class:`DeliveryReport`, ...), the retry policy, telemetry and
the typed errors. What only adapter authors need (the adapter kit, captured turns, the
content hash, the tool texts, the users'-data mixins) is in :mod:`memorysync_core.adapters`.

Example:
    ```python
    import asyncio
    from memorysync_core import MemorySyncAPI, UserMemory

    async def main() -> None:
        api = MemorySyncAPI()  # key and URL: MEMORYSYNC_API_KEY, MEMORYSYNC_BASE_URL
        memory = UserMemory(api, user_id="alice", session_id="demo", surface="autogen")
        await memory.add_user_turn("I live in Lisbon.")
        print((await memory.recall("Where do I live?")).block)
        await memory.aclose()

    asyncio.run(main())
    ```
"""

from __future__ import annotations

from . import errors
from ._adapter.settings import SETTING_DEFAULTS, AdapterOptions, AdapterSettings, ClearScope
from ._delivery.queue import DeliveryReport
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
from ._recall.budget import RecallResult
from ._recall.render import DEFAULT_CONTEXT_TEMPLATE, SAID_TEMPLATE, ContextRenderer, RecalledMemory
from ._recall.window import Moment
from ._sync.face import SyncUserMemory
from ._telemetry import configure_telemetry
from ._user_memory import ClearResult, SaveOutcome, UserMemory
from ._users_data.reports import EXPORT_SCHEMA, ForgetReport, ImportReport, ImportSkip, MemoryPage
from ._version import __version__
from ._wire.client import MemorySyncAPI
from ._wire.retry import RetryPolicy

__all__ = [
    "DEFAULT_CONTEXT_TEMPLATE",
    "EXPORT_SCHEMA",
    "SAID_TEMPLATE",
    "SETTING_DEFAULTS",
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "AdapterOptions",
    "AdapterSettings",
    "AuthError",
    "ClearResult",
    "ClearScope",
    "ContextRenderer",
    "DeliveryReport",
    "ForgetReport",
    "ImportReport",
    "ImportSkip",
    "InsufficientStorageError",
    "MemoryPage",
    "MemorySyncAPI",
    "MemorySyncError",
    "Moment",
    "NotFoundError",
    "RateLimitError",
    "RecallResult",
    "RecalledMemory",
    "ResponseFormatError",
    "RetryPolicy",
    "SaveOutcome",
    "ServerError",
    "SyncUserMemory",
    "UnsupportedError",
    "UnsupportedUserIdError",
    "UserMemory",
    "ValidationError",
    "__version__",
    "configure_telemetry",
    "errors",
]
