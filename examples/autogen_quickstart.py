"""AutoGen agents that remember a user across sessions, with MemorySync.

Runs offline as is: the MemorySync server is ``memorysync-local`` embedded in this
process, and the model is scripted (``ReplayChatCompletionClient``). With
``OPENAI_API_KEY`` set, a real OpenAI model answers instead (``OPENAI_MODEL``, default
``gpt-4o-mini``).

    python examples/autogen_quickstart.py

Session one: the user mentions durable facts; ``capture_exchange`` queues the exchange
(delivered in the background; it never raises, even with the server down) and the
server extracts the facts. Session two is a fresh agent and a fresh memory in
another session: before the model call, the memory recalls what is relevant to the new
question and shows it to the model; the script prints what was recalled.
"""

from __future__ import annotations

import asyncio
import os

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.base import TaskResult
from autogen_agentchat.messages import MemoryQueryEvent
from autogen_core.models import ChatCompletionClient
from autogen_ext.models.replay import ReplayChatCompletionClient

import memorysync_local
from autogen_memorysync import MemorySyncMemory

USER = "alice"
SYSTEM = "You are a friendly travel assistant. Keep answers to one or two sentences."


def model_client(scripted_reply: str) -> ChatCompletionClient:
    """A real OpenAI model when OPENAI_API_KEY is set, else a scripted one."""
    if os.environ.get("OPENAI_API_KEY"):
        from autogen_ext.models.openai import OpenAIChatCompletionClient

        return OpenAIChatCompletionClient(model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
    return ReplayChatCompletionClient([scripted_reply])


async def chat(
    server: memorysync_local.EmbeddedServer, session_id: str, task: str, scripted_reply: str
) -> str:
    """One session: a fresh agent and memory, one question, the exchange recorded."""
    memory = MemorySyncMemory(
        user_id=USER,
        session_id=session_id,
        api_key=server.api_key,  # with the hosted service: omit, set MEMORYSYNC_API_KEY
        base_url=server.base_url,
        transport=server.transport,
    )
    client = model_client(scripted_reply)
    agent = AssistantAgent("assistant", model_client=client, memory=[memory], system_message=SYSTEM)
    print(f"\n[{session_id}] user: {task}")
    reply = ""
    async for item in agent.run_stream(task=task):
        if isinstance(item, MemoryQueryEvent):
            for recalled in item.content:
                score = (recalled.metadata or {}).get("score")
                print(f"[{session_id}] recalled: {recalled.content} (score {score})")
        elif isinstance(item, TaskResult):
            reply = str(item.messages[-1].content)
    print(f"[{session_id}] assistant: {reply}")
    # AutoGen never stores turns itself: queue the exchange (never raises, never waits).
    memory.capture_exchange(task, reply)
    await memory.close()  # delivers what is queued; memory.report() says what became of it
    await client.close()
    return reply


async def main() -> None:
    with memorysync_local.embedded() as server:
        await chat(
            server,
            "booking",
            "I'm vegetarian and I live in Lisbon. Please remember that for future trips.",
            "Noted: vegetarian, based in Lisbon.",
        )
        await chat(
            server,
            "dinner",
            "Can you recommend a vegetarian restaurant in Lisbon for tonight?",
            "Since you're vegetarian, try Ao 26 Vegan Food Project in Chiado.",
        )


if __name__ == "__main__":
    asyncio.run(main())
