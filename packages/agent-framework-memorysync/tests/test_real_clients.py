"""The block reaches every provider's system text, once, through the real request builders.

An ``Agent`` runs with the provider and a history provider against memorysync-local;
the request it hands its chat client is then given to the request builders of the
framework's real clients (``agent-framework-openai``: Chat Completions and Responses,
``agent-framework-anthropic``, ``agent-framework-gemini``), exactly as their
``_inner_get_response`` does before calling the SDK. No network is used.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from agent_framework import InMemoryHistoryProvider, Message

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from agent_framework_anthropic import AnthropicClient
    from agent_framework_gemini import GeminiChatClient
    from agent_framework_openai import OpenAIChatClient, OpenAIChatCompletionClient

MARKER = "<user_memories>"
QUESTION = "Can you recommend a vegetarian restaurant in Lisbon for tonight?"


def _chat_completions(messages: list[Message], options: dict[str, Any]) -> tuple[str, str]:
    client = OpenAIChatCompletionClient(api_key="sk-test", model="gpt-4o-mini")
    request = client._prepare_options(messages, options)
    system = [m["content"] for m in request["messages"] if m["role"] == "system"]
    assert request["messages"][0]["role"] == "system"  # one leading system message
    return "\n".join(system), json.dumps(request, default=str)


def _responses(messages: list[Message], options: dict[str, Any]) -> tuple[str, str]:
    client = OpenAIChatClient(api_key="sk-test", model="gpt-4o-mini")
    request = asyncio.run(client._prepare_options(messages, options))
    if "instructions" in request:  # agent-framework-openai 1.17
        return str(request["instructions"]), json.dumps(request, default=str)
    # Older releases send the instructions as the leading system item of the input.
    head = request["input"][0]
    assert head["role"] == "system"
    assert all(item.get("role") != "system" for item in request["input"][1:])
    return head["content"][0]["text"], json.dumps(request, default=str)


def _anthropic(messages: list[Message], options: dict[str, Any]) -> tuple[str, str]:
    client = AnthropicClient(api_key="test", model="claude-sonnet-4-5")
    request = client._prepare_options(messages, options)
    assert all(m["role"] in ("user", "assistant") for m in request["messages"])
    return str(request["system"]), json.dumps(request, default=str)


def _gemini(messages: list[Message], options: dict[str, Any]) -> tuple[str, str]:
    client = GeminiChatClient(api_key="test", model="gemini-2.5-flash")
    _, contents, config = client._prepare_request(messages, options)
    dumped = json.dumps([c.model_dump(mode="json") for c in contents]) + str(
        config.system_instruction
    )
    return str(config.system_instruction), dumped


BUILDERS: dict[str, Callable[[list[Message], dict[str, Any]], tuple[str, str]]] = {
    "openai-chat-completions": _chat_completions,
    "openai-responses": _responses,
    "anthropic": _anthropic,
    "gemini": _gemini,
}


@pytest.fixture
def second_request(local_server: Any, kit: Any) -> tuple[list[Message], dict[str, Any]]:
    """The request of a session's second run (history and block), as the agent built it."""
    from agent_framework_memorysync import MemorySyncContextProvider

    async def scenario() -> tuple[list[Message], dict[str, Any]]:
        async with MemorySyncContextProvider(
            user_id="alice",
            api_key=local_server.api_key,
            base_url=local_server.base_url,
            transport=local_server.transport,
        ) as memory:
            await memory.save("I am vegetarian and I live in Lisbon.")
            client = kit.ScriptedChatClient(["Lunch: Ao 26.", "Dinner: Arkhe."])
            history = InMemoryHistoryProvider(store_context_messages=True)
            agent = kit.agent(client, history, memory)
            session = agent.create_session()
            await agent.run("A vegetarian lunch in Lisbon?", session=session)
            await agent.run(QUESTION, session=session)
            messages, options = client.requests[1]
            return messages, options

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return asyncio.run(scenario())


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_the_block_is_system_text_once_and_the_question_comes_last(
    name: str, second_request: tuple[list[Message], dict[str, Any]], kit: Any
) -> None:
    messages, options = second_request
    system, whole = BUILDERS[name](messages, options)
    assert system.startswith(kit.INSTRUCTIONS)
    assert system.count(MARKER) == 1
    assert whole.count(MARKER) == 1  # not repeated anywhere else in the request
    assert "Vegetarian" in system
    assert QUESTION in whole
    assert whole.rindex(QUESTION) > whole.rindex("Lunch: Ao 26.")  # history, then question


def test_a_system_message_after_the_history_is_not_system_text_for_anthropic() -> None:
    """Why instructions: a block sent as a message mid-conversation changes role."""
    messages = [
        Message("user", ["A vegetarian lunch in Lisbon?"]),
        Message("assistant", ["Lunch: Ao 26."]),
        Message("system", [MARKER + " Vegetarian"]),
        Message("user", [QUESTION]),
    ]
    request = AnthropicClient(api_key="test", model="claude-sonnet-4-5")._prepare_options(
        messages, {}
    )
    assert "system" not in request
    (carried,) = [m for m in request["messages"] if MARKER in json.dumps(m)]
    assert carried["role"] == "user"  # shown to the model as the person's words
