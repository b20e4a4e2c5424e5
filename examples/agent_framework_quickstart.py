"""Microsoft Agent Framework agents that remember a user across sessions, with MemorySync.

Runs offline as is: the MemorySync server is ``memorysync-local`` embedded in this
process, and the model is scripted (a small ``BaseChatClient`` below that also prints
what the memory put in front of it). With ``OPENAI_API_KEY`` set, a real OpenAI model
answers instead (``OPENAI_MODEL``, default ``gpt-4o-mini``; needs
``agent-framework-openai``).

    python examples/agent_framework_quickstart.py

Session one: the user mentions durable facts; after the run the provider captures the
exchange and the server extracts the facts. Session two is a new ``AgentSession``:
before the model call, the provider recalls what is relevant to the new question and
adds it to the run's instructions; the script prints what was recalled.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

from agent_framework import (
    Agent,
    BaseChatClient,
    ChatMiddlewareLayer,
    ChatResponse,
    FunctionInvocationLayer,
    Message,
)

import memorysync_local
from agent_framework_memorysync import MemorySyncContextProvider

USER = "alice"
INSTRUCTIONS = "You are a friendly travel assistant. Keep answers to one or two sentences."


class ScriptedClient(FunctionInvocationLayer[Any], ChatMiddlewareLayer[Any], BaseChatClient[Any]):
    """Answers from a script and prints the memories it was shown (offline stand-in)."""

    def __init__(self, replies: Sequence[str]) -> None:
        super().__init__()  # the layers give it tool calling, as the real clients have
        self.replies = list(replies)

    def _inner_get_response(
        self, *, messages: Sequence[Message], stream: bool, options: Any, **kwargs: Any
    ) -> Any:
        shown = str(options.get("instructions", ""))
        for line in shown.splitlines():
            if line.startswith("- "):
                print(f"  recalled: {line[2:]}")

        async def reply() -> ChatResponse:
            return ChatResponse(messages=[Message("assistant", [self.replies.pop(0)])])

        return reply()


def chat_client(replies: Sequence[str]) -> Any:
    """A real OpenAI model when OPENAI_API_KEY is set, else the scripted one."""
    if os.environ.get("OPENAI_API_KEY"):
        from agent_framework.openai import OpenAIChatClient

        return OpenAIChatClient(model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
    return ScriptedClient(replies)


async def main() -> None:
    with memorysync_local.embedded() as server:
        # One provider for the agent; with the hosted service, omit api_key, base_url
        # and transport and set MEMORYSYNC_API_KEY.
        async with MemorySyncContextProvider(
            user_id=USER,
            api_key=server.api_key,
            base_url=server.base_url,
            transport=server.transport,
        ) as memory:
            client = chat_client(
                [
                    "Noted: vegetarian, based in Lisbon.",
                    "Since you're vegetarian, try Ao 26 Vegan Food Project in Chiado.",
                ]
            )
            agent = Agent(client, instructions=INSTRUCTIONS, context_providers=[memory])

            booking = agent.create_session(session_id="booking")
            question = "I'm vegetarian and I live in Lisbon. Please remember that."
            print(f"[booking] user: {question}")
            print(f"[booking] assistant: {(await agent.run(question, session=booking)).text}")
            # Capture is delivered in the background; wait for it before the next session
            # only because the two sessions follow each other within milliseconds here.
            await memory.flush()

            dinner = agent.create_session(session_id="dinner")
            question = "Can you recommend a vegetarian restaurant in Lisbon for tonight?"
            print(f"[dinner] user: {question}")
            print(f"[dinner] assistant: {(await agent.run(question, session=dinner)).text}")
        # Leaving the block delivered the last exchange and closed the connection.


if __name__ == "__main__":
    asyncio.run(main())
