"""Which message of a model context is the recall query."""

from __future__ import annotations

from collections.abc import Sequence

from autogen_core.models import LLMMessage, UserMessage

from ._injection import is_memory_block


def text_of(content: object) -> str:
    """The text of a message's content: the string, or the text parts of multimodal content."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part for part in content if isinstance(part, str))
    return ""


def find_query(messages: Sequence[LLMMessage]) -> tuple[int, str] | None:
    """Index and stripped text of the last ``UserMessage`` that has text.

    Assistant messages, tool calls and their results are never the query (after a
    tool-calling turn the context ends with a tool result, and the question is still
    the user's last message); MemorySync blocks (``is_memory_block``) are skipped too.
    """
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if not isinstance(message, UserMessage) or is_memory_block(message):
            continue
        text = text_of(message.content).strip()
        if text:
            return index, text
    return None
