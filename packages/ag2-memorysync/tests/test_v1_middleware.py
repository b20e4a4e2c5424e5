"""MemorySyncMiddleware through real ag2 1.x Agents, scripted models, a served local server."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import pytest

pytest.importorskip("ag2.middleware", reason="ag2 1.x is not installed (AG2-classic session)")

from ag2 import Agent, MemoryStream, tool
from ag2.events import ToolCallEvent
from ag2.middleware.builtin import HistoryLimiter
from ag2.testing import TestClient, TestConfig

from ag2_memorysync.v1 import MemorySyncMiddleware
from shared.fake_server import Fault
from shared.local_server import stored_history, stored_memories
from shared.timing import SLACK, release_when_held

MARK = "<user_memories>"


class Recording(TestConfig):
    """ag2's scripted model that also records each call's prompt (ag2 1.0's
    ``TrackingConfig`` keeps no record of it); ``fail`` makes every call raise it."""

    def __init__(self, *script: Any, fail: BaseException | None = None) -> None:
        super().__init__(*script)
        self.prompts: list[tuple[str, ...]] = []
        self.fail = fail

    def create(self) -> TestClient:
        config = self

        class Client(TestClient):
            async def __call__(self, messages: Any, context: Any, **kwargs: Any) -> Any:
                config.prompts.append(tuple(context.prompt))
                if config.fail is not None:
                    raise config.fail
                return await super().__call__(messages, context, **kwargs)

        return Client(*self.events)


def middleware(server: Any, **kwargs: Any) -> MemorySyncMiddleware:
    kwargs.setdefault("user_id", "ana")
    return MemorySyncMiddleware(api_key=server.api_key, base_url=server.base_url, **kwargs)


def fake_middleware(fake_server: Any, **kwargs: Any) -> MemorySyncMiddleware:
    """A middleware of the fake server's user ``ana`` (tenant given: no lookup)."""
    return MemorySyncMiddleware(
        user_id="ana",
        api_key="ms_test_key_0123456789",
        base_url=fake_server.base_url,
        tenant_id="fake",
        **kwargs,
    )


def call(tool: str, **arguments: str) -> ToolCallEvent:
    import json

    return ToolCallEvent(name=tool, arguments=json.dumps(arguments))


def clock() -> str:
    """A local tool: the model's round-trip through it touches no memory."""
    return "12:00"


async def remember_lisbon(memory: MemorySyncMiddleware) -> None:
    agent = Agent("assistant", "You help.", config=TestConfig("Noted!"), middleware=[memory])
    await agent.ask("I am vegetarian and I live in Lisbon.")
    assert (await memory.flush()).all_delivered


async def test_each_model_call_gets_the_block_once_and_history_never_holds_it(
    served_local_server,
):
    memory = middleware(served_local_server)
    await remember_lisbon(memory)
    script = (
        call("search_memory", query="diet"),
        call("search_memory", query="city"),
        "Try Alfama.",
    )
    tracking = Recording(*script)
    agent = Agent(
        "assistant", "You help.", config=tracking, middleware=[memory], tools=[memory.tools()]
    )
    reply = await agent.ask("Can you recommend a vegetarian dinner place in Lisbon?")

    assert reply.body == "Try Alfama."
    assert len(tracking.prompts) == 3  # two tool round-trips in one turn
    for prompt in tracking.prompts:
        blocks = [part for part in prompt if MARK in part]
        assert len(blocks) == 1, prompt
        assert "Lives in Lisbon" in blocks[0]
        assert prompt[0] == "You help."
    history = await reply.context.stream.history.get_events()
    assert not [event for event in history if MARK in repr(event)]
    assert list(reply.context.prompt) == ["You help."]  # restored after the call
    await memory.aclose()


async def test_the_block_survives_a_history_limiter_listed_after_the_memory(served_local_server):
    memory = middleware(served_local_server)
    await remember_lisbon(memory)
    tracking = Recording("One.", "Two.")
    agent = Agent("assistant", config=tracking, middleware=[memory, HistoryLimiter(max_events=1)])
    reply = await agent.ask("Any vegetarian place in Lisbon for tonight?")
    await reply.ask("And a vegetarian lunch in Lisbon tomorrow?")
    assert [sum(MARK in part for part in c) for c in tracking.prompts] == [1, 1]
    await memory.aclose()


