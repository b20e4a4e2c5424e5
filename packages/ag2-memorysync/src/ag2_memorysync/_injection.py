"""Showing the recalled block to the model without touching the stored conversation.

AG2 passes the stored ``chat_messages`` list to reply functions unless a
``process_all_messages_before_reply`` hook returns another list. The capability's hook
returns a shallow copy; its reply function (first in the list) then swaps the copy's
last element for a new dict carrying the block. The stored list and its dicts are never
written, so regenerating a reply never doubles the block and the transcript never sees it.
"""

from __future__ import annotations

from typing import Any

from ._content import is_tool_traffic, text_of


class ModelMessage(dict[str, Any]):
    """A copy of the last incoming message as shown to the model (marks the turn handled).

    The sync and the async reply functions are both registered; whichever runs first
    leaves this marker so the other does nothing.
    """


def copy_for_model(messages: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """The ``process_all_messages_before_reply`` hook: a list the reply functions may edit."""
    return None if messages is None else list(messages)


def _is_stored(agent: object, messages: list[Any]) -> bool:
    stored = getattr(agent, "_oai_messages", None)
    if not isinstance(stored, dict):
        return False
    return any(messages is conversation for conversation in stored.values())


def editable_last(agent: object, messages: object) -> dict[str, Any] | None:
    """The last message when this turn still needs handling and the list is ours to edit."""
    if not isinstance(messages, list) or not messages:
        return None
    last = messages[-1]
    if not isinstance(last, dict) or isinstance(last, ModelMessage):
        return None
    if _is_stored(agent, messages):
        return None
    return last


def prompt_of(message: dict[str, Any]) -> str | None:
    """The text to recall for, or None for tool traffic and the agent's own messages."""
    if is_tool_traffic(message) or message.get("role") in ("assistant", "system"):
        return None
    text = text_of(message)
    return text.strip() if text else None


def show_to_model(messages: list[dict[str, Any]], block: str) -> None:
    """Replace the copy's last message with one prefixed by ``block`` (or an unchanged copy)."""
    shown = ModelMessage(messages[-1])
    if block:
        content = shown.get("content")
        if isinstance(content, str):
            shown["content"] = f"{block}\n\n{content}"
        elif isinstance(content, list):
            shown["content"] = [{"type": "text", "text": block}, *content]
    messages[-1] = shown
