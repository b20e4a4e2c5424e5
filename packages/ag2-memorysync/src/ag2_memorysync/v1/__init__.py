"""MemorySync long-term memory for ``ag2`` 1.x, the rewritten AG2 (module ``ag2``).

:class:`MemorySyncMiddleware` is a middleware factory, like ag2's own
``HistoryLimiter``: list it in an ``Agent``'s ``middleware``. Before every model call it
recalls the user's memories for the latest human message and shows them to the model
for that call only; after every turn it queues the human message and the final reply
for the ``ag2::<session>`` transcript, the same scope and source as the classic
:class:`ag2_memorysync.MemorySyncCapability`. :meth:`MemorySyncMiddleware.tools` gives
the model ``search_memory`` and ``save_memory`` as an ag2 ``Toolkit``.

Example:
    ```python
    from ag2 import Agent
    from ag2_memorysync.v1 import MemorySyncMiddleware

    memory = MemorySyncMiddleware(user_id="alice")
    agent = Agent("assistant", config=config, middleware=[memory], tools=[memory.tools()])
    reply = await agent.ask("I live in Lisbon.")
    report = await memory.aclose()
    ```

Importing this module needs ``ag2`` 1.0 or later; ``import ag2_memorysync`` does not.
"""

from __future__ import annotations

try:
    from ag2.middleware import BaseMiddleware as _BaseMiddleware  # noqa: F401
except ImportError as exc:  # classic AG2 (module ``autogen``), or no AG2 at all
    raise ImportError(
        "ag2_memorysync.v1 needs ag2 1.x (pip install 'ag2>=1.0'); for AG2-classic "
        "(module autogen) use ag2_memorysync.MemorySyncCapability"
    ) from exc

from ._middleware import MemorySyncMiddleware

__all__ = ["MemorySyncMiddleware"]
