"""``search_memory`` and ``save_memory`` as Agent Framework ``FunctionTool``s."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from agent_framework import FunctionTool

from memorysync_core.adapters import TOOL_TEXTS

if TYPE_CHECKING:
    from ._provider import MemorySyncContextProvider


def create_memory_tools(provider: MemorySyncContextProvider) -> list[FunctionTool]:
    """Two tools over ``provider``'s user: ``search_memory`` and ``save_memory``.

    ``save_memory`` goes through the server's extraction (``/memory/add``): the server,
    not the model, decides whether the text is durable, and the tool answers in words
    the model can use. Failures raise the typed errors, which the framework's function
    invocation reports to the model as a failed call. Pass them to ``Agent(tools=...)``
    or build the provider with ``tools=True``.

    Example:
        ```python
        memory = MemorySyncContextProvider(user_id="customer-42")
        agent = Agent(client, context_providers=[memory], tools=create_memory_tools(memory))
        ```
    """

    async def search_memory(
        query: Annotated[str, "What to look for."],
        k: Annotated[int, "How many memories at most."] = 5,
    ) -> str:
        memories = await provider.search(query, k=k)
        return TOOL_TEXTS.found(memory.text for memory in memories)

    async def save_memory(text: Annotated[str, "The fact, in one sentence."]) -> str:
        outcome = await provider.save(text)
        return outcome.describe()

    return [
        FunctionTool(
            name="search_memory",
            description=TOOL_TEXTS.search_description,
            func=search_memory,
        ),
        FunctionTool(
            name="save_memory",
            description=TOOL_TEXTS.save_description,
            func=save_memory,
        ),
    ]
