"""search_memory / save_memory in ag2 1.x's tool convention (``@tool`` in a ``Toolkit``)."""

# No `from __future__ import annotations` here: ag2 reads these tools' signatures, and
# the Context annotation must be the real class for ag2 to pass the turn's context.

import logging
from typing import TYPE_CHECKING

from ag2 import Context, Toolkit, tool

from .._tools import SAVE_DESCRIPTION, SEARCH_DESCRIPTION

if TYPE_CHECKING:
    from ._middleware import MemorySyncMiddleware

_logger = logging.getLogger("memorysync.ag2")


def memory_toolkit(memory: "MemorySyncMiddleware") -> Toolkit:
    """The two memory tools over ``memory``; each failure is one sentence for the model."""

    @tool(name="search_memory", description=SEARCH_DESCRIPTION)
    async def search_memory(query: str) -> str:
        if not query.strip():
            return "Nothing was searched: the query was empty; pass what to look up."
        try:
            found = await memory.search(query)
        except Exception as exc:  # the model gets a sentence, never a traceback
            _logger.warning("search_memory tool failed: %s", type(exc).__name__)
            return f"Memory search is unavailable right now ({type(exc).__name__})."
        if not found:
            return "Nothing relevant is remembered about the user."
        return "\n".join(f"- {item.text}" for item in found)

    @tool(name="save_memory", description=SAVE_DESCRIPTION)
    async def save_memory(text: str, context: Context) -> str:
        if not text.strip():
            return "Nothing was saved: the fact was empty; pass the sentence to remember."
        try:
            # Saved in the conversation's own session, like the turns around it.
            return (await memory.save(text, session_id=memory.session_for(context))).describe()
        except Exception as exc:  # the model gets a sentence, never a traceback
            _logger.warning("save_memory tool failed: %s", type(exc).__name__)
            return f"The fact could not be saved right now ({type(exc).__name__})."

    return Toolkit(search_memory, save_memory, name="memorysync")
