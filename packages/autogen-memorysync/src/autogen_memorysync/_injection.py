"""Where the recalled block lives in a model context, and how it is replaced.

The block is a ``UserMessage`` placed immediately before the message it answers (the
recall query), with ``source`` set to a name unique to the memory instance
(``memorysync_<16 hex digits>``, derived from its server, project, tenant, user and
session, so a context reloaded from saved state is still recognised). Each update
first removes every message carrying that name, so the context holds at most one
block per memory at any time. Why a user message and why there: ``docs/autogen.md``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from autogen_core.model_context import ChatCompletionContext, ChatCompletionContextState
from autogen_core.models import LLMMessage, UserMessage

from memorysync_core import fnv1a64

BLOCK_SOURCE_PREFIX = "memorysync_"
# Also a valid OpenAI message ``name`` (the OpenAI client sends ``source`` as ``name``).
_BLOCK_SOURCE = re.compile(r"memorysync_[0-9a-f]{16}")


def block_source(identity: str) -> str:
    """The ``source`` that marks the blocks of the memory identified by ``identity``."""
    return BLOCK_SOURCE_PREFIX + fnv1a64(identity)


def is_memory_block(message: LLMMessage) -> bool:
    """True for a block put in a context by any MemorySync memory."""
    return isinstance(message, UserMessage) and bool(_BLOCK_SOURCE.fullmatch(message.source))


async def read_messages(
    context: ChatCompletionContext,
) -> tuple[Mapping[str, Any], list[LLMMessage]]:
    """Every message of ``context`` (not the truncated view ``get_messages`` returns)."""
    state = await context.save_state()
    return state, list(ChatCompletionContextState.model_validate(state).messages)


def with_block(
    messages: Sequence[LLMMessage], *, source: str, block: str, anchor: int | None
) -> list[LLMMessage] | None:
    """``messages`` without the blocks named ``source``, plus ``block`` before ``anchor``.

    ``anchor`` indexes ``messages``; an empty ``block`` or no anchor inserts nothing.
    Returns None when the result equals ``messages`` (nothing to write back).
    """
    insert = bool(block) and anchor is not None
    removed = False
    out: list[LLMMessage] = []
    for index, message in enumerate(messages):
        if insert and index == anchor:
            out.append(UserMessage(content=block, source=source))
        if isinstance(message, UserMessage) and message.source == source:
            removed = True
            continue
        out.append(message)
    if not insert and not removed:
        return None
    return out


async def write_messages(
    context: ChatCompletionContext, state: Mapping[str, Any], messages: Sequence[LLMMessage]
) -> None:
    """Replace the messages of ``context`` through its own ``load_state``.

    Going through the state keeps whatever else a context saves besides its messages,
    and works for every context that implements the documented state round-trip.
    """
    new_state = dict(state)
    new_state["messages"] = [message.model_dump() for message in messages]
    await context.load_state(new_state)
