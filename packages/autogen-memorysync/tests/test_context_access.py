"""How ``update_context`` reads and writes a model context, so a turn does not grow with history.

The memory reads a shipped context's private ``_messages`` list instead of dumping the
whole state. The first test pins that shape on the installed AutoGen version (the
nox sessions run it on the oldest and the newest supported); the others prove the turn
never saves or loads state, leaves an unchanged block alone, survives reloads and
concurrent additions, and that any other context still goes through its state.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import pytest
import respx
from autogen_agentchat.agents import AssistantAgent
from autogen_core.model_context import (
    BufferedChatCompletionContext,
    ChatCompletionContext,
    ChatCompletionContextState,
    HeadAndTailChatCompletionContext,
    UnboundedChatCompletionContext,
)
from autogen_core.models import AssistantMessage, LLMMessage, SystemMessage, UserMessage
from autogen_ext.models.replay import ReplayChatCompletionClient

from autogen_memorysync import MemorySyncMemory
from autogen_memorysync._injection import live_messages, with_block

QUESTION = "Which neighbourhood should I stay in for my trip?"
NEXT = "Can you suggest a restaurant near there for dinner?"
ANSWER = "Here is a detailed and helpful answer to your travel question."


def _shipped() -> dict[str, Callable[[], ChatCompletionContext]]:
    contexts: dict[str, Callable[[], ChatCompletionContext]] = {
        "unbounded": UnboundedChatCompletionContext,
        "buffered": lambda: BufferedChatCompletionContext(buffer_size=3),
        "head_and_tail": lambda: HeadAndTailChatCompletionContext(head_size=1, tail_size=2),
    }
    try:  # shipped from autogen-core 0.4.10
        from autogen_core.model_context import TokenLimitedChatCompletionContext
    except ImportError:
        return contexts
    contexts["token_limited"] = lambda: TokenLimitedChatCompletionContext(
        ReplayChatCompletionClient([ANSWER]), token_limit=40
    )
    return contexts


SHIPPED = _shipped()


def _history(size: int) -> list[LLMMessage]:
    """``size`` messages alternating user / assistant (ending with the assistant)."""
    return [
        UserMessage(content=f"Earlier question {i}", source="user")
        if i % 2 == 0
        else AssistantMessage(content=ANSWER, source="assistant")
        for i in range(size)
    ]


class _StateSpy:
    """Counts ``save_state`` / ``load_state`` calls on one context instance."""

    def __init__(self, context: ChatCompletionContext) -> None:
        self.saves = 0
        self.loads = 0
        save, load = context.save_state, context.load_state

        async def counted_save() -> Mapping[str, Any]:
            self.saves += 1
            return await save()

        async def counted_load(state: Mapping[str, Any]) -> None:
            self.loads += 1
            await load(state)

        # On the instance: the class keeps the base methods, so the memory's check of
        # the context's shape still passes and any call through the state is seen.
        context.save_state = counted_save  # type: ignore[method-assign]
        context.load_state = counted_load  # type: ignore[method-assign]


# -- the shape the fast path relies on, pinned on the installed AutoGen ---------------


@pytest.mark.parametrize("name", list(SHIPPED))
async def test_every_shipped_context_keeps_every_message_in_the_list_its_state_dumps(
    name: str,
) -> None:
    context = SHIPPED[name]()
    for message in _history(7):
        await context.add_message(message)
    cls = type(context)

    # The class keeps the base state round-trip, which dumps and reloads `_messages`.
    assert cls.save_state is ChatCompletionContext.save_state
    assert cls.load_state is ChatCompletionContext.load_state
    assert type(context._messages) is list
    assert live_messages(context) is context._messages
    state = await context.save_state()
    assert state["messages"] == [m.model_dump() for m in context._messages]
    assert len(state["messages"]) == 7  # every message, not the truncated view

    await context.load_state(ChatCompletionContextState(messages=_history(3)).model_dump())
    assert type(context._messages) is list
    assert context._messages == _history(3)

    # What the model sees is derived from `_messages`: a list put there is what counts.
    replacement = [*_history(4), UserMessage(content=QUESTION, source="user")]
    context._messages = replacement
    seen = await context.get_messages()
    assert seen[-1] is replacement[-1]
    assert len(seen) < len(replacement) or seen == replacement


# -- the fast path --------------------------------------------------------------------


async def test_a_turn_on_a_thousand_messages_never_saves_or_loads_the_state(
    local_server: Any, kit: Any
) -> None:
    memory = MemorySyncMemory(
        user_id="alice",
        api_key=local_server.api_key,
        base_url=local_server.base_url,
        transport=local_server.transport,
    )
    await memory.add_turn_pair("I live in Lisbon and I love window seats.", "Noted.")
    context = UnboundedChatCompletionContext(initial_messages=_history(1000))
    spy = _StateSpy(context)
    client = ReplayChatCompletionClient([ANSWER] * 2)
    agent = AssistantAgent("assistant", model_client=client, memory=[memory], model_context=context)

    await agent.run(task="Which window seats in Lisbon should I book?")
    await agent.run(task="And which seats for the flight back to Lisbon?")

    assert (spy.saves, spy.loads) == (0, 0)
    for messages in kit.model_inputs(client):
        (block,) = kit.blocks(messages, memory.block_source)
        assert "window seats" in block.content
        assert messages[kit.last_user_index(messages) - 1] is block
    assert len(context._messages) == 1000 + 2 + 1 + 2  # two turns and one block
    await memory.close()


async def test_an_unchanged_block_leaves_the_context_exactly_as_it_was(
    server: respx.MockRouter, make_memory: Any, kit: Any
) -> None:
    server.post("/v1/memory/recall").respond(json=kit.recall_answer("Lives in Lisbon"))
    memory = make_memory()
    context = UnboundedChatCompletionContext(initial_messages=_history(20))
    await context.add_message(UserMessage(content=QUESTION, source="user"))
    await memory.update_context(context)
    messages, block = context._messages, context._messages[-2]
    assert isinstance(block, UserMessage)
    assert block.source == memory.block_source

    result = await memory.update_context(context)

    assert context._messages is messages
    assert context._messages[-2] is block
    assert [c.content for c in result.memories.results] == ["Lives in Lisbon"]


async def test_nothing_recalled_and_no_block_leaves_the_context_as_it_was(
    server: respx.MockRouter, make_memory: Any
) -> None:
    server.post("/v1/memory/recall").respond(json={"context": "", "memories": []})
    context = UnboundedChatCompletionContext(initial_messages=_history(20))
    await context.add_message(UserMessage(content=QUESTION, source="user"))
    messages = context._messages

    await make_memory().update_context(context)

    assert context._messages is messages
    assert len(messages) == 21


async def test_a_changed_block_is_replaced_in_place(
    server: respx.MockRouter, make_memory: Any, kit: Any
) -> None:
    server.post("/v1/memory/recall").mock(
        side_effect=[
            httpx.Response(200, json=kit.recall_answer("Lives in Lisbon")),
            httpx.Response(200, json=kit.recall_answer("Lives in Porto")),
        ]
    )
    memory = make_memory()
    context = UnboundedChatCompletionContext()
    await context.add_message(UserMessage(content=QUESTION, source="user"))
    await memory.update_context(context)

    await memory.update_context(context)

    assert [type(m).__name__ for m in context._messages] == ["UserMessage", "UserMessage"]
    assert "Lives in Porto" in context._messages[0].content
    assert context._messages[1].content == QUESTION


async def test_moving_the_block_does_not_change_a_list_handed_out_before(
    server: respx.MockRouter, make_memory: Any, kit: Any
) -> None:
    server.post("/v1/memory/recall").respond(json=kit.recall_answer("Lives in Lisbon"))
    memory = make_memory()
    context = UnboundedChatCompletionContext()
    await context.add_message(UserMessage(content=QUESTION, source="user"))
    await memory.update_context(context)
    shown = await context.get_messages()  # this context hands out its own list
    before = list(shown)

    await context.add_message(AssistantMessage(content=ANSWER, source="assistant"))
    await context.add_message(UserMessage(content=NEXT, source="user"))
    await memory.update_context(context)

    assert shown[:2] == before  # the earlier view still shows the block before QUESTION
    now = context._messages
    assert [m.content for m in now if not kit.BLOCK.fullmatch(getattr(m, "source", ""))] == [
        QUESTION,
        ANSWER,
        NEXT,
    ]
    assert len(kit.blocks(now)) == 1
    assert now[-2] is kit.blocks(now)[0]


async def test_the_same_context_reloaded_from_an_older_state_ends_with_one_block(
    server: respx.MockRouter, make_memory: Any, kit: Any
) -> None:
    server.post("/v1/memory/recall").respond(json=kit.recall_answer("Lives in Lisbon"))
    memory = make_memory()
    context = BufferedChatCompletionContext(buffer_size=4)
    await context.add_message(UserMessage(content=QUESTION, source="user"))
    await memory.update_context(context)
    older = await context.save_state()  # holds the block before QUESTION
    await context.add_message(AssistantMessage(content=ANSWER, source="assistant"))
    await context.add_message(UserMessage(content=NEXT, source="user"))
    await memory.update_context(context)

    # Reloaded: the block the memory placed is gone, a copy sits at the old place,
    # and another stale copy was appended by hand.
    await context.load_state(older)
    await context.add_message(AssistantMessage(content=ANSWER, source="assistant"))
    await context.add_message(UserMessage(content="stale", source=memory.block_source))
    await context.add_message(UserMessage(content=NEXT, source="user"))
    await memory.update_context(context)

    messages = context._messages
    assert len(kit.blocks(messages)) == 1
    assert [m.content for m in messages[-2:]] == [kit.blocks(messages)[0].content, NEXT]
    assert "Lives in Lisbon" in messages[-2].content


@pytest.mark.parametrize("how", ["added", "reloaded"])
async def test_a_message_added_while_recall_awaits_is_kept(
    how: str, server: respx.MockRouter, make_memory: Any, kit: Any
) -> None:
    in_recall = asyncio.Event()
    release = asyncio.Event()

    async def slow_recall(request: httpx.Request) -> httpx.Response:
        in_recall.set()
        await release.wait()
        return httpx.Response(200, json=kit.recall_answer("Lives in Lisbon"))

    server.post("/v1/memory/recall").mock(side_effect=slow_recall)
    memory = make_memory()
    context = UnboundedChatCompletionContext()
    await context.add_message(UserMessage(content=QUESTION, source="user"))

    update = asyncio.ensure_future(memory.update_context(context))
    await in_recall.wait()
    late = AssistantMessage(content="A note added meanwhile.", source="assistant")
    if how == "added":
        await context.add_message(late)
    else:  # the list itself is replaced meanwhile
        state = await context.save_state()
        await context.load_state({"messages": [*state["messages"], late.model_dump()]})
    release.set()
    await update

    messages = context._messages
    assert messages[-1] == late
    assert messages[-2].content == QUESTION
    assert messages[-3] is kit.blocks(messages)[0]


async def test_the_memory_does_not_keep_a_context_alive(
    server: respx.MockRouter, make_memory: Any, kit: Any
) -> None:
    server.post("/v1/memory/recall").respond(json=kit.recall_answer("Lives in Lisbon"))
    memory = make_memory()
    context = UnboundedChatCompletionContext()
    await context.add_message(UserMessage(content=QUESTION, source="user"))
    await memory.update_context(context)
    gone = weakref.ref(context)

    del context
    gc.collect()

    assert gone() is None


# -- the fallback: contexts of another shape go through their state -------------------


class _OwnState(BufferedChatCompletionContext):
    """Saves an extra key beside the messages (its own save_state / load_state)."""

    def __init__(self, buffer_size: int) -> None:
        super().__init__(buffer_size)
        self.note = "kept"

    async def save_state(self) -> Mapping[str, Any]:
        return {**(await super().save_state()), "note": self.note}

    async def load_state(self, state: Mapping[str, Any]) -> None:
        await super().load_state(state)
        self.note = state["note"]


class _OwnStore(ChatCompletionContext):
    """Keeps its messages somewhere else entirely; ``_messages`` stays empty."""

    def __init__(self) -> None:
        super().__init__()
        self._store: list[LLMMessage] = []

    async def add_message(self, message: LLMMessage) -> None:
        self._store.append(message)

    async def get_messages(self) -> list[LLMMessage]:
        return list(self._store)

    async def save_state(self) -> Mapping[str, Any]:
        return ChatCompletionContextState(messages=self._store).model_dump()

    async def load_state(self, state: Mapping[str, Any]) -> None:
        self._store = ChatCompletionContextState.model_validate(state).messages


class _DequeMessages(UnboundedChatCompletionContext):
    """The base state methods, but ``_messages`` is not a list."""

    def __init__(self) -> None:
        super().__init__()
        self._messages = deque()  # type: ignore[assignment]

    async def get_messages(self) -> list[LLMMessage]:
        return list(self._messages)


FALLBACK: dict[str, Callable[[], ChatCompletionContext]] = {
    "own_state": lambda: _OwnState(buffer_size=3),
    "own_store": _OwnStore,
    "deque_messages": _DequeMessages,
}


@pytest.mark.parametrize("name", list(FALLBACK))
async def test_a_context_of_another_shape_goes_through_its_state(
    name: str, server: respx.MockRouter, make_memory: Any, kit: Any
) -> None:
    server.post("/v1/memory/recall").respond(json=kit.recall_answer("Lives in Lisbon"))
    context = FALLBACK[name]()
    spy = _StateSpy(context)
    client = ReplayChatCompletionClient([ANSWER] * 3)
    memory = make_memory()
    agent = AssistantAgent(
        "assistant",
        model_client=client,
        memory=[memory],
        model_context=context,
        system_message="You are a travel assistant.",
    )

    for question in (QUESTION, NEXT, "What seat should I book on the flight home?"):
        await agent.run(task=question)

    # The deque becomes a list at the first load_state (the base one assigns a list);
    # from then on the context has the known shape.
    assert spy.saves >= (1 if name == "deque_messages" else 3)
    for messages in kit.model_inputs(client):
        kit.assert_system_contiguous(messages)
        (block,) = kit.blocks(messages, memory.block_source)
        assert messages[kit.last_user_index(messages) - 1] is block
    state = await context.save_state()
    assert [m.get("source") for m in state["messages"]].count(memory.block_source) == 1
    if isinstance(context, _OwnState):
        assert state["note"] == "kept"

    # The block is already in place: the state is read, and not written back.
    loads = spy.loads
    await memory.update_context(context)
    assert spy.loads == loads


# -- the replacement itself -----------------------------------------------------------


def _user(text: str, source: str = "user") -> UserMessage:
    return UserMessage(content=text, source=source)


def test_with_block_removes_every_stale_block_before_and_after_the_question() -> None:
    source = "memorysync_0123456789abcdef"
    messages: list[LLMMessage] = [
        SystemMessage(content="sys"),
        _user("old block", source),
        _user("q1"),
        _user("q2"),
        _user("another old block", source),
        AssistantMessage(content="a", source="assistant"),
    ]

    out = with_block(messages, source=source, block="new", anchor=3)

    assert out == [
        SystemMessage(content="sys"),
        _user("q1"),
        _user("new", source),
        _user("q2"),
        AssistantMessage(content="a", source="assistant"),
    ]


def test_with_block_uses_the_known_positions_and_reports_no_change() -> None:
    source = "memorysync_0123456789abcdef"
    messages: list[LLMMessage] = [_user("q1"), _user("body", source), _user("q2")]

    assert with_block(messages, source=source, block="body", anchor=2, found=1) is None
    assert with_block(messages, source=source, block="body", anchor=2) is None
    assert with_block([_user("q1")], source=source, block="", anchor=0) is None
    moved = with_block(messages, source=source, block="body", anchor=0, found=1)
    assert moved == [_user("body", source), _user("q1"), _user("q2")]
    removed = with_block(messages, source=source, block="", anchor=2, found=1)
    assert removed == [_user("q1"), _user("q2")]
