"""``search_memory`` and ``save_memory`` as AutoGen ``FunctionTool``s."""

from __future__ import annotations

from typing import TYPE_CHECKING

from autogen_core.tools import FunctionTool

from memorysync_core.adapters import TOOL_TEXTS

if TYPE_CHECKING:
    from ._memory import MemorySyncMemory


def create_memory_tools(memory: MemorySyncMemory) -> list[FunctionTool]:
    """Two tools over ``memory``: ``search_memory`` and ``save_memory``.

    ``save_memory`` goes through the server's extraction (``/memory/add``): the server,
    not the model, decides whether the text is durable, and the tool answers in words
    the model can use (what was kept, or why nothing was). Failures raise the typed
    errors, which ``AssistantAgent`` reports to the model as a failed tool call.

    Example:
        ```python
        from autogen_memorysync import create_memory_tools

        agent = AssistantAgent(
            "assistant", model_client=model_client, memory=[memory],
            tools=create_memory_tools(memory),
        )
        ```
    """

    async def search_memory(query: str, k: int = 5) -> str:
        """Search what is known about the user; returns one memory per line."""
        result = await memory.query(query, k=k)
        return TOOL_TEXTS.found(str(item.content) for item in result.results)

    async def save_memory(text: str) -> str:
        """Ask to remember a durable fact about the user; says what was kept."""
        outcome = await memory.save(text)
        return outcome.describe()

    return [
        FunctionTool(
            search_memory,
            name="search_memory",
            description=TOOL_TEXTS.search_description,
        ),
        FunctionTool(
            save_memory,
            name="save_memory",
            description=TOOL_TEXTS.save_description,
        ),
    ]
