"""search_memory / save_memory as AG2 tools, registered through AG2's own decorators."""

# No `from __future__ import annotations` here: AG2 reads these tools' signatures,
# and the Annotated descriptions must be real objects, not strings.

import logging
from typing import TYPE_CHECKING, Annotated, Any

from memorysync_core.adapters import TOOL_TEXTS

if TYPE_CHECKING:
    from ._capability import MemorySyncCapability

_logger = logging.getLogger("memorysync.ag2")


def register_memory_tools(
    memory: "MemorySyncCapability", *, caller: object, executor: object
) -> None:
    """Offer ``search_memory`` and ``save_memory`` to ``caller``'s model; ``executor`` runs them.

    Uses AG2's standard split (``register_for_llm`` on the caller, which needs an
    ``llm_config``; ``register_for_execution`` on the executor). Both tools are
    synchronous and run their I/O on the capability's background loop. Every failure
    (an outage, an empty argument, a closed capability, ...) returns one sentence to the
    model instead of raising inside the chat, and logs a WARNING naming the error type
    only (never the user's text).

    Example:
        ```python
        from ag2_memorysync import MemorySyncCapability, register_memory_tools

        memory = MemorySyncCapability(user_id="alice")
        register_memory_tools(memory, caller=assistant, executor=user_proxy)
        ```

    Raises:
        TypeError: ``memory`` is not a MemorySyncCapability, or an agent lacks the
            registration method.
    """
    from ._capability import MemorySyncCapability

    if not isinstance(memory, MemorySyncCapability):
        raise TypeError(f"memory must be a MemorySyncCapability, got {type(memory).__name__}")
    register_for_llm = _method(caller, "caller", "register_for_llm")
    register_for_execution = _method(executor, "executor", "register_for_execution")

    def search_memory(query: Annotated[str, "What to look up about the user"]) -> str:
        if not isinstance(query, str) or not query.strip():
            _logger.warning("search_memory tool called without a query")
            return TOOL_TEXTS.empty_query
        try:
            found = memory.search(query)
        except Exception as exc:  # the model gets a sentence, never a traceback
            _logger.warning("search_memory tool failed: %s", type(exc).__name__)
            return TOOL_TEXTS.search_failed(exc)
        return TOOL_TEXTS.found(item.text for item in found)

    def save_memory(text: Annotated[str, "The fact about the user to remember"]) -> str:
        if not isinstance(text, str) or not text.strip():
            _logger.warning("save_memory tool called without a fact")
            return TOOL_TEXTS.empty_fact
        try:
            return memory.save(text).describe()
        except Exception as exc:  # the model gets a sentence, never a traceback
            _logger.warning("save_memory tool failed: %s", type(exc).__name__)
            return TOOL_TEXTS.save_failed(exc)

    tools = (
        (search_memory, TOOL_TEXTS.search_description),
        (save_memory, TOOL_TEXTS.save_description),
    )
    for function, description in tools:
        name = function.__name__
        register_for_llm(name=name, description=description)(function)
        register_for_execution(name=name)(function)


def _method(agent: object, role: str, name: str) -> Any:
    method = getattr(agent, name, None)
    if not callable(method):
        raise TypeError(
            f"{role} must be an AG2 ConversableAgent with {name}, got {type(agent).__name__}; "
            "install the classic framework (pip install autogen)"
        )
    return method
