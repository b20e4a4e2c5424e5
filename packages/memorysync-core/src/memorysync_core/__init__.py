"""memorysync-core: the shared async core of the MemorySync framework adapters.

It speaks the MemorySync HTTP API (hosted or ``memorysync-local``) and owns what both
adapters need: typed errors, tenant resolution, idempotency seeds, capture ids and the
capture order (``seq``), budgeted recall, rendering of the context block, retries, the
delivery queue and its :class:`DeliveryReport`, and :class:`SyncUserMemory`, the
synchronous face (one background event loop per process) for frameworks whose hooks
cannot await.

Example::

    import asyncio
    from memorysync_core import MemorySyncAPI, UserMemory

    async def main() -> None:
        api = MemorySyncAPI(base_url="http://127.0.0.1:8000", api_key="ms_local")
        memory = UserMemory(api, user_id="alice", session_id="demo", surface="autogen")
        await memory.add_user_turn("I live in Lisbon.")
        print((await memory.recall("Where do I live?")).block)
        await memory.aclose()

    asyncio.run(main())
"""

from __future__ import annotations

from . import errors
from ._adapter import (
    SETTING_DEFAULTS,
    AdapterOptions,
    AdapterSettings,
    ClearScope,
    check_clear_scope,
)
from ._client import MemorySyncAPI
from ._delivery import DeliveryQueue, DeliveryReport
from ._errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthError,
    MemorySyncError,
    NotFoundError,
    RateLimitError,
    ResponseFormatError,
    ServerError,
    UnsupportedError,
    UnsupportedUserIdError,
    ValidationError,
)
from ._recall import RecallResult, recall_within_budget
from ._render import DEFAULT_CONTEXT_TEMPLATE, SAID_TEMPLATE, ContextRenderer, RecalledMemory
from ._retry import RetryPolicy, call_with_retries
from ._seeds import (
    MAX_TEXT_CHARS,
    assistant_turn_seed,
    fnv1a64,
    new_capture_id,
    sendable_text,
    truncate_text,
    user_turn_seed,
)
from ._sync import SyncUserMemory
from ._telemetry import configure_telemetry
from ._tool_texts import TOOL_TEXTS, ToolTexts
from ._turns import CapturedTurn
from ._user_memory import ClearResult, SaveOutcome, UserMemory
from ._users_data import (
    EXPORT_SCHEMA,
    ForgetReport,
    ImportReport,
    MemoryPage,
    SyncUsersDataMethods,
    UsersDataMethods,
)
from ._version import __version__
from ._window import Moment

__all__ = [
    "DEFAULT_CONTEXT_TEMPLATE",
    "EXPORT_SCHEMA",
    "MAX_TEXT_CHARS",
    "SAID_TEMPLATE",
    "SETTING_DEFAULTS",
    "TOOL_TEXTS",
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "AdapterOptions",
    "AdapterSettings",
    "AuthError",
    "CapturedTurn",
    "ClearResult",
    "ClearScope",
    "ContextRenderer",
    "DeliveryQueue",
    "DeliveryReport",
    "ForgetReport",
    "ImportReport",
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
    "SyncUsersDataMethods",
    "ToolTexts",
    "UnsupportedError",
    "UnsupportedUserIdError",
    "UserMemory",
    "UsersDataMethods",
    "ValidationError",
    "__version__",
    "assistant_turn_seed",
    "call_with_retries",
    "check_clear_scope",
    "configure_telemetry",
    "errors",
    "fnv1a64",
    "new_capture_id",
    "recall_within_budget",
    "sendable_text",
    "truncate_text",
    "user_turn_seed",
]
