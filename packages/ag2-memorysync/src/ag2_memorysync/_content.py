"""What a message says, and whether it is tool traffic (never persisted)."""

from __future__ import annotations

from collections.abc import Mapping

# Any of these with a value marks a message as tool/function traffic.
_TOOL_FIELDS = ("tool_calls", "tool_responses", "function_call", "tool_call_id")
_TOOL_ROLES = frozenset({"tool", "function"})


def is_tool_traffic(message: object) -> bool:
    """True for tool calls, tool results and (legacy) function calls/results."""
    if not isinstance(message, Mapping):
        return False
    if message.get("role") in _TOOL_ROLES:
        return True
    return any(message.get(field) for field in _TOOL_FIELDS)


def text_of(message: object) -> str | None:
    """The text a message carries: a string, a ``content`` string, or its text parts.

    None when there is no text (a callable content, an image-only message, ...).
    """
    content = message.get("content") if isinstance(message, Mapping) else message
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            part["text"]
            for part in content
            if isinstance(part, Mapping)
            and part.get("type") == "text"
            and isinstance(part.get("text"), str)
        ]
        return "\n".join(parts) if parts else None
    return None


def utterance_text(message: object) -> str | None:
    """The stripped text of a message worth persisting; None for tool traffic or no text."""
    if is_tool_traffic(message):
        return None
    text = text_of(message)
    if text is None:
        return None
    text = text.strip()
    return text or None
