"""Behaviour against the real memorysync-local server (embedded) with real AssistantAgents."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_core.memory import MemoryContent, MemoryMimeType
from autogen_ext.models.replay import ReplayChatCompletionClient

from autogen_memorysync import MemorySyncMemory, create_memory_tools
from memorysync_core.errors import RateLimitError
from memorysync_local import Plan
from shared.local_server import stored_history, stored_memories

SYSTEM = "You are a helpful travel assistant."
DURABLE = "I am vegetarian and I live in Lisbon."
RELATED = "Can you recommend a vegetarian restaurant in Lisbon for tonight?"


@pytest.fixture
async def memory_on(kit: Any) -> Any:
    made: list[MemorySyncMemory] = []

    def make(server: Any, **settings: Any) -> MemorySyncMemory:
        settings.setdefault("user_id", "alice")
        memory = MemorySyncMemory(
            api_key=settings.pop("api_key", server.api_key),
            base_url=server.base_url,
            transport=getattr(server, "transport", None),
            **settings,
        )
        made.append(memory)
        return memory

    yield make
    for memory in made:
        await memory.close()


def _agent(client: ReplayChatCompletionClient, *memories: MemorySyncMemory) -> AssistantAgent:
    return AssistantAgent(
        "assistant", model_client=client, memory=list(memories), system_message=SYSTEM
    )


async def test_fact_told_in_session_one_is_in_the_model_input_of_session_two(
    local_server: Any, memory_on: Callable[..., MemorySyncMemory], kit: Any
) -> None:
    first_memory = memory_on(local_server, session_id="booking")
    first = _agent(ReplayChatCompletionClient(["Noted, a vegetarian in Lisbon."]), first_memory)
    result = await first.run(task=DURABLE)
    await first_memory.add_turn_pair(DURABLE, str(result.messages[-1].content))

    client = ReplayChatCompletionClient(["Try Ao 26 Vegan Food Project."])
    second = _agent(client, memory_on(local_server, session_id="dinner"))
    events = [item async for item in second.run_stream(task=RELATED)]

    (messages,) = kit.model_inputs(client)
    kit.assert_system_contiguous(messages)
    (block,) = kit.blocks(messages)
    assert "Vegetarian" in block.content
    assert "Lives in Lisbon" in block.content
    assert messages[-1].content == RELATED
    assert messages[-2] is block
    assert any(type(e).__name__ == "MemoryQueryEvent" for e in events)
    history = stored_history(local_server, local_server.tenant_id, "alice", "autogen::booking")
    assert [(h["role"], h["content"]) for h in history] == [
        ("user", DURABLE),
        ("assistant", "Noted, a vegetarian in Lisbon."),
    ]
    facts = stored_memories(local_server, local_server.tenant_id, "alice")
    assert {f["session_id"] for f in facts} == {"autogen::booking"}


async def test_retried_add_turn_pair_with_a_turn_id_stores_nothing_twice(
    local_server: Any, memory_on: Callable[..., MemorySyncMemory]
) -> None:
    memory = memory_on(local_server, session_id="booking")

    await memory.add_turn_pair(DURABLE, "Noted.", turn_id="turn-1")
    await memory.add_turn_pair(DURABLE, "Noted.", turn_id="turn-1")  # the app retried
    after_retry = stored_history(local_server, local_server.tenant_id, "alice")
    facts_after_retry = stored_memories(local_server, local_server.tenant_id, "alice")
    await memory.add_turn_pair(DURABLE, "Noted.")  # said again later: a new exchange

    assert len(after_retry) == 2
    assert len(stored_history(local_server, local_server.tenant_id, "alice")) == 4
    assert len(facts_after_retry) == 2


async def _say(memory: MemorySyncMemory, text: str) -> None:
    await memory.add(MemoryContent(content=text, mime_type=MemoryMimeType.TEXT))


async def test_clear_scopes_with_two_sessions_and_two_users(
    local_server: Any, memory_on: Callable[..., MemorySyncMemory]
) -> None:
    tenant = local_server.tenant_id
    alice_trip = memory_on(local_server, session_id="trip")
    alice_work = memory_on(local_server, session_id="work")
    bob_trip = memory_on(local_server, user_id="bob", session_id="trip")
    await alice_trip.add_turn_pair("I am allergic to peanuts.", "Noted.")
    await alice_work.add_turn_pair("I work as a nurse in Porto.", "Noted.")
    await bob_trip.add_turn_pair("I am allergic to shellfish.", "Noted.")
    await _say(alice_trip, "My sister is called Maria.")

    await alice_trip.clear()  # default: this session only

    alice_left = stored_memories(local_server, tenant, "alice")
    assert alice_left
    assert {m["session_id"] for m in alice_left} == {"autogen::work"}
    assert stored_history(local_server, tenant, "alice", "autogen::trip") == []
    assert len(stored_history(local_server, tenant, "alice", "autogen::work")) == 2
    bob_before = stored_memories(local_server, tenant, "bob")
    assert bob_before

    await memory_on(local_server, session_id="trip", clear_scope="user").clear()

    assert stored_memories(local_server, tenant, "alice") == []
    assert stored_memories(local_server, tenant, "bob") == bob_before
    assert len(stored_history(local_server, tenant, "bob", "autogen::trip")) == 2


async def test_free_plan_over_quota_is_silent_writes_store_nothing_and_reads_are_empty(
    make_local_server: Callable[..., Any],
    memory_on: Callable[..., MemorySyncMemory],
    kit: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = make_local_server(plans={"ms_local_dev_key": Plan("free", 1)})
    memory = memory_on(server, session_id="booking")
    await memory.add_turn_pair(DURABLE, "Noted.")  # the one add of the month
    stored = stored_memories(server, server.tenant_id, "alice")
    assert stored

    answer = await memory.add_turn_pair("I prefer window seats on trains.", "Noted.")
    client = ReplayChatCompletionClient(["Here is a restaurant."])
    with caplog.at_level(logging.WARNING, logger="memorysync"):
        await _agent(client, memory).run(task=RELATED)
        found = await memory.query(RELATED)

    assert answer["status"] == "skipped"
    assert stored_memories(server, server.tenant_id, "alice") == stored
    assert kit.blocks(kit.model_inputs(client)[0]) == []
    assert found.results == []
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_evaluation_plan_over_quota_raises_on_explicit_calls_and_fails_open_in_runs(
    make_local_server: Callable[..., Any],
    memory_on: Callable[..., MemorySyncMemory],
    kit: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = make_local_server(
        eval_keys=["ms_eval_key"], plans={"ms_eval_key": Plan("evaluation", 1)}
    )
    memory = memory_on(server, api_key="ms_eval_key", session_id="booking")
    await memory.add_turn_pair(DURABLE, "Noted.")
    assert stored_memories(server, "default", "alice")  # evaluation keys write to "default"

    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(RateLimitError) as caught:
        await memory.add_turn_pair("I prefer window seats on trains.", "Noted.")
    assert loop.time() - started < 5  # a quota is raised at once, not slept through
    assert caught.value.retry_after is not None
    assert caught.value.retry_after > 0
    with pytest.raises(RateLimitError):
        await memory.query(RELATED)

    client = ReplayChatCompletionClient(["Here is a restaurant."])
    with caplog.at_level(logging.WARNING, logger="memorysync"):
        result = await _agent(client, memory).run(task=RELATED)
    assert result.messages[-1].content == "Here is a restaurant."
    assert kit.blocks(kit.model_inputs(client)[0]) == []
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 1


async def test_memory_tools_search_and_save_through_the_server(
    local_server: Any, memory_on: Callable[..., MemorySyncMemory]
) -> None:
    memory = memory_on(local_server, session_id="booking")
    search, save = create_memory_tools(memory)
    assert (search.name, save.name) == ("search_memory", "save_memory")

    saved = await save.run_json({"text": "I am allergic to peanuts."}, _token())
    again = await save.run_json({"text": "I am allergic to peanuts."}, _token())
    filler = await save.run_json({"text": "ok thanks"}, _token())
    found = await search.run_json({"query": "peanuts allergy"}, _token())

    assert "peanut" in save.return_value_as_string(found).lower()
    assert len(stored_memories(local_server, local_server.tenant_id, "alice")) == 1
    for outcome in (saved, again, filler):
        assert isinstance(outcome, str)
        assert outcome
    assert saved != filler


def _token() -> Any:
    from autogen_core import CancellationToken

    return CancellationToken()


CHATTER = "Melanie: Haha, sounds good - see you at the pottery class on Friday!"


async def test_add_with_verbatim_metadata_stores_the_content_exactly_as_given(
    served_local_server: Any, memory_on: Callable[..., MemorySyncMemory]
) -> None:
    memory = memory_on(served_local_server)
    note = MemoryContent(
        content=CHATTER, mime_type=MemoryMimeType.TEXT, metadata={"verbatim": True, "by": "ui"}
    )
    extracted = await memory.save(CHATTER)  # through extraction: chatter keeps nothing
    await memory.add(note)
    saved = await memory.save("Ana: the locker code is 4512, don't tell!", verbatim=True)
    assert not extracted.kept
    assert saved.kept
    stored = stored_memories(served_local_server, served_local_server.tenant_id, "alice")
    assert [row["text"] for row in stored] == [
        CHATTER,
        "Ana: the locker code is 4512, don't tell!",
    ]
    assert stored[0]["metadata"]["by"] == "ui"  # the other metadata travels with it
    assert "verbatim" not in stored[0]["metadata"]
    assert note.metadata == {"verbatim": True, "by": "ui"}  # the caller's dict untouched
