"""The recalled block in the model context: one per memory, before the question, with
contiguous system messages, under every model context autogen-core ships."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import pytest
import respx
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.messages import MemoryQueryEvent
from autogen_core import FunctionCall, Image
from autogen_core.model_context import (
    BufferedChatCompletionContext,
    ChatCompletionContext,
    HeadAndTailChatCompletionContext,
    UnboundedChatCompletionContext,
)
from autogen_core.models import (
    AssistantMessage,
    ChatCompletionClient,
    CreateResult,
    FunctionExecutionResultMessage,
    ModelFamily,
    ModelInfo,
    RequestUsage,
    SystemMessage,
    UserMessage,
)
from autogen_core.tools import FunctionTool
from autogen_ext.models.replay import ReplayChatCompletionClient

from autogen_memorysync import MemorySyncMemory

QUESTIONS = (
    "Which neighbourhood should I stay in for my trip?",
    "Can you suggest a restaurant near there for dinner?",
    "What seat should I book on the flight home?",
)
# Long answers, so that the truncating contexts below really drop old messages.
ANSWER = " ".join(["Here is a detailed and helpful answer to your travel question."] * 3)
SYSTEM = "You are a concise travel assistant."


class _OwnStateBuffer(BufferedChatCompletionContext):
    """Its own save_state / load_state: the memory must go through the state round-trip."""

    async def save_state(self) -> Mapping[str, Any]:
        return await super().save_state()

    async def load_state(self, state: Mapping[str, Any]) -> None:
        await super().load_state(state)


def _contexts() -> dict[str, Callable[[ChatCompletionClient], ChatCompletionContext]]:
    contexts: dict[str, Callable[[ChatCompletionClient], ChatCompletionContext]] = {
        "unbounded": lambda _client: UnboundedChatCompletionContext(),
        "buffered": lambda _client: BufferedChatCompletionContext(buffer_size=3),
        "head_and_tail": lambda _client: HeadAndTailChatCompletionContext(head_size=1, tail_size=2),
        "buffered_own_state": lambda _client: _OwnStateBuffer(buffer_size=3),
    }
    try:  # shipped from autogen-core 0.4.10
        from autogen_core.model_context import TokenLimitedChatCompletionContext
    except ImportError:
        return contexts
    # Tokens counted by the replay client (whitespace words). At turn three the full
    # context is ~150 words; 110 forces the context to drop old messages.
    contexts["token_limited"] = lambda client: TokenLimitedChatCompletionContext(
        client, token_limit=110
    )
    return contexts


CONTEXTS = _contexts()


def _agent(
    client: ChatCompletionClient,
    memories: list[MemorySyncMemory],
    context: ChatCompletionContext | None = None,
    **kwargs: Any,
) -> AssistantAgent:
    return AssistantAgent(
        "assistant",
        model_client=client,
        memory=list(memories),
        model_context=context,
        system_message=SYSTEM,
        **kwargs,
    )


async def _stored(agent: AssistantAgent) -> list[dict[str, Any]]:
    state = await agent.save_state()
    messages: list[dict[str, Any]] = state["llm_context"]["messages"]
    return messages


@pytest.mark.parametrize("context_name", list(CONTEXTS))
async def test_every_turn_the_model_sees_exactly_one_block_right_before_the_question(
    context_name: str, server: respx.MockRouter, make_memory: Any, kit: Any
) -> None:
    server.post("/v1/memory/recall").respond(
        json=kit.recall_answer("Lives in Lisbon", "Prefers window seats")
    )
    client = ReplayChatCompletionClient([ANSWER] * 3)
    memory = make_memory()
    agent = _agent(client, [memory], CONTEXTS[context_name](client))

    for question in QUESTIONS:
        await agent.run(task=question)

    inputs = kit.model_inputs(client)
    assert len(inputs) == 3
    for messages, question in zip(inputs, QUESTIONS, strict=True):
        kit.assert_system_contiguous(messages)
        assert messages[0] == SystemMessage(content=SYSTEM)
        found = kit.blocks(messages)
        assert len(found) == 1
        assert found[0].source == memory.block_source
        assert "- Lives in Lisbon\n- Prefers window seats" in found[0].content
        question_at = kit.last_user_index(messages)
        assert messages[question_at].content == question
        assert messages[question_at - 1] is found[0]
    stored = await _stored(agent)
    assert [m.get("source") for m in stored].count(memory.block_source) == 1
    if context_name != "unbounded":
        # The context really dropped old messages, and the block survived it.
        assert len(inputs[2]) - 1 < len(stored)


async def test_block_stays_visible_when_a_buffer_of_two_keeps_only_the_latest_exchange(
    server: respx.MockRouter, make_memory: Any, kit: Any
) -> None:
    server.post("/v1/memory/recall").respond(json=kit.recall_answer("Lives in Lisbon"))
    client = ReplayChatCompletionClient([ANSWER] * 3)
    agent = _agent(client, [make_memory()], BufferedChatCompletionContext(buffer_size=2))

    for question in QUESTIONS:
        await agent.run(task=question)

    for messages, question in zip(kit.model_inputs(client), QUESTIONS, strict=True):
        assert [type(m).__name__ for m in messages] == [
            "SystemMessage",
            "UserMessage",
            "UserMessage",
        ]
        assert "Lives in Lisbon" in messages[1].content
        assert messages[2].content == question


async def test_two_memories_each_keep_one_block_and_system_messages_stay_contiguous(
    server: respx.MockRouter, make_memory: Any, kit: Any
) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        user = json.loads(request.content)["user_id"]
        fact = "Lives in Lisbon" if user == "alice" else "Team policy: economy class only"
        return httpx.Response(200, json=kit.recall_answer(fact))

    server.post("/v1/memory/recall").mock(side_effect=answer)
    client = ReplayChatCompletionClient([ANSWER] * 3)
    personal = make_memory(user_id="alice")
    shared = make_memory(user_id="acme-travel-policy")
    assert personal.block_source != shared.block_source
    agent = _agent(client, [personal, shared], BufferedChatCompletionContext(buffer_size=4))

    for question in QUESTIONS:
        await agent.run(task=question)

    for messages, question in zip(kit.model_inputs(client), QUESTIONS, strict=True):
        kit.assert_system_contiguous(messages)
        question_at = kit.last_user_index(messages)
        assert messages[question_at].content == question
        mine = kit.blocks(messages, personal.block_source)
        theirs = kit.blocks(messages, shared.block_source)
        assert len(mine) == 1
        assert "Lives in Lisbon" in mine[0].content
        assert len(theirs) == 1
        assert "economy class only" in theirs[0].content
        assert messages[question_at - 2 : question_at] == [mine[0], theirs[0]]
    stored = await _stored(agent)
    assert sum(1 for m in stored if m.get("source") == personal.block_source) == 1
    assert sum(1 for m in stored if m.get("source") == shared.block_source) == 1


async def test_block_from_a_reloaded_state_is_replaced_not_duplicated(
    server: respx.MockRouter, make_memory: Any, kit: Any
) -> None:
    server.post("/v1/memory/recall").respond(json=kit.recall_answer("Lives in Lisbon"))
    first_client = ReplayChatCompletionClient([ANSWER])
    first = _agent(first_client, [make_memory(session_id="trip")])
    await first.run(task=QUESTIONS[0])
    state = await first.save_state()

    client = ReplayChatCompletionClient([ANSWER])
    reloaded = _agent(client, [make_memory(session_id="trip")])
    await reloaded.load_state(state)
    await reloaded.run(task=QUESTIONS[1])

    (messages,) = kit.model_inputs(client)
    assert len(kit.blocks(messages)) == 1
    assert messages[kit.last_user_index(messages) - 1] == kit.blocks(messages)[0]


async def test_previous_block_is_removed_when_the_next_recall_finds_nothing(
    server: respx.MockRouter, make_memory: Any, kit: Any
) -> None:
    route = server.post("/v1/memory/recall")
    route.side_effect = [
        httpx.Response(200, json=kit.recall_answer("Lives in Lisbon")),
        httpx.Response(200, json={"context": "", "memories": []}),
    ]
    client = ReplayChatCompletionClient([ANSWER] * 2)
    agent = _agent(client, [make_memory()])

    await agent.run(task=QUESTIONS[0])
    result = await agent.run(task=QUESTIONS[1])

    first, second = kit.model_inputs(client)
    assert len(kit.blocks(first)) == 1
    assert kit.blocks(second) == []
    assert (
        kit.blocks([UserMessage(**m) for m in await _stored(agent) if m["type"] == "UserMessage"])
        == []
    )
    assert not any(isinstance(m, MemoryQueryEvent) for m in result.messages)


async def test_failed_recall_removes_the_old_block_and_logs_one_warning(
    server: respx.MockRouter, make_memory: Any, kit: Any, caplog: pytest.LogCaptureFixture
) -> None:
    route = server.post("/v1/memory/recall")
    route.side_effect = [
        httpx.Response(200, json=kit.recall_answer("Lives in Lisbon")),
        httpx.Response(500, json={"detail": "boom"}),
    ]
    client = ReplayChatCompletionClient([ANSWER] * 2)
    agent = _agent(client, [make_memory()])
    await agent.run(task=QUESTIONS[0])

    with caplog.at_level(logging.WARNING, logger="memorysync"):
        result = await agent.run(task=QUESTIONS[1])

    assert result.messages[-1].content == ANSWER
    assert kit.blocks(kit.model_inputs(client)[1]) == []
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert QUESTIONS[1] not in warnings[0].getMessage()


async def test_run_stream_yields_a_memory_query_event_with_ids_and_scores(
    server: respx.MockRouter, make_memory: Any, kit: Any
) -> None:
    server.post("/v1/memory/recall").respond(
        json=kit.recall_answer("Lives in Lisbon", "Prefers window seats")
    )
    agent = _agent(ReplayChatCompletionClient([ANSWER]), [make_memory()])

    events = [item async for item in agent.run_stream(task=QUESTIONS[0])]

    (event,) = [e for e in events if isinstance(e, MemoryQueryEvent)]
    assert [c.content for c in event.content] == ["Lives in Lisbon", "Prefers window seats"]
    assert [c.metadata for c in event.content] == [
        {"memory_id": 1, "score": 0.9},
        {"memory_id": 2, "score": 0.8},
    ]


async def test_short_prompts_are_not_recalled_for(
    server: respx.MockRouter, make_memory: Any, kit: Any
) -> None:
    route = server.post("/v1/memory/recall").respond(json=kit.recall_answer("Lives in Lisbon"))
    client = ReplayChatCompletionClient(["Hello!"])
    agent = _agent(client, [make_memory(min_prompt_chars=8)])

    await agent.run(task="  hi   ")

    assert route.call_count == 0
    assert kit.blocks(kit.model_inputs(client)[0]) == []


async def test_query_is_the_text_of_multimodal_content(
    server: respx.MockRouter, make_memory: Any
) -> None:
    route = server.post("/v1/memory/recall").respond(json={"context": "", "memories": []})
    image = Image.from_base64(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg=="
    )
    context = UnboundedChatCompletionContext()
    await context.add_message(UserMessage(content=["Which seat do I like?", image], source="user"))
    await context.add_message(AssistantMessage(content="Let me check.", source="assistant"))
    await context.add_message(UserMessage(content=[image], source="user"))

    await make_memory().update_context(context)

    assert json.loads(route.calls.last.request.content)["prompt"] == "Which seat do I like?"


async def test_continued_run_after_a_tool_call_recalls_for_the_last_user_message(
    server: respx.MockRouter, make_memory: Any, kit: Any
) -> None:
    route = server.post("/v1/memory/recall").respond(json=kit.recall_answer("Lives in Lisbon"))

    async def weather(city: str) -> str:
        """Today's weather in a city."""
        return f"Sunny in {city}"

    tool_call = CreateResult(
        finish_reason="function_calls",
        content=[FunctionCall(id="call_1", name="weather", arguments='{"city": "Lisbon"}')],
        usage=RequestUsage(prompt_tokens=1, completion_tokens=1),
        cached=False,
    )
    info = ModelInfo(
        vision=False, function_calling=True, json_output=False, family=ModelFamily.UNKNOWN
    )
    info["structured_output"] = False  # type: ignore[typeddict-unknown-key]
    client = ReplayChatCompletionClient([tool_call, "It is sunny where you live."], model_info=info)
    agent = _agent(client, [make_memory()], tools=[FunctionTool(weather, description="Weather")])
    question = "What is the weather like at home today?"

    await agent.run(task=question)
    stored = await _stored(agent)
    assert stored[-1]["type"] == "FunctionExecutionResultMessage"
    await agent.run()  # continue without a new task: the context ends with a tool result

    prompts = [json.loads(call.request.content)["prompt"] for call in route.calls]
    assert prompts == [question, question]
    last_input = kit.model_inputs(client)[-1]
    assert isinstance(last_input[-1], FunctionExecutionResultMessage)
    assert len(kit.blocks(last_input)) == 1
    assert last_input[kit.last_user_index(last_input) - 1] == kit.blocks(last_input)[0]
