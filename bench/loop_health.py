"""Item 4: does recall keep the caller's event loop responsive?

A heartbeat task sleeps 1 ms in a loop and records how late each tick wakes up.

- 50 AutoGen agents' memories recall at once (``asyncio.gather`` of ``update_context``),
  against the same 50 recalls done the way the autogen-ext Mem0 adapter does its I/O: a
  synchronous client called inside ``async def``.
- An AG2 chat driven by ``a_initiate_chat`` whose recall takes 1 s, against an async reply
  function that calls a synchronous client for the same 1 s recall.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import httpx
from autogen import ConversableAgent, UserProxyAgent
from autogen.testing import TestAgent
from autogen_core.model_context import UnboundedChatCompletionContext
from autogen_core.models import UserMessage

from ag2_memorysync import MemorySyncCapability
from autogen_memorysync import MemorySyncMemory

from ._heartbeat import with_heartbeat
from ._server import PROMPT, USER, BenchServer
from ._stats import Row, Section, Stat, ms, stat

AGENTS = 50
SLOW_RECALL = 1.0
LLM_CONFIG = {"config_list": [{"model": "gpt-4o-mini", "api_key": "sk-bench-not-used"}]}


class _Mem0StyleMemory:
    """The peer pattern: ``async def`` that calls a synchronous HTTP client."""

    def __init__(self, server: BenchServer, client: httpx.Client) -> None:
        self._client = client
        self._body = server.recall_body()

    async def update_context(self, context: Any) -> None:
        self._client.post("/v1/memory/recall", json=self._body).raise_for_status()


async def _autogen(server: BenchServer, rounds: int) -> tuple[Stat, Stat]:
    memories = [
        MemorySyncMemory(
            user_id=USER, session_id=f"s{i}", api_key=server.api_key, base_url=server.base_url
        )
        for i in range(AGENTS)
    ]
    contexts = []
    for _ in range(AGENTS):
        context = UnboundedChatCompletionContext()
        await context.add_message(UserMessage(content=PROMPT, source="user"))
        contexts.append(context)
    await asyncio.gather(
        *(m.update_context(c) for m, c in zip(memories, contexts, strict=True))
    )  # warm

    async def ours() -> None:
        for _ in range(rounds):
            await asyncio.gather(
                *(m.update_context(c) for m, c in zip(memories, contexts, strict=True))
            )

    ours_lags = await with_heartbeat(ours)
    for memory in memories:
        await memory.close()

    headers = {"X-API-Key": server.api_key}
    with httpx.Client(base_url=server.base_url, headers=headers) as client:
        peers = [_Mem0StyleMemory(server, client) for _ in range(AGENTS)]

        async def theirs() -> None:
            for _ in range(rounds):
                await asyncio.gather(*(p.update_context(None) for p in peers))

        their_lags = await with_heartbeat(theirs)
    return (
        stat("AutoGen: 50 concurrent recalls", ours_lags),
        stat("sync client in async def: 50 recalls", their_lags),
    )


@contextlib.contextmanager
def _scripted(agent: ConversableAgent, replies: list[str]) -> Iterator[None]:
    with TestAgent(agent, replies):
        yield


async def _ag2(server: BenchServer, chats: int) -> tuple[Stat, Stat]:
    server.delays["/v1/memory/recall"] = SLOW_RECALL
    try:
        capability = MemorySyncCapability(
            user_id=USER,
            session_id="loop",
            api_key=server.api_key,
            base_url=server.base_url,
            recall_timeout=SLOW_RECALL + 1.0,
        )
        assistant = ConversableAgent("assistant", llm_config=LLM_CONFIG, human_input_mode="NEVER")
        capability.add_to_agent(assistant)

        async def ours() -> None:
            for _ in range(chats):
                user = UserProxyAgent("user", human_input_mode="NEVER", code_execution_config=False)
                with _scripted(assistant, ["Noted."]):
                    await user.a_initiate_chat(assistant, message=PROMPT, max_turns=1, silent=True)

        ours_lags = await with_heartbeat(ours)
        capability.close()

        headers = {"X-API-Key": server.api_key}
        body = server.recall_body()
        with httpx.Client(base_url=server.base_url, headers=headers, timeout=30) as client:
            peer = ConversableAgent("assistant", llm_config=LLM_CONFIG, human_input_mode="NEVER")

            async def blocking_recall(
                recipient: Any, messages: Any = None, sender: Any = None, config: Any = None
            ) -> tuple[bool, None]:
                client.post("/v1/memory/recall", json=body).raise_for_status()
                return False, None

            peer.register_reply(
                lambda _s: True, blocking_recall, position=0, ignore_async_in_sync_chat=True
            )

            async def theirs() -> None:
                for _ in range(chats):
                    user = UserProxyAgent(
                        "user", human_input_mode="NEVER", code_execution_config=False
                    )
                    with _scripted(peer, ["Noted."]):
                        await user.a_initiate_chat(peer, message=PROMPT, max_turns=1, silent=True)

            their_lags = await with_heartbeat(theirs)
    finally:
        server.delays.clear()
    return (
        stat("AG2 a_initiate_chat, recall takes 1 s", ours_lags),
        stat("sync client in an async reply function, 1 s", their_lags),
    )


def _row(figure: str, ours: Stat, theirs: Stat) -> Row:
    return Row(
        figure,
        f"max {ms(ours.max)}, p99 {ms(ours.p99)}",
        f"max {ms(theirs.max)}, p99 {ms(theirs.p99)}",
        f"{theirs.max / ours.max:.0f}× less max lag" if ours.max > 0 else "n/a",
        "reported (AG2 issue bound: no gap > 100 ms)" if "AG2" in ours.name else "reported",
        ours.max < 100.0 if "AG2" in ours.name else None,
    )


def run(server: BenchServer, *, quick: bool) -> list[Section]:
    """Item 4."""
    autogen_ours, autogen_theirs = asyncio.run(_autogen(server, 3 if quick else 10))
    ag2_ours, ag2_theirs = asyncio.run(_ag2(server, 1 if quick else 3))
    return [
        Section(
            title="4. Event-loop health",
            setup=(
                "A task sleeping 1 ms in a loop records how late each tick wakes (lag). "
                f"AutoGen: {AGENTS} memories recall at once, repeated; baseline: the same "
                "recalls through a synchronous client inside `async def` (the autogen-ext "
                "Mem0 adapter's pattern). AG2: chats under `a_initiate_chat` whose recall "
                "takes 1 s; baseline: an async reply function calling a synchronous client."
            ),
            rows=[
                _row(
                    f"AutoGen, {AGENTS} concurrent recalls: heartbeat lag",
                    autogen_ours,
                    autogen_theirs,
                ),
                _row("AG2 chat with a 1 s recall: heartbeat lag", ag2_ours, ag2_theirs),
            ],
            stats=[autogen_ours, autogen_theirs, ag2_ours, ag2_theirs],
        )
    ]
