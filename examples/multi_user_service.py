"""One process serving many users: a memory object per user per request, one connection pool.

A web service handles each request for one user: it builds that user's
``MemorySyncMemory`` (cheap: nothing is opened), runs the agent, records the exchange
and closes the memory. Memory objects with the same base URL and key share one
``httpx.AsyncClient`` (one connection pool) while any of them is open, so the service
keeps one long-lived reference for its whole life (``MemorySyncAPI.warm_up()`` at
startup, ``aclose()`` at shutdown) and every request reuses its connections.

The script serves ``memorysync-local`` on loopback (real TCP, so connections can be
counted), runs two rounds of concurrent requests for 20 users, checks that each user
recalls only their own facts, and prints how many memory objects, httpx clients and TCP
connections that took. A scripted model stands in for an LLM unless ``OPENAI_API_KEY``
is set (``OPENAI_MODEL``, default ``gpt-4o-mini``).

    python examples/multi_user_service.py
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
from typing import Any

import httpx
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.messages import MemoryQueryEvent
from autogen_core.models import ChatCompletionClient
from autogen_ext.models.replay import ReplayChatCompletionClient

import memorysync_local
from autogen_memorysync import MemorySyncMemory
from memorysync_core import MemorySyncAPI

OPENAI_KEY = os.environ.get("OPENAI_API_KEY")
MODEL = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
CITIES = [
    "Amsterdam", "Berlin", "Cairo", "Dublin", "Edinburgh", "Florence", "Geneva", "Helsinki",
    "Istanbul", "Jakarta", "Kyoto", "Lisbon", "Madrid", "Nairobi", "Oslo", "Porto", "Quito",
    "Rome", "Santiago", "Toronto",
]  # fmt: skip
USERS = {f"user-{i:02d}": city for i, city in enumerate(CITIES)}


class Counts:
    """What the server saw: requests, and client (host, port) pairs = TCP connections."""

    def __init__(self) -> None:
        self.clients: set[tuple[str, int]] = set()
        self.requests = 0


class ConnectionCounter:
    """ASGI middleware that records every request's client address into ``counts``."""

    def __init__(self, app: Any, counts: Counts) -> None:
        self.app = app
        self.counts = counts

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.counts.clients.add(tuple(scope["client"]))
            self.counts.requests += 1
        await self.app(scope, receive, send)


class Service:
    """The application: one handler per request, a memory object per user per request."""

    def __init__(self, base_url: str, api_key: str) -> None:
        self.settings = {"base_url": base_url, "api_key": api_key}
        # The service's own long-lived reference: keeps the shared pool open between
        # requests (the last reference to close would otherwise close it).
        self.anchor = MemorySyncAPI(**self.settings)
        self.memories_built = 0
        self.construction_seconds = 0.0
        self.max_clients_alive = 0

    async def start(self) -> None:
        await self.anchor.warm_up()  # resolves the tenant and opens the connection

    async def stop(self) -> None:
        await self.anchor.aclose()

    def model(self, scripted_reply: str) -> ChatCompletionClient:
        if OPENAI_KEY:
            from autogen_ext.models.openai import OpenAIChatCompletionClient

            return OpenAIChatCompletionClient(model=MODEL, api_key=OPENAI_KEY)
        return ReplayChatCompletionClient([scripted_reply])

    async def handle(self, user_id: str, text: str, scripted_reply: str) -> list[str]:
        """One request: the user's memory, an agent, the exchange recorded, then closed."""
        started = time.perf_counter()
        # The server runs in this very process: 20 agents and the server share one
        # interpreter, so a generous recall budget keeps this demo's outcome the same on
        # a busy machine. A real service keeps the default (1.2 s).
        memory = MemorySyncMemory(
            user_id=user_id, session_id="web", recall_timeout=10.0, **self.settings
        )
        self.construction_seconds += time.perf_counter() - started
        self.memories_built += 1
        model = self.model(scripted_reply)
        try:
            agent = AssistantAgent("assistant", model_client=model, memory=[memory])
            result = await agent.run(task=text)
            self.max_clients_alive = max(self.max_clients_alive, httpx_clients_alive())
            await memory.add_turn_pair(text, str(result.messages[-1].content))
            return [
                str(item.content)
                for message in result.messages
                if isinstance(message, MemoryQueryEvent)
                for item in message.content
            ]
        finally:
            await memory.close()
            await model.close()


def httpx_clients_alive() -> int:
    """How many plain httpx.AsyncClient objects (the memory pool's kind) exist right now.

    Model clients build their own, of subclasses (OpenAI's), which are not counted.
    """
    return sum(type(obj) is httpx.AsyncClient for obj in gc.get_objects())


async def run(server: memorysync_local.ServedServer, counts: Counts) -> None:
    service = Service(server.base_url, server.api_key)
    await service.start()
    try:
        await asyncio.gather(
            *(
                service.handle(user, f"I live in {city}.", "Good to know!")
                for user, city in USERS.items()
            )
        )
        print(f"round 1: {len(USERS)} users told the service where they live (concurrently)")

        question = "What's the weather like where I live?"
        recalled = await asyncio.gather(
            *(service.handle(user, question, "Let me check the forecast.") for user in USERS)
        )
        print(f"round 2: {len(USERS)} users asked: {question}")
        for (user, city), memories in zip(USERS.items(), recalled, strict=True):
            if user in ("user-00", "user-07", "user-19"):
                print(f"  {user} recalled: {memories}")
            assert any(city in text for text in memories), (user, memories)
            others = [c for c in CITIES if c != city]
            assert not any(c in text for text in memories for c in others), (user, memories)
        print("each user recalled their own city and nobody else's: yes")
    finally:
        await service.stop()

    mean_ms = 1000 * service.construction_seconds / service.memories_built
    print(f"memory objects created: {service.memories_built} (mean construction {mean_ms:.3f} ms)")
    print(f"httpx.AsyncClient objects alive at most: {service.max_clients_alive}")
    print(f"requests to the server: {counts.requests}")
    print(f"TCP connections opened to the server: {len(counts.clients)}")


def main() -> None:
    key = memorysync_local.DEV_API_KEY
    app = memorysync_local.create_app(":memory:", api_keys={key: "local"})
    counts = Counts()
    app.add_middleware(ConnectionCounter, counts=counts)
    with memorysync_local.ServedServer(
        app, api_key=key, tenant_id="local", db_path=":memory:"
    ) as server:
        asyncio.run(run(server, counts))


if __name__ == "__main__":
    main()
