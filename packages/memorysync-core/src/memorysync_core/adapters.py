"""What only adapter authors need: the kit, capture, delivery, seeds and retries.

Applications use the names of :mod:`memorysync_core` (``UserMemory``, the settings,
the reports, the errors). A framework adapter is built from these:

- :class:`AdapterKit`: one adapter instance's memories (any session, any user, over
  one connection) and queued capture: ordered background delivery grouped by session,
  its :class:`~memorysync_core.DeliveryReport`, and the flush at interpreter exit;
- :class:`AdapterAttributes`: the ``settings`` and ``user_id`` every adapter shows;
- :class:`CapturedTurn` and :class:`DeliveryQueue`: a captured turn with its fixed
  retry identity, and the queue that delivers turns in order with retries;
- the idempotency seeds of the contract and the capture ids;
- :func:`call_with_retries` for explicit calls (with the application's
  :class:`~memorysync_core.RetryPolicy`);
- the texts of the ``search_memory`` / ``save_memory`` tools;
- the users'-data mixins that give an adapter ``list_memories``, ``export``, ...

Example:
    ```python
    from memorysync_core import AdapterSettings
    from memorysync_core.adapters import AdapterKit

    kit = AdapterKit(AdapterSettings.build(surface="myframework", user_id="alice"))
    kit.submit([kit.home.capture("user", "I live in Lisbon.")])
    report = await kit.aclose()
    ```
"""

from __future__ import annotations

from ._adapter.kit import AdapterAttributes, AdapterKit
from ._adapter.settings import check_clear_scope
from ._adapter.tool_texts import TOOL_TEXTS, ToolTexts
from ._delivery.queue import DeliveryQueue
from ._delivery.seeds import (
    MAX_TEXT_CHARS,
    assistant_turn_seed,
    fnv1a64,
    new_capture_id,
    sendable_text,
    split_text,
    truncate_text,
    user_turn_seed,
)
from ._delivery.turns import CapturedTurn, TurnPart
from ._recall.budget import recall_within_budget
from ._users_data.mixins import SyncUsersDataMethods, UsersDataMethods
from ._wire.retry import call_with_retries

__all__ = [
    "MAX_TEXT_CHARS",
    "TOOL_TEXTS",
    "AdapterAttributes",
    "AdapterKit",
    "CapturedTurn",
    "DeliveryQueue",
    "SyncUsersDataMethods",
    "ToolTexts",
    "TurnPart",
    "UsersDataMethods",
    "assistant_turn_seed",
    "call_with_retries",
    "check_clear_scope",
    "fnv1a64",
    "new_capture_id",
    "recall_within_budget",
    "sendable_text",
    "split_text",
    "truncate_text",
    "user_turn_seed",
]
