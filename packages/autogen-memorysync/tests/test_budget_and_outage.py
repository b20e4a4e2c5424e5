"""The hot path never waits past its budget and never breaks a run; explicit calls fail loud.

A real loopback server (``shared.fake_server``) misbehaves: it never answers, answers
after 5 s, or is not there at all.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_core.memory import MemoryContent, MemoryMimeType
from autogen_core.model_context import UnboundedChatCompletionContext
from autogen_core.models import UserMessage
from autogen_ext.models.replay import ReplayChatCompletionClient

from autogen_memorysync import MemorySyncMemory
from memorysync_core.errors import APIConnectionError, APITimeoutError
from shared.fake_server import FakeServer, Fault
from shared.timing import SLACK

# The faults last 5 s or forever; how close to the budget recall returns (well inside
# 100 ms) is measured in bench/ (budget precision), not asserted on a shared machine.
BUDGET = 0.5
QUESTION = "Which hotel did I like last time in Porto?"


def _closed_port_url() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


async def _timed_update(memory: MemorySyncMemory) -> tuple[float, int]:
    context = UnboundedChatCompletionContext()
    await context.add_message(UserMessage(content=QUESTION, source="user"))
    loop = asyncio.get_running_loop()
    started = loop.time()
    result = await memory.update_context(context)
    elapsed = loop.time() - started
    assert len(await context.get_messages()) == 1  # nothing injected
    return elapsed, len(result.memories.results)


@pytest.mark.parametrize(
    ("route", "fault"),
    [
        ("/v1/memory/recall", Fault.hang()),
        ("/v1/memory/recall", Fault.delay(5)),
        ("/org/projects", Fault.hang()),  # the first call's tenant resolution is in the budget
    ],
    ids=["recall-never-answers", "recall-answers-after-5s", "tenant-never-answers"],
)
async def test_update_context_returns_within_the_budget_and_the_run_completes(
    route: str,
    fault: Fault,
    fake_server: FakeServer,
    kit: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake_server.set_default(route, fault)
    memory = MemorySyncMemory(
        user_id="alice",
        api_key=kit.API_KEY,
        base_url=fake_server.base_url,
        recall_timeout=BUDGET,
    )
    try:
        with caplog.at_level(logging.WARNING, logger="memorysync"):
            elapsed, found = await _timed_update(memory)
        assert elapsed < BUDGET + SLACK
        assert found == 0
        assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 1

        client = ReplayChatCompletionClient(["I do not remember, sorry."])
        agent = AssistantAgent("assistant", model_client=client, memory=[memory])
        loop = asyncio.get_running_loop()
        started = loop.time()
        result = await agent.run(task=QUESTION)
        assert loop.time() - started < BUDGET + 1.0  # the run is not held up by the server
        assert result.messages[-1].content == "I do not remember, sorry."
        assert [type(m).__name__ for m in client.create_calls[0]["messages"]] == [
            "SystemMessage",
            "UserMessage",
        ]
    finally:
        await memory.close()


async def test_server_down_hot_path_answers_without_memories_and_logs_one_warning(
    kit: Any, caplog: pytest.LogCaptureFixture
) -> None:
    memory = MemorySyncMemory(user_id="alice", api_key=kit.API_KEY, base_url=_closed_port_url())
    try:
        client = ReplayChatCompletionClient(["Answer without memories."])
        agent = AssistantAgent("assistant", model_client=client, memory=[memory])
        with caplog.at_level(logging.WARNING, logger="memorysync"):
            result = await agent.run(task=QUESTION)
        assert result.messages[-1].content == "Answer without memories."
        warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1
        assert kit.API_KEY not in warnings[0].getMessage()
        assert QUESTION not in warnings[0].getMessage()
    finally:
        await memory.close()


async def test_server_down_explicit_calls_raise_a_connection_error(kit: Any) -> None:
    memory = MemorySyncMemory(
        user_id="alice", api_key=kit.API_KEY, base_url=_closed_port_url(), tenant_id="t"
    )
    fact = MemoryContent(content="I live in Porto.", mime_type=MemoryMimeType.TEXT)
    try:
        with pytest.raises(APIConnectionError):
            await memory.add(fact)
        with pytest.raises(APIConnectionError):
            await memory.add_turn_pair("I live in Porto.", "Noted.")
        with pytest.raises(APIConnectionError):
            await memory.query("Where do I live?")
        with pytest.raises(APIConnectionError) as caught:
            await memory.clear()
        assert kit.API_KEY not in str(caught.value)
        assert kit.API_KEY not in repr(caught.value)
    finally:
        await memory.close()


async def test_a_cancelled_token_cancels_an_explicit_query(
    fake_server: FakeServer, kit: Any
) -> None:
    from autogen_core import CancellationToken

    fake_server.set_default("/v1/memory/query", Fault.hang())
    memory = MemorySyncMemory(
        user_id="alice", api_key=kit.API_KEY, base_url=fake_server.base_url, tenant_id="t"
    )
    token = CancellationToken()
    try:
        pending = asyncio.ensure_future(memory.query("Where do I live?", token))
        await fake_server.wait_for_requests_async(1, route="/v1/memory/query")
        token.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pending
    finally:
        await memory.close()
        await memory.close()  # closing twice is harmless


async def test_request_timeout_bounds_an_explicit_query_against_a_silent_server(
    fake_server: FakeServer, kit: Any
) -> None:
    fake_server.set_default("/v1/memory/query", Fault.hang())
    memory = MemorySyncMemory(
        user_id="alice",
        api_key=kit.API_KEY,
        base_url=fake_server.base_url,
        tenant_id="t",
        request_timeout=0.2,
    )
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        with pytest.raises(APITimeoutError):
            await memory.query("Where do I live?")
        # Three attempts of 0.2 s plus the backoff between them, far from 3 x 10 s.
        assert loop.time() - started < 5.0
        assert len(fake_server.requests_to("/v1/memory/query")) == 3
    finally:
        await memory.close()
