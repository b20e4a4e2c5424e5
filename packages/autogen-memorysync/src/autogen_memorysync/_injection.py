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
from collections.abc import Mapping, Sequence
from typing import Any
from weakref import WeakKeyDictionary

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


def find_blocks(messages: Sequence[LLMMessage], source: str) -> list[int]:
    """Indexes of every block named ``source`` (a pass over the whole list)."""
    return [
        index
        for index, message in enumerate(messages)
        if isinstance(message, UserMessage) and message.source == source
    ]


def rindex(messages: Sequence[LLMMessage], target: LLMMessage) -> int | None:
    """Index of the object ``target`` itself in ``messages``, searched from the end."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index] is target:
            return index
    return None


def with_block(
    messages: Sequence[LLMMessage],
    *,
    source: str,
    block: str,
    anchor: int | None,
    found: Sequence[int] | None = None,
) -> list[LLMMessage] | None:
    """``messages`` without the blocks named ``source``, plus ``block`` before ``anchor``.

    ``anchor`` indexes ``messages``; an empty ``block`` or no anchor inserts nothing.
    ``found`` lists the indexes of the blocks named ``source`` when the caller knows
    them (otherwise the whole list is searched). Returns None when the result would
    equal ``messages`` (nothing to write back), so an unchanged block costs no copy.
    """
    blocks = find_blocks(messages, source) if found is None else sorted(found)
    insert = bool(block) and anchor is not None
    if insert and anchor is not None and blocks == [anchor - 1]:
        previous = messages[anchor - 1]
        if isinstance(previous, UserMessage) and previous.content == block:
            return None
    if not insert and not blocks:
        return None
    # Whole slices between the cuts: a copy of references, never a rebuilt message.
    cuts = sorted([*blocks, anchor] if insert and anchor is not None else blocks)
    removed = set(blocks)
    out: list[LLMMessage] = []
    start = 0
    for cut in cuts:
        out += messages[start:cut]
        if cut in removed:
            start = cut + 1
        else:
            out.append(UserMessage(content=block, source=source))
            start = cut
    out += messages[start:]
    return out


class Placements:
    """Replaces one memory's block in the contexts it updates, remembering where it is.

    The block object last placed in each context is kept (weakly: a context that goes
    away is forgotten), so the next turn finds it by identity near the end instead of
    inspecting every message. When it is not there (the context was reloaded or
    rewritten since), every message is inspected once, which also catches a block of
    this memory saved in the state.
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self._placed: WeakKeyDictionary[ChatCompletionContext, UserMessage] = WeakKeyDictionary()

    def update(
        self,
        context: ChatCompletionContext,
        messages: list[LLMMessage],
        *,
        block: str,
        query: LLMMessage | None,
    ) -> None:
        """Put ``block`` before ``query`` in ``messages``, the live list of ``context``.

        No await happens in here, so nothing else changes the list meanwhile. When the
        block is already in place, the context is left exactly as it is.
        """
        found: list[int] | None = None
        known = self._placed.get(context)
        if known is not None:
            at = rindex(messages, known)
            found = None if at is None else [at]
        anchor = None if query is None else rindex(messages, query)
        updated = with_block(messages, source=self.source, block=block, anchor=anchor, found=found)
        if updated is not None:
            # A new list, as load_state assigns one: a list handed out earlier by
            # get_messages (to a model client, a log) keeps what it showed.
            context._messages = updated
            messages = updated
        at = None if not block or query is None else rindex(messages, query)
        placed = None if not at else messages[at - 1]
        if isinstance(placed, UserMessage) and placed.source == self.source:
            self._placed[context] = placed
        else:
            self._placed.pop(context, None)
