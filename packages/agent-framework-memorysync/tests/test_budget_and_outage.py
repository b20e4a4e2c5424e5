"""The run never waits past the recall budget, never stalls its loop, never breaks.

A real loopback server (``shared.fake_server``) misbehaves: it never answers, answers
after 5 s, refuses the key, or is not there at all.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from typing import Any

import pytest

from agent_framework_memorysync import MemorySyncContextProvider
from shared.fake_server import FakeServer, Fault
from shared.timing import SLACK, release_when_held

BUDGET = 0.5
QUESTION = "Which hotel did I like last time in Porto?"
API_KEY = "ms_test_secret_key_do_not_leak"


def _closed_port_url() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.mark.parametrize(
    ("route", "fault"),
    [
        ("/v1/memory/recall", Fault.hang()),
        ("/v1/memory/recall", Fault.delay(5)),
        ("/org/projects", Fault.hang()),  # the tenant lookup is inside the budget
        ("/v1/memory/recall", Fault.status(401)),
    ],
    ids=["recall-never-answers", "recall-after-5s", "tenant-never-answers", "key-refused"],
)
async def test_the_run_answers_within_the_budget_without_memory(
    route: str,
    fault: Fault,
    fake_server: FakeServer,
    kit: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake_server.set_default(route, fault)
    memory = MemorySyncContextProvider(
        user_id="alice", api_key=API_KEY, base_url=fake_server.base_url, recall_timeout=BUDGET
    )
    client = kit.ScriptedChatClient(["I do not remember, sorry."])
    agent = kit.agent(client, memory)
    try:
        loop = asyncio.get_running_loop()
        with caplog.at_level(logging.WARNING, logger="memorysync"):
            started = loop.time()
            answer = await agent.run(QUESTION, session=agent.create_session())
            elapsed = loop.time() - started
    finally:
        await memory.close(timeout=0.1)
    assert answer.text == "I do not remember, sorry."
    assert elapsed < BUDGET + SLACK  # the faults last 5 s or forever
    assert kit.instructions(client) == [kit.INSTRUCTIONS]  # no block
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings  # the outage is said, once per recall
    assert all(API_KEY not in r.getMessage() for r in caplog.records)


async def test_the_callers_loop_keeps_running_while_recall_waits(
    fake_server: FakeServer, kit: Any
) -> None:
    # The server holds the recall until a task on the caller's loop lets it answer
    # (shared/timing.py): had the recall blocked that loop, the 30 s budget would run
    # out first and the model would get no memory.
    fake_server.seed_memory("alice", "Liked the Hotel Infante Sagres in Porto")
    gate = threading.Event()
    fake_server.set_default("/v1/memory/recall", Fault.gate(gate))
    memory = MemorySyncContextProvider(
        user_id="alice", api_key=API_KEY, base_url=fake_server.base_url, recall_timeout=30.0
    )
    client = kit.ScriptedChatClient(["The Infante Sagres."])
    agent = kit.agent(client, memory)
    opener = asyncio.create_task(release_when_held(fake_server, "/v1/memory/recall", gate))
    try:
        await agent.run(QUESTION, session=agent.create_session())
        await opener
    finally:
        await memory.close(timeout=0.1)
    assert "Hotel Infante Sagres" in kit.instructions(client)[0]


async def test_no_server_at_all_still_answers(kit: Any) -> None:
    memory = MemorySyncContextProvider(
        user_id="alice", api_key=API_KEY, base_url=_closed_port_url(), recall_timeout=BUDGET
    )
    agent = kit.agent(kit.ScriptedChatClient(["Hello."]), memory)
    answer = await agent.run(QUESTION, session=agent.create_session())
    assert answer.text == "Hello."
    report = await memory.close(timeout=0.2)
    assert report.pending == 2  # the turns could not be delivered; the report says so
    assert report.delivered == 0


async def test_capture_adds_no_network_time_and_close_reports_what_is_left(
    fake_server: FakeServer, kit: Any
) -> None:
    fake_server.set_default("/v1/history/append", Fault.hang())
    memory = MemorySyncContextProvider(
        user_id="alice", api_key=API_KEY, base_url=fake_server.base_url, recall_timeout=BUDGET
    )
    agent = kit.agent(kit.ScriptedChatClient(["Noted."]), memory)
    loop = asyncio.get_running_loop()
    session = agent.create_session()
    started = loop.time()
    for text in ["I live in Lisbon.", "I prefer window seats."]:
        await agent.run(text, session=session)
    elapsed = loop.time() - started
    assert elapsed < 2 * (BUDGET + SLACK)  # the hanging append never held a run
    assert memory.pending == 4
    report = await memory.close(timeout=0.2)
    assert report.pending == 4
    assert report.delivered == 0
    assert not report.all_delivered
    appended = fake_server.requests_to("/v1/history/append")
    assert appended  # delivery was attempted in the background


async def test_a_retried_delivery_is_stored_once(local_server: Any, kit: Any) -> None:
    """The first append reaches the server but its answer is lost: the retry resends it."""
    import httpx

    class LoseFirstAnswer(httpx.AsyncBaseTransport):
        def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
            self.inner = inner
            self.appends = 0

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            response = await self.inner.handle_async_request(request)
            if request.url.path == "/v1/history/append":
                self.appends += 1
                if self.appends == 1:
                    await response.aread()
                    raise httpx.ReadError("connection lost after the server stored the turns")
            return response

    transport = LoseFirstAnswer(local_server.transport)
    memory = MemorySyncContextProvider(
        user_id="alice",
        api_key=local_server.api_key,
        base_url=local_server.base_url,
        transport=transport,
    )
    agent = kit.agent(kit.ScriptedChatClient(["Noted."]), memory)
    session = agent.create_session()
    await agent.run("I live in Lisbon.", session=session)
    report = await memory.close()
    assert report.all_delivered
    assert transport.appends >= 2
    from shared.local_server import stored_history

    stored = stored_history(local_server, local_server.tenant_id, "alice")
    assert [(h["role"], h["content"]) for h in stored] == [
        ("user", "I live in Lisbon."),
        ("assistant", "Noted."),
    ]