async def test_one_capture_per_turn_in_order_without_tool_traffic(served_local_server):
    memory = middleware(served_local_server)
    script = TestConfig(
        call("search_memory", query="a"),
        call("search_memory", query="b"),
        call("search_memory", query="c"),
        "Here is your plan.",
        "You are welcome.",
    )
    agent = Agent("assistant", config=script, middleware=[memory], tools=[memory.tools()])
    stream = MemoryStream(id="trip")  # the framework's conversation id names the session
    reply = await agent.ask("Plan my trip to Porto, I hate early flights.", stream=stream)
    await reply.ask("Thank you so much!")
    report = await memory.aclose()

    assert report.all_delivered
    assert report.delivered == 4
    rows = stored_history(served_local_server, served_local_server.tenant_id, "ana")
    assert [(r["role"], r["content"]) for r in rows] == [
        ("user", "Plan my trip to Porto, I hate early flights."),
        ("assistant", "Here is your plan."),
        ("user", "Thank you so much!"),
        ("assistant", "You are welcome."),
    ]
    assert {r["session_id"] for r in rows} == {"ag2::trip"}
    assert {r["source"] for r in rows} == {"ag2"}
    assert [r["seq"] for r in rows] == sorted(r["seq"] for r in rows)


async def test_each_conversation_is_its_own_session_unless_one_is_pinned(served_local_server):
    follows = middleware(served_local_server)
    agent = Agent("assistant", config=TestConfig("A.", "B."), middleware=[follows])
    first = await agent.ask("This is the first conversation.")
    second = await agent.ask("This is the second conversation.")
    await follows.aclose()
    pinned = middleware(served_local_server, session_id="support")
    agent = Agent("assistant", config=TestConfig("C."), middleware=[pinned])
    await agent.ask("This is the pinned conversation.")
    await pinned.aclose()

    sessions = [r["session_id"] for r in stored_history(served_local_server, "local", "ana")]
    assert sessions == [
        f"ag2::{first.context.stream.id}",
        f"ag2::{first.context.stream.id}",
        f"ag2::{second.context.stream.id}",
        f"ag2::{second.context.stream.id}",
        "ag2::support",
        "ag2::support",
    ]


async def test_the_memory_tools_save_and_search_in_the_conversations_session(
    served_local_server,
):
    memory = middleware(served_local_server)
    script = (
        call("save_memory", text="The user is allergic to peanuts."),
        "Saved.",
        call("search_memory", query="peanuts allergy"),
        "You are allergic to peanuts.",
    )
    tracking = Recording(*script)
    agent = Agent("assistant", config=tracking, middleware=[memory], tools=[memory.tools()])
    stream = MemoryStream(id="health")
    reply = await agent.ask("Please remember that I am allergic to peanuts.", stream=stream)
    await reply.ask("What am I allergic to?")
    await memory.aclose()

    saved = [
        m for m in stored_memories(served_local_server, "local", "ana") if m["origin"] == "add"
    ]
    assert [m["session_id"] for m in saved] == ["ag2::health"]
    results = [repr(e) for e in await reply.context.stream.history.get_events()]
    assert any("search_memory" in r and "allergic to peanuts" in r.lower() for r in results)
    assert {tool.schema.function.name for tool in memory.tools().tools} == {
        "search_memory",
        "save_memory",
    }


async def test_the_callers_loop_keeps_running_while_recall_waits(fake_server):
    # The server holds the recall until a task on the caller's loop lets it answer
    # (shared/timing.py): had the recall blocked that loop, the 30 s budget would run
    # out first and the model would see no memory.
    fake_server.seed_memory("ana", "Lives in Lisbon")
    gate = threading.Event()
    fake_server.set_default("/v1/memory/recall", Fault.gate(gate))
    memory = fake_middleware(fake_server, recall_timeout=30.0)
    tracking = Recording("You live in Lisbon.")
    agent = Agent("assistant", config=tracking, middleware=[memory])
    opener = asyncio.create_task(release_when_held(fake_server, "/v1/memory/recall", gate))
    try:
        await agent.ask("Where do I live, do you remember?")
        await opener
    finally:
        await memory.aclose(timeout=0.2)
    assert any("Lives in Lisbon" in part for c in tracking.prompts for part in c)


