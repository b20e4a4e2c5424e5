"""Real ``Agent`` runs against memorysync-local: recall before, capture after, in order."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from agent_framework import AgentSession, InMemoryHistoryProvider, Message

from agent_framework_memorysync import MemorySyncContextProvider
from shared.local_server import stored_history, stored_memories

DURABLE = "I am vegetarian and I live in Lisbon."
RELATED = "Can you recommend a vegetarian restaurant in Lisbon for tonight?"
MARKER = "<user_memories>"

Make = Callable[..., MemorySyncContextProvider]


def _transcript(server: Any, session_id: str, user: str = "alice") -> list[tuple[str, str]]:
    scope = f"agent-framework::{session_id}"
    stored = stored_history(server, server.tenant_id, user, scope)
    return [(h["role"], h["content"]) for h in stored]


async def test_a_fact_told_in_one_session_is_in_the_instructions_of_the_next(
    served_local_server: Any, provider_on: Make, kit: Any
) -> None:
    memory = provider_on(served_local_server)
    client = kit.ScriptedChatClient(["Noted: vegetarian, Lisbon.", "Try Ao 26."])
    agent = kit.agent(client, memory)
    first = agent.create_session()
    await agent.run(DURABLE, session=first)
    assert (await memory.flush()).all_delivered

    second = agent.create_session()
    answer = await agent.run(RELATED, session=second)

    assert answer.text == "Try Ao 26."
    first_instructions, second_instructions = kit.instructions(client)
    assert MARKER not in first_instructions  # nothing was known yet
    assert second_instructions.startswith(kit.INSTRUCTIONS)  # the agent's own come first
    assert second_instructions.count(MARKER) == 1
    assert "Vegetarian" in second_instructions
    assert "Lisbon" in second_instructions
    messages, _ = client.requests[1]
    assert kit.texts(messages) == [("user", RELATED)]  # the block is not a message
    assert _transcript(served_local_server, first.session_id) == [
        ("user", DURABLE),
        ("assistant", "Noted: vegetarian, Lisbon."),
    ]
    facts = stored_memories(served_local_server, served_local_server.tenant_id, "alice")
    assert {f["session_id"] for f in facts} == {f"agent-framework::{first.session_id}"}
    assert {f["source"] for f in facts} == {"agent-framework"}


async def test_one_block_per_run_whatever_the_history_provider_keeps(
    local_server: Any, provider_on: Make, kit: Any
) -> None:
    memory = provider_on(local_server)
    await memory.save(DURABLE)
    history = InMemoryHistoryProvider(store_context_messages=True)
    client = kit.ScriptedChatClient(["One.", "Two.", "Three."])
    agent = kit.agent(client, history, memory)
    session = agent.create_session()
    questions = [RELATED, "And one for lunch tomorrow in Lisbon?", "Vegetarian tapas in Lisbon?"]
    for question in questions:
        await agent.run(question, session=session)

    for index, (messages, options) in enumerate(client.requests):
        assert str(options["instructions"]).count(MARKER) == 1
        assert not any(MARKER in m.text for m in messages)
        # The history provider still works: earlier turns are in the request, in order.
        assert [m.text for m in messages if m.role == "user"] == questions[: index + 1]
    assert await memory.flush()
    assert _transcript(local_server, session.session_id) == [
        ("user", questions[0]),
        ("assistant", "One."),
        ("user", questions[1]),
        ("assistant", "Two."),
        ("user", questions[2]),
        ("assistant", "Three."),
    ]


async def test_the_transcript_is_the_conversation_in_order_with_repeats_kept(
    local_server: Any, provider_on: Make, kit: Any
) -> None:
    memory = provider_on(local_server)
    client = kit.ScriptedChatClient(["Hello!", "Sure.", "Sure."])
    agent = kit.agent(client, InMemoryHistoryProvider(), memory)
    session = agent.create_session()
    for text in ["Hi there, I am Alice.", "Say yes please.", "Say yes please."]:
        await agent.run(text, session=session)
    report = await memory.close()
    assert report.delivered == 6
    assert report.all_delivered
    assert _transcript(local_server, session.session_id) == [
        ("user", "Hi there, I am Alice."),
        ("assistant", "Hello!"),
        ("user", "Say yes please."),
        ("assistant", "Sure."),
        ("user", "Say yes please."),  # a genuine repeat is stored again
        ("assistant", "Sure."),
    ]


async def test_a_run_retried_with_the_same_message_is_stored_once(
    local_server: Any, provider_on: Make, kit: Any
) -> None:
    memory = provider_on(local_server)
    agent = kit.agent(kit.ScriptedChatClient(["Noted."]), memory)
    session = agent.create_session()
    message = Message("user", [DURABLE], message_id="msg-1")
    await agent.run(message, session=session)
    await agent.run(message, session=session)  # the application retried the same message
    assert (await memory.flush()).delivered == 4
    assert _transcript(local_server, session.session_id) == [
        ("user", DURABLE),
        ("assistant", "Noted."),
    ]


async def test_streaming_runs_recall_and_capture_like_plain_ones(
    local_server: Any, provider_on: Make, kit: Any
) -> None:
    memory = provider_on(local_server)
    await memory.save(DURABLE)
    client = kit.ScriptedChatClient([[kit.text("Try "), kit.text("Ao 26.")]])
    agent = kit.agent(client, memory)
    session = agent.create_session()
    chunks = [update.text async for update in agent.run(RELATED, stream=True, session=session)]
    assert "".join(chunks) == "Try Ao 26."
    assert kit.instructions(client)[0].count(MARKER) == 1
    assert (await memory.flush()).delivered == 2
    assert _transcript(local_server, session.session_id) == [
        ("user", RELATED),
        ("assistant", "Try Ao 26."),
    ]


async def test_a_stream_abandoned_before_its_end_captures_nothing(
    local_server: Any, provider_on: Make, kit: Any
) -> None:
    memory = provider_on(local_server)
    client = kit.ScriptedChatClient([[kit.text("Try "), kit.text("Ao 26.")]])
    agent = kit.agent(client, memory)
    session = agent.create_session()
    stream = agent.run(RELATED, stream=True, session=session)
    async for _ in stream:
        break  # the caller stops reading: the framework never calls after_run
    assert memory.pending == 0
    assert _transcript(local_server, session.session_id) == []


async def test_tool_calls_and_results_stay_out_of_the_transcript(
    local_server: Any, provider_on: Make, kit: Any
) -> None:
    memory = provider_on(local_server)

    def weather(city: str) -> str:
        """The weather in a city."""
        return f"Sunny in {city}, 24 C."

    call = kit.function_call("weather", {"city": "Lisbon"})
    client = kit.ToolCallingClient(script=[call, "It is sunny in Lisbon."])
    agent = kit.agent(client, memory, tools=[weather])
    session = agent.create_session()
    answer = await agent.run("What is the weather in Lisbon today?", session=session)
    assert answer.text.endswith("It is sunny in Lisbon.")
    assert len(client.requests) == 2  # the tool round-trip happened
    assert any(m.role == "tool" for m in client.requests[1][0])
    assert (await memory.flush()).delivered == 2
    assert _transcript(local_server, session.session_id) == [
        ("user", "What is the weather in Lisbon today?"),
        ("assistant", "It is sunny in Lisbon."),
    ]


async def test_the_memory_tools_search_and_save_through_the_function_layer(
    local_server: Any, provider_on: Make, kit: Any
) -> None:
    from agent_framework_memorysync import create_memory_tools

    memory = provider_on(local_server)
    script = [
        kit.function_call("save_memory", {"text": "I am allergic to peanuts."}),
        kit.function_call("search_memory", {"query": "peanuts"}, call_id="c2"),
        "Noted your peanut allergy.",
    ]
    client = kit.ToolCallingClient(script=script)
    agent = kit.agent(client, memory, tools=create_memory_tools(memory))
    await agent.run("Remember that I am allergic to peanuts.", session=agent.create_session())
    results = [m for messages, _ in client.requests for m in messages if m.role == "tool"]
    texts = [content.result for m in results[-2:] for content in m.contents]
    assert "Saved to long-term memory" in str(texts[0])
    assert "peanut" in str(texts[1]).lower()
    names = {t.name for t in create_memory_tools(memory)}
    assert names == {"search_memory", "save_memory"}


async def test_session_state_round_trips_without_the_key_and_keeps_the_session(
    local_server: Any, provider_on: Make, kit: Any
) -> None:
    memory = provider_on(local_server)
    agent = kit.agent(kit.ScriptedChatClient(["Noted."]), InMemoryHistoryProvider(), memory)
    session = agent.create_session(session_id="trip-42")
    await agent.run(DURABLE, session=session)
    dumped = json.dumps(session.to_dict())  # plain JSON: what FileSessionStore writes
    assert local_server.api_key not in dumped
    restored = AgentSession.from_dict(json.loads(dumped))
    assert restored.state[memory.source_id] == {
        "user_id": "alice",
        "scope": "agent-framework::trip-42",
    }
    await agent.run("Book the usual hotel in Lisbon please.", session=restored)
    assert (await memory.flush()).delivered == 4
    assert [role for role, _ in _transcript(local_server, "trip-42")] == ["user", "assistant"] * 2


async def test_a_fixed_session_id_wins_and_a_run_without_session_gets_its_own(
    local_server: Any, provider_on: Make, kit: Any
) -> None:
    fixed = provider_on(local_server, session_id="support")
    await kit.agent(kit.ScriptedChatClient(["A."]), fixed).run(DURABLE)
    assert _transcript(local_server, "support") == []  # queued, not yet delivered
    await fixed.flush()
    assert _transcript(local_server, "support") == [("user", DURABLE), ("assistant", "A.")]

    loose = provider_on(local_server)
    await kit.agent(kit.ScriptedChatClient(["B."]), loose).run(RELATED)  # no session
    await loose.flush()
    stored = stored_history(local_server, local_server.tenant_id, "alice")
    scopes = {h["session_id"] for h in stored} - {"agent-framework::support"}
    (scope,) = scopes  # both turns of the run in one throwaway session
    assert scope.startswith("agent-framework::")
    assert len(scope) > len("agent-framework::")


async def test_a_run_can_name_its_own_user(local_server: Any, provider_on: Make, kit: Any) -> None:
    memory = provider_on(local_server)
    await memory.memory_for(user_id="bob").save("I am vegan and live in Porto.")
    client = kit.ScriptedChatClient(["Hi Bob."])
    agent = kit.agent(client, memory)
    session = agent.create_session()
    question = "Can you recommend a vegan restaurant in Porto?"
    await agent.run(question, session=session, options={"memorysync_user_id": "bob"})
    assert "Porto" in kit.instructions(client)[0]
    assert "memorysync_user_id" not in client.requests[0][1]  # the model client never sees it
    await memory.flush()
    assert _transcript(local_server, session.session_id, user="bob") == [
        ("user", question),
        ("assistant", "Hi Bob."),
    ]
    assert _transcript(local_server, session.session_id, user="alice") == []


async def test_explicit_calls_search_save_and_clear(
    local_server: Any, provider_on: Make, kit: Any
) -> None:
    memory = provider_on(local_server)
    agent = kit.agent(kit.ScriptedChatClient(["Noted."]), memory)
    session = agent.create_session()
    await agent.run(DURABLE, session=session)
    await memory.flush()
    found = await memory.search("Where does the user live?")
    assert any("Lisbon" in m.text for m in found)
    outcome = await memory.save("I prefer window seats.", session=session)
    assert outcome.kept
    cleared = await memory.clear(session=session)
    assert cleared.deleted_memory_ids
    assert cleared.deleted_turn_ids
    assert _transcript(local_server, session.session_id) == []
    assert stored_memories(local_server, local_server.tenant_id, "alice") == []


async def test_history_needs_its_own_provider_before_1_11(
    local_server: Any, provider_on: Make, kit: Any
) -> None:
    """On 1.0 to 1.10, any context provider turns the automatic in-memory history off."""
    from importlib.metadata import version

    release = tuple(int(part) for part in version("agent-framework-core").split(".")[:2])
    for providers, keeps in [((), release >= (1, 11)), ((InMemoryHistoryProvider(),), True)]:
        client = kit.ScriptedChatClient(["Noted.", "Yes."])
        agent = kit.agent(client, *providers, provider_on(local_server))
        session = agent.create_session()
        await agent.run(DURABLE, session=session)
        await agent.run("Do you remember where I live?", session=session)
        seen = [text for _, text in kit.texts(client.requests[1][0])]
        assert (DURABLE in seen) is keeps, (providers, seen)


async def test_a_verbatim_save_stores_the_text_exactly_as_given_in_the_runs_session(
    served_local_server: Any, provider_on: Make, kit: Any
) -> None:
    chatter = "Melanie: Haha, sounds good - see you at the pottery class on Friday!"
    memory = provider_on(served_local_server)
    agent = kit.agent(kit.ScriptedChatClient(["Noted."]), memory)
    session = agent.create_session()
    assert not (await memory.save(chatter, session=session)).kept  # extraction: nothing
    assert (await memory.save(chatter, session=session, verbatim=True)).kept
    stored = stored_memories(served_local_server, served_local_server.tenant_id, "alice")
    assert [row["text"] for row in stored] == [chatter]
    assert stored[0]["session_id"] == f"agent-framework::{session.session_id}"
