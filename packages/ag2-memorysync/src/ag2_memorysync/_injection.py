"""Showing the recalled block to the model without touching the stored conversation.

AG2 passes the stored ``chat_messages`` list to reply functions unless a
``process_all_messages_before_reply`` hook returns another list. The capability's hook
returns a shallow copy; its reply function (first in the list) then swaps the copy's
last element for a new dict carrying the block. The stored list and its dicts are never
written, so regenerating a reply never doubles the block and the transcript never sees it.

Several capabilities may serve one agent (different users, or a per-user and a shared
one). The hook is registered once per agent; each capability's reply function adds its
own block in front of the message, recalling for the message as it was received.
"""

from __future__ import annotations

from typing import Any

from ._content import is_tool_traffic, text_of

_BEFORE_REPLY = "process_all_messages_before_reply"


class ModelMessage(dict[str, Any]):
    """A copy of the last incoming message as shown to the model (marks the turn handled).

    The sync and the async reply functions are both registered; whichever runs first
    records its capability in ``handled_by`` so the other does nothing. ``prompt`` keeps
    the text as received, so a second capability recalls for it, not for the first
    capability's block.
    """

    handled_by: frozenset[object] = frozenset()
    prompt: str | None = None


def copy_for_model(messages: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """The ``process_all_messages_before_reply`` hook: a list the reply functions may edit."""
    return None if messages is None else list(messages)


def _is_stored(agent: object, messages: list[Any]) -> bool:
    stored = getattr(agent, "_oai_messages", None)
    return isinstance(stored, dict) and any(messages is c for c in stored.values())


def is_copy_hook_registered(agent: object) -> bool:
    """True when ``agent`` already runs :func:`copy_for_model` before replying."""
    hooks = getattr(agent, "hook_lists", None)
    return isinstance(hooks, dict) and copy_for_model in hooks.get(_BEFORE_REPLY, ())


def editable_last(agent: object, messages: object, owner: object) -> dict[str, Any] | None:
    """The last message when ``owner`` still has to handle this turn in a list it may edit."""
    if not isinstance(messages, list) or not messages:
        return None
    last = messages[-1]
    if not isinstance(last, dict):
        return None
    if isinstance(last, ModelMessage) and owner in last.handled_by:
        return None
    if _is_stored(agent, messages):
        return None
    return last


def prompt_of(message: dict[str, Any]) -> str | None:
    """The text to recall for, or None for tool traffic and the agent's own messages."""
    if isinstance(message, ModelMessage):
        return message.prompt
    if is_tool_traffic(message) or message.get("role") in ("assistant", "system"):
        return None
    text = text_of(message)
    return text.strip() if text else None


def show_to_model(messages: list[dict[str, Any]], block: str, owner: object) -> None:
    """Replace the copy's last message with one prefixed by ``block`` (or an unchanged copy).

    ``owner`` (the capability) is recorded as having handled the turn.
    """
    last = messages[-1]
    shown = ModelMessage(last)
    if isinstance(last, ModelMessage):
        shown.prompt, shown.handled_by = last.prompt, last.handled_by | {owner}
    else:
        shown.prompt, shown.handled_by = prompt_of(last), frozenset({owner})
    if block:
        content = shown.get("content")
        if isinstance(content, str):
            shown["content"] = f"{block}\n\n{content}"
        elif isinstance(content, list):
            shown["content"] = [{"type": "text", "text": block}, *content]
    messages[-1] = shown
