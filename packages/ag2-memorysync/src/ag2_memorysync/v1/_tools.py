"""search_memory / save_memory in ag2 1.x's tool convention (``@tool`` in a ``Toolkit``)."""

# No `from __future__ import annotations` here: ag2 reads these tools' signatures, and
# the Context annotation must be the real class for ag2 to pass the turn's context.

import logging
from typing import Protocol

from ag2 import Context, Toolkit, tool

from memorysync_core import RecalledMemory, SaveOutcome
from memorysync_core.adapters import TOOL_TEXTS

_logger = logging.getLogger("memorysync.ag2")


class ToolsMemory(Protocol):
    """What the two tools call (the middleware has it); the middleware imports this
    module, so this module names a Protocol rather than the middleware."""

    async def search(self, query: str) -> list[RecalledMemory]: ...

    async def save(self, text: str, *, session_id: str | None = None) -> SaveOutcome: ...

    def session_for(self, context: Context) -> str: ...


def memory_toolkit(memory: ToolsMemory) -> Toolkit:
    """The two memory tools over ``memory``; each failure is one sentence for the model."""

    @tool(name="search_memory", description=TOOL_TEXTS.search_description)
    async def search_memory(query: str) -> str:
        if not query.strip():
            return TOOL_TEXTS.empty_query
        try:
            found = await memory.search(query)
        except Exception as exc:  # the model gets a sentence, never a traceback
            _logger.warning("search_memory tool failed: %s", type(exc).__name__)
            return TOOL_TEXTS.search_failed(exc)
        return TOOL_TEXTS.found(item.text for item in found)

    @tool(name="save_memory", description=TOOL_TEXTS.save_description)
    async def save_memory(text: str, context: Context) -> str:
        if not text.strip():
            return TOOL_TEXTS.empty_fact
        try:
            # Saved in the conversation's own session, like the turns around it.
            return (await memory.save(text, session_id=memory.session_for(context))).describe()
        except Exception as exc:  # the model gets a sentence, never a traceback
            _logger.warning("save_memory tool failed: %s", type(exc).__name__)
            return TOOL_TEXTS.save_failed(exc)

    return Toolkit(search_memory, save_memory, name="memorysync")
