"""Which words of a run are the person's and which are the agent's reply."""

from __future__ import annotations

from collections.abc import Sequence

from agent_framework import Message


def latest_user_text(messages: Sequence[Message]) -> str | None:
    """The text of the last user message with text: the recall query."""
    for message in reversed(messages):
        if message.role == "user" and message.text.strip():
            return message.text
    return None


def person_turns(messages: Sequence[Message]) -> list[Message]:
    """The user messages that end the run's input: what the person just said.

    A caller that resends the whole conversation as the input (no session) would
    otherwise have every earlier user message captured again; tool results and
    earlier assistant turns stop the scan.
    """
    tail: list[Message] = []
    for message in reversed(messages):
        if message.role != "user":
            break
        if message.text.strip():
            tail.append(message)
    tail.reverse()
    return tail


def reply_text(messages: Sequence[Message]) -> str:
    """The last assistant message with text: the reply (never a tool call or result).

    Inside the agent-loop middleware the response also holds the loop's nudges; the
    last assistant message is the answer the person saw.
    """
    for message in reversed(messages):
        if message.role == "assistant" and message.text.strip():
            return message.text
    return ""
