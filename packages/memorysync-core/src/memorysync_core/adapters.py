"""What only adapter authors need: the kit, captured turns, the tool texts, the mixins.

Applications use the names of :mod:`memorysync_core` (``UserMemory``, the settings,
the reports, the errors). A framework adapter is built from these, and only these
(each name is a promise kept across minor versions, so the list is what the four
adapters of this repository call):

- :class:`AdapterKit`: one adapter instance's memories (any session, any user, over
  one connection) and queued capture: ordered background delivery grouped by session,
  its :class:`~memorysync_core.DeliveryReport`, and the flush at interpreter exit;
- :class:`AdapterAttributes`: the ``settings`` and ``user_id`` every adapter shows;
- :class:`CapturedTurn`: a captured turn with its fixed retry identity (seed, capture
  id, capture time, ``seq``);
- :func:`check_clear_scope`: the ``clear()`` argument check every adapter shares;
- :func:`fnv1a64`: the contract's content hash (seeds, ``client_ref``);
- ``TOOL_TEXTS``: the texts of the ``search_memory`` / ``save_memory`` tools;
- :class:`UsersDataMethods`, :class:`SyncUsersDataMethods`: the mixins that give an
  adapter ``list_memories``, ``list_sessions``, ``export``, ``forget_user`` and
  ``import_export``.

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
from ._adapter.tool_texts import TOOL_TEXTS
from ._delivery.seeds import fnv1a64
from ._delivery.turns import CapturedTurn
from ._users_data.mixins import SyncUsersDataMethods, UsersDataMethods

__all__ = [
    "TOOL_TEXTS",
    "AdapterAttributes",
    "AdapterKit",
    "CapturedTurn",
    "SyncUsersDataMethods",
    "UsersDataMethods",
    "check_clear_scope",
    "fnv1a64",
]
