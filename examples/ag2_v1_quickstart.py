"""ag2 1.x + MemorySync in two conversations, offline on the embedded memorysync-local server.

Conversation one: the user mentions facts about themselves; the middleware stores the
turn in the ``ag2::monday`` transcript and the user's facts are extracted. Conversation
two (a new stream, a new transcript): the model's system prompt for that call carries
the recalled facts. The agent's stored history never contains them.

Run it with ``python examples/ag2_v1_quickstart.py``. The model is ag2's own scripted
``TestConfig``, extended to keep the system prompt of each call for printing; no network
is used.

Against a running server instead (``memorysync-local serve``, or the hosted service):
``MEMORYSYNC_API_KEY=... python examples/ag2_v1_quickstart.py http://127.0.0.1:8765``.

Needs: ``pip install ag2 ag2-memorysync memorysync-local`` (``memorysync-local`` only for
the embedded server).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from typing import Any

from ag2 import Agent, MemoryStream
from ag2.testing import TestClient, TestConfig

from ag2_memorysync.v1 import MemorySyncMiddleware

CONVERSATIONS = (
    ("monday", "I am vegetarian and I live in Lisbon.", "Noted!"),
    ("tuesday", "Can you recommend a vegetarian dinner place in Lisbon?", "Try a tasca in Alfama."),
)

# The system prompt of each model call, as the model received it.
MODEL_SAW: list[list[str]] = []


class ScriptedModel(TestConfig):
    """ag2's scripted model, keeping each call's system prompt (no network)."""

    def create(self) -> TestClient:
        class Client(TestClient):
            async def __call__(self, messages: Any, context: Any, **kwargs: Any) -> Any:
                MODEL_SAW.append(list(context.prompt))
                return await super().__call__(messages, context, **kwargs)

        return Client(*self.events)


async def converse(memory: MemorySyncMiddleware) -> None:
    """The two conversations, then what the model received in the second one."""
    for stream_id, message, scripted in CONVERSATIONS:
        agent = Agent(
            "assistant",
            "You are a helpful assistant.",
            config=ScriptedModel(scripted),
            middleware=[memory],
            tools=[memory.tools()],
        )
        reply = await agent.ask(message, stream=MemoryStream(id=stream_id))
        report = await memory.flush()  # a real service would just carry on
        print(f"[{stream_id}] ana: {message}")
        print(f"[{stream_id}] assistant: {reply.body}")
        print(f"[{stream_id}] delivered turns so far: {report.delivered}")
        history = await reply.context.stream.history.get_events()
        print(
            f"[{stream_id}] memories in the agent's history: "
            f"{sum('user_memories' in repr(event) for event in history)}"
        )
    print("\nThe system prompt of the model's call in conversation two:\n")
    print("\n".join(MODEL_SAW[-1]))
    report = await memory.aclose()
    print(f"\nAll turns delivered: {report.all_delivered}")


async def main() -> None:
    if len(sys.argv) > 1:  # a running server: its URL here, its key in MEMORYSYNC_API_KEY
        await converse(MemorySyncMiddleware(user_id="ana", base_url=sys.argv[1]))
        return
    from memorysync_local import embedded

    with tempfile.TemporaryDirectory() as tmp, embedded(os.path.join(tmp, "ms.db")) as server:
        await converse(
            MemorySyncMiddleware(
                user_id="ana",
                api_key=server.api_key,
                base_url=server.base_url,
                transport=server.transport,
            )
        )


if __name__ == "__main__":
    asyncio.run(main())
