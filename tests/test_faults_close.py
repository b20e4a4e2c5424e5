"""Closing with the server down is bounded by ``MEMORYSYNC_CLOSE_TIMEOUT``, and every
adapter's close returns the ``DeliveryReport`` (issue 33, item 13).

Real framework objects (an AG2 chat, an Agent Framework run context, AutoGen's memory,
the ag2 1.x middleware) with a server that is down: a loopback port nobody listens on,
so every delivery attempt is refused and retried. The bound asserted is the feature:
the setting plus ``SLACK``, far below the 10 s a close used to wait.
"""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest
from agent_framework import AgentSession, Message, SessionContext
from autogen import ConversableAgent

from ag2_memorysync import MemorySyncCapability
from ag2_memorysync.v1 import MemorySyncMiddleware
from agent_framework_memorysync import MemorySyncContextProvider
from autogen_memorysync import MemorySyncMemory
from memorysync_core import DeliveryReport
from shared.secret_guard import TEST_API_KEY
from shared.timing import SLACK

CLOSE_TIMEOUT = 1.0
FACT = "I live in Lisbon."


@pytest.fixture
def down(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The connection settings of a server that is down, and the close bound set."""
    monkeypatch.setenv("MEMORYSYNC_CLOSE_TIMEOUT", str(CLOSE_TIMEOUT))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return {
        "user_id": "alice",
        "api_key": TEST_API_KEY,
        "base_url": f"http://127.0.0.1:{port}",
        "tenant_id": "t",
        "recall_timeout": 0.5,
    }


def _check(report: object, started: float, pending: int) -> None:
    assert time.monotonic() - started < CLOSE_TIMEOUT + SLACK
    assert isinstance(report, DeliveryReport)
    assert (report.delivered, report.pending) == (0, pending)


async def test_autogen_close_is_bounded_and_returns_the_report(down: dict[str, Any]) -> None:
    memory = MemorySyncMemory(**down)
    assert memory.capture_exchange(FACT, "Noted.")
    started = time.monotonic()
    _check(await memory.close(), started, pending=2)


async def test_autogen_close_reports_what_it_delivered(local_server: Any) -> None:
    memory = MemorySyncMemory(
        user_id="alice",
        api_key=local_server.api_key,
        base_url=local_server.base_url,
        transport=local_server.transport,
    )
    assert memory.capture_exchange(FACT, "Noted.")
    report = await memory.close()
    assert (report.delivered, report.pending, report.all_delivered) == (2, 0, True)


async def test_ag2_v1_aclose_is_bounded(down: dict[str, Any]) -> None:
    middleware = MemorySyncMiddleware(**down)
    middleware.queue(middleware.memory().capture("user", FACT))
    started = time.monotonic()
    _check(await middleware.aclose(), started, pending=1)


async def test_agent_framework_close_is_bounded(down: dict[str, Any]) -> None:
    provider = MemorySyncContextProvider(**down)
    context = SessionContext(input_messages=[Message("user", [FACT])])
    await provider.after_run(agent=None, session=AgentSession(), context=context, state={})
    started = time.monotonic()
    _check(await provider.close(), started, pending=1)


def test_ag2_classic_close_is_bounded(down: dict[str, Any]) -> None:
    capability = MemorySyncCapability(**down)
    person = ConversableAgent("person", llm_config=False, human_input_mode="NEVER")
    assistant = ConversableAgent(
        "assistant", llm_config=False, human_input_mode="NEVER", default_auto_reply="Noted."
    )
    capability.add_to_agent(assistant)
    person.initiate_chat(assistant, message=FACT, max_turns=1, silent=True)
    started = time.monotonic()
    _check(capability.close(), started, pending=2)
