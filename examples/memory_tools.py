"""An AutoGen agent that decides for itself what to remember and when to look it up.

``create_memory_tools(memory)`` gives the agent two tools: ``save_memory`` (the server's
fact extraction decides what is kept, and the tool says so in words the model can use)
and ``search_memory``. In the first conversation the model saves a preference; in the
second, a new agent searches for it before answering. The script prints every tool call
and its result.

Offline by default: ``memorysync-local`` runs embedded in this process and a scripted
model (AutoGen's ``ReplayChatCompletionClient``) makes the tool calls a real model would.
With ``OPENAI_API_KEY`` set, an OpenAI model (``OPENAI_MODEL``, default ``gpt-4o-mini``)
decides instead.

    python examples/memory_tools.py
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Sequence

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.messages import ToolCallExecutionEvent, ToolCallRequestEvent
from autogen_core import EVENT_LOGGER_NAME, FunctionCall
from autogen_core.models import ChatCompletionClient, CreateResult, ModelInfo, RequestUsage
from autogen_ext.models.replay import ReplayChatCompletionClient

import memorysync_local
from autogen_memorysync import MemorySyncMemory, create_memory_tools

OPENAI_KEY = os.environ.get("OPENAI_API_KEY")
MODEL = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
SYSTEM = (
    "You are a travel assistant with a long-term memory about the user. Save durable "
    "preferences with save_memory; before booking anything, search_memory for them."
)


def tool_call(call_id: str, name: str, **arguments: str) -> CreateResult:
    """A model turn that calls one tool, as a real model's answer would."""
    return CreateResult(
        finish_reason="function_calls",
        content=[FunctionCall(id=call_id, name=name, arguments=json.dumps(arguments))],
        usage=RequestUsage(prompt_tokens=0, completion_tokens=0),
        cached=False,
    )


def model(script: Sequence[str | CreateResult]) -> ChatCompletionClient:
    if OPENAI_KEY:
        from autogen_ext.models.openai import OpenAIChatCompletionClient

        return OpenAIChatCompletionClient(model=MODEL, api_key=OPENAI_KEY)
    # The replay client logs warnings about features it ignores (tool_choice, token counts).
    logging.getLogger(EVENT_LOGGER_NAME).setLevel(logging.ERROR)
    info = ModelInfo(
        vision=False,
        function_calling=True,
        json_output=False,
        family="unknown",
        structured_output=False,
    )
    return ReplayChatCompletionClient(list(script), model_info=info)


async def conversation(
    memory: MemorySyncMemory, text: str, script: Sequence[str | CreateResult]
) -> None:
    client = model(script)
    agent = AssistantAgent(
        "travel_agent",
        model_client=client,
        tools=create_memory_tools(memory),
        system_message=SYSTEM,
        reflect_on_tool_use=True,  # answer in words after the tool result
    )
    print(f"user: {text}")
    result = await agent.run(task=text)
    for message in result.messages:
        if isinstance(message, ToolCallRequestEvent):
            for call in message.content:
                print(f"tool call: {call.name}({call.arguments})")
        elif isinstance(message, ToolCallExecutionEvent):
            for outcome in message.content:
                print(f"tool result: {outcome.content}")
    print(f"assistant: {result.messages[-1].content}")
    await client.close()


async def main() -> None:
    with memorysync_local.embedded() as server:
        connection = {
            "api_key": server.api_key,
            "base_url": server.base_url,
            "transport": server.transport,
        }

        print("=== Conversation 1: the model decides a preference is worth keeping")
        memory = MemorySyncMemory(user_id="alice", session_id="trip-planning", **connection)
        await conversation(
            memory,
            "For the record: I always prefer window seats.",
            [
                tool_call("call_1", "save_memory", text="The user prefers window seats."),
                "Noted: window seats from now on.",
            ],
        )
        await memory.close()

        print("\n=== Conversation 2: a new agent looks the preference up before booking")
        memory = MemorySyncMemory(user_id="alice", session_id="booking", **connection)
        await conversation(
            memory,
            "Book me on the Friday flight to Porto.",
            [
                tool_call("call_2", "search_memory", query="seat preference"),
                "Booked the Friday flight to Porto, with a window seat as you prefer.",
            ],
        )
        await memory.close()


if __name__ == "__main__":
    asyncio.run(main())
