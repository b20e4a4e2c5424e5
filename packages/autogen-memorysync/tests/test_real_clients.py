"""Real model clients from autogen-ext accept what the memory puts in the context.

``AnthropicChatCompletionClient`` and ``OpenAIChatCompletionClient`` with a Gemini
``model_info`` (``multiple_system_messages: False``) refuse non-contiguous system
messages; 0.4.x's Anthropic client refuses any second system message. respx answers
their HTTP calls, and the requests they send are checked over three turns.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import httpx
import pytest
import respx
from autogen_agentchat.agents import AssistantAgent
from autogen_core.model_context import (
    BufferedChatCompletionContext,
    ChatCompletionContext,
    HeadAndTailChatCompletionContext,
    UnboundedChatCompletionContext,
)
from autogen_core.models import ModelFamily, ModelInfo
from autogen_ext.models.anthropic import AnthropicChatCompletionClient
from autogen_ext.models.openai import OpenAIChatCompletionClient

SYSTEM = "You are a concise travel assistant."
QUESTIONS = (
    "Which neighbourhood should I stay in for my trip?",
    "Can you suggest a restaurant near there for dinner?",
    "What seat should I book on the flight home?",
)
FACT = "Lives in Lisbon"
ANTHROPIC_URL = "https://api.anthropic.com/v1/messages"
GEMINI_BASE = "https://generativelanguage.googleapis.com/v1beta/openai/"


class _OwnStateBuffer(BufferedChatCompletionContext):
    """Its own save_state / load_state: the memory must go through the state round-trip."""

    async def save_state(self) -> Mapping[str, Any]:
        return await super().save_state()

    async def load_state(self, state: Mapping[str, Any]) -> None:
        await super().load_state(state)


CONTEXTS: dict[str, Callable[[], ChatCompletionContext]] = {
    "unbounded": UnboundedChatCompletionContext,
    "buffered": lambda: BufferedChatCompletionContext(buffer_size=3),
    "head_and_tail": lambda: HeadAndTailChatCompletionContext(head_size=1, tail_size=2),
    "buffered_own_state": lambda: _OwnStateBuffer(buffer_size=3),
}


@pytest.fixture
def wire(kit: Any) -> Iterator[respx.MockRouter]:
    with respx.mock(assert_all_called=False) as router:
        router.post(f"{kit.BASE_URL}/v1/memory/recall").respond(json=kit.recall_answer(FACT))
        yield router


def _anthropic_answer(request: httpx.Request) -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-3-5-sonnet-20241022",
            "content": [{"type": "text", "text": "You live in Lisbon, so Alfama."}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        },
    )


def _openai_answer(request: httpx.Request) -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "gemini-1.5-flash",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "You live in Lisbon."},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        },
    )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


@pytest.mark.parametrize("context_name", list(CONTEXTS))
async def test_anthropic_client_accepts_three_turns_with_the_memory_block(
    context_name: str, wire: respx.MockRouter, make_memory: Any
) -> None:
    route = wire.post(ANTHROPIC_URL).mock(side_effect=_anthropic_answer)
    client = AnthropicChatCompletionClient(
        model="claude-3-5-sonnet-20241022", api_key="sk-ant-test"
    )
    agent = AssistantAgent(
        "assistant",
        model_client=client,
        memory=[make_memory()],
        system_message=SYSTEM,
        model_context=CONTEXTS[context_name](),
    )

    for question in QUESTIONS:
        result = await agent.run(task=question)
        assert result.messages[-1].content == "You live in Lisbon, so Alfama."

    assert route.call_count == 3
    for call, question in zip(route.calls, QUESTIONS, strict=True):
        body = json.loads(call.request.content)
        assert body["system"] == SYSTEM
        texts = [(m["role"], _text(m["content"])) for m in body["messages"]]
        assert texts[-1] == ("user", question)
        assert texts[-2][0] == "user"
        assert f"- {FACT}" in texts[-2][1]
        assert sum(f"- {FACT}" in text for _, text in texts) == 1
    await client.close()


@pytest.mark.parametrize("context_name", list(CONTEXTS))
async def test_openai_client_with_gemini_model_info_accepts_three_turns(
    context_name: str, wire: respx.MockRouter, make_memory: Any
) -> None:
    route = wire.post(f"{GEMINI_BASE}chat/completions").mock(side_effect=_openai_answer)
    info = ModelInfo(
        vision=False,
        function_calling=True,
        json_output=True,
        family=ModelFamily.GEMINI_1_5_FLASH,
    )
    info["structured_output"] = True  # type: ignore[typeddict-unknown-key]
    info["multiple_system_messages"] = False  # type: ignore[typeddict-unknown-key]
    client = OpenAIChatCompletionClient(
        model="gemini-1.5-flash", api_key="gm-test", base_url=GEMINI_BASE, model_info=info
    )
    agent = AssistantAgent(
        "assistant",
        model_client=client,
        memory=[make_memory()],
        system_message=SYSTEM,
        model_context=CONTEXTS[context_name](),
    )

    for question in QUESTIONS:
        result = await agent.run(task=question)
        assert result.messages[-1].content == "You live in Lisbon."

    assert route.call_count == 3
    for call, question in zip(route.calls, QUESTIONS, strict=True):
        messages = json.loads(call.request.content)["messages"]
        roles = [m["role"] for m in messages]
        assert roles[0] == "system"
        assert roles.count("system") == 1
        assert messages[0]["content"] == SYSTEM
        assert (roles[-1], _text(messages[-1]["content"])) == ("user", question)
        assert roles[-2] == "user"
        assert f"- {FACT}" in _text(messages[-2]["content"])
        assert sum(f"- {FACT}" in _text(m["content"]) for m in messages) == 1
    await client.close()
