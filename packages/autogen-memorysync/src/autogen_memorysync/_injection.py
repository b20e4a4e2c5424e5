"""Where the recalled block lives in a model context, and how it is replaced.

The block is a ``UserMessage`` placed immediately before the message it answers (the
recall query), with ``source`` set to a name unique to the memory instance
(``memorysync_<16 hex digits>``, derived from its server, project, tenant, user and
session, so a context reloaded from saved state is still recognised). Each update
removes every other message carrying that name, so the context holds at most one
block per memory at any time. Why a user message and why there: ``docs/autogen.md``.

How the messages are read and written, so that a turn costs the same at 2 messages and
at 1,000: AutoGen's public way to see every message (``save_state``, not the truncated
``get_messages``) dumps the whole history, and ``load_state`` validates it again. For a
context that keeps the base class's state round-trip, ``save_state`` is by definition a
dump of the private list ``_messages``; the tests pin that on every supported AutoGen
version. For such a context the memory reads that list and, only when the block
changed, swaps in a new list, as ``load_state`` would, without dumping or validating
anything. Any other context (one that overrides ``save_state``/``load_state``, or keeps
no ``_messages`` list) goes through the state round-trip.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from autogen_core.model_context import ChatCompletionContext, ChatCompletionContextState
from autogen_core.models import LLMMessage, UserMessage

from memorysync_core.adapters import fnv1a64

BLOCK_SOURCE_PREFIX = "memorysync_"
# Also a valid OpenAI message ``name`` (the OpenAI client sends ``source`` as ``name``).
_BLOCK_SOURCE = re.compile(r"memorysync_[0-9a-f]{16}")


def block_source(identity: str) -> str:
    """The ``source`` that marks the blocks of the memory identified by ``identity``."""
    return BLOCK_SOURCE_PREFIX + fnv1a64(identity)


def is_memory_block(message: LLMMessage) -> bool:
    """True for a block put in a context by any MemorySync memory."""
    return isinstance(message, UserMessage) and bool(_BLOCK_SOURCE.fullmatch(message.source))


def is_block_of(message: LLMMessage, source: str) -> bool:
    """True for a block of the memory whose blocks are named ``source``."""
    return isinstance(message, UserMessage) and message.source == source


def live_messages(context: ChatCompletionContext) -> list[LLMMessage] | None:
    """The context's own list of every message, or None when its shape is not the known one.

    Known shape: the class keeps ``ChatCompletionContext``'s ``save_state`` and
    ``load_state`` (so the state is exactly a dump of ``_messages``) and ``_messages``
    is a list. Every context autogen-core ships has it (pinned by the tests).
    """
    cls = type(context)
    if (
        cls.save_state is not ChatCompletionContext.save_state
        or cls.load_state is not ChatCompletionContext.load_state
    ):
        return None
    messages = getattr(context, "_messages", None)
    return messages if type(messages) is list else None


async def read_state(
    context: ChatCompletionContext,
) -> tuple[Mapping[str, Any], list[LLMMessage]]:
    """The saved state of ``context`` and every message in it (the fallback read)."""
    state = await context.save_state()
    return state, list(ChatCompletionContextState.model_validate(state).messages)


async def write_state(
    context: ChatCompletionContext, state: Mapping[str, Any], messages: Sequence[LLMMessage]
) -> None:
    """Replace the messages of ``context`` through its own ``load_state`` (the fallback write).

    Going through the state keeps whatever else a context saves besides its messages.
    """
    new_state = dict(state)
    new_state["messages"] = [message.model_dump() for message in messages]
    await context.load_state(new_state)


def last_index(messages: Sequence[LLMMessage], match: Callable[[LLMMessage], bool]) -> int | None:
    """Index of the last message that ``match`` accepts (searched from the end)."""
    for index in range(len(messages) - 1, -1, -1):
        if match(messages[index]):
            return index
    return None


def with_block(
    messages: Sequence[LLMMessage],
    *,
    source: str,
    block: str,
    anchor: int | None,
    found: int | None = None,
) -> list[LLMMessage] | None:
    """``messages`` without the blocks named ``source``, plus ``block`` before ``anchor``.

    ``anchor`` indexes ``messages``; an empty ``block`` or no anchor inserts nothing.
    ``found`` is the index of the only block named ``source`` when the caller knows it;
    otherwise every message is inspected. Returns None when the result would equal
    ``messages`` (nothing to write back).
    """
    if found is None:
        blocks = [index for index, message in enumerate(messages) if is_block_of(message, source)]
    else:
        blocks = [found]
    in_place = anchor is not None and blocks == [anchor - 1]
    if block and in_place and messages[blocks[0]].content == block:
        return None  # the same block, already right before the question
    insert = bool(block) and anchor is not None
    if not insert and not blocks:
        return None
    # A copy of references with deletions and one insertion: no message is rebuilt.
    out = list(messages)
    for index in reversed(blocks):
        del out[index]
    if insert and anchor is not None:
        before = sum(1 for index in blocks if index < anchor)
        out.insert(anchor - before, UserMessage(content=block, source=source))
    return out