async def test_a_black_hole_server_costs_one_budget(fake_server, caplog):
    fake_server.set_default("/v1/memory/recall", Fault.hang())
    fake_server.set_default("/v1/history/append", Fault.hang())
    memory = fake_middleware(fake_server, recall_timeout=0.5)
    tracking = Recording(call("clock"), "Still here.")
    agent = Agent("assistant", config=tracking, middleware=[memory], tools=[tool(clock)])
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="memorysync"):
        reply = await agent.ask("Where do I live, do you remember?")
    elapsed = time.monotonic() - started

    assert reply.body == "Still here."
    assert all(MARK not in part for c in tracking.prompts for part in c)
    # One recall budget for the turn (the tool round-trip reuses it); capture adds none.
    # Two budgets would take 1.0 s; this bound only proves no wait on the black hole.
    assert elapsed < 0.5 + SLACK, elapsed
    assert len(fake_server.requests_to("/v1/memory/recall")) == 1
    assert any("recall" in r.getMessage() for r in caplog.records)
    report = await memory.aclose(timeout=0.2)
    assert report.pending == 2
    assert report.delivered == 0


async def test_a_failing_recall_is_logged_and_the_call_goes_on(fake_server, caplog):
    fake_server.set_default("/v1/memory/recall", Fault.status(500))
    memory = fake_middleware(fake_server)
    agent = Agent("assistant", config=TestConfig("Fine."), middleware=[memory])
    with caplog.at_level(logging.WARNING, logger="memorysync"):
        reply = await agent.ask("Where do I live, do you remember?")
    assert reply.body == "Fine."
    assert any(r.levelno == logging.WARNING for r in caplog.records)
    assert (await memory.aclose()).all_delivered


async def test_a_failed_turn_still_stores_what_the_person_said(served_local_server):
    memory = middleware(served_local_server, session_id="oops")
    agent = Agent(
        "assistant", config=Recording(fail=RuntimeError("model down")), middleware=[memory]
    )
    with pytest.raises(RuntimeError, match="model down"):
        await agent.ask("I moved to Porto last week.")
    await memory.aclose()
    rows = stored_history(served_local_server, "local", "ana")
    assert [(r["role"], r["content"]) for r in rows] == [("user", "I moved to Porto last week.")]


async def test_a_verbatim_save_stores_the_text_exactly_as_given(served_local_server):
    chatter = "Melanie: Haha, sounds good - see you at the pottery class on Friday!"
    memory = middleware(served_local_server, session_id="notes")
    try:
        assert not (await memory.save(chatter)).kept  # through extraction: nothing
        assert (await memory.save(chatter, verbatim=True)).kept
    finally:
        await memory.aclose()
    stored = stored_memories(served_local_server, served_local_server.tenant_id, "ana")
    assert [row["text"] for row in stored] == [chatter]
    assert stored[0]["session_id"] == "ag2::notes"


def test_settings_are_checked_once_and_the_key_stays_out_of_repr():
    with pytest.raises(ValueError, match="top_k"):
        MemorySyncMiddleware(user_id="ana", api_key="ms_secret_key_value", top_k=0)
    with pytest.raises(ValueError, match="session_id"):
        MemorySyncMiddleware(user_id="ana", api_key="ms_secret_key_value", session_id=" ")
    with pytest.raises(ValueError, match="clear_scope"):
        MemorySyncMiddleware(user_id="ana", api_key="ms_secret_key_value", clear_scope="all")
    memory = MemorySyncMiddleware(user_id="ana", api_key="ms_secret_key_value")
    assert "ms_secret" not in repr(memory)
    assert memory.session_id is None
    agent = Agent("assistant", middleware=[memory])
    if hasattr(agent, "middleware"):  # ag2 >= 1.2 describes an agent's middleware
        description = agent.middleware[0].middleware.describe()
        assert description.kind == "MemorySyncMiddleware"
        assert "ms_secret" not in repr(description)
