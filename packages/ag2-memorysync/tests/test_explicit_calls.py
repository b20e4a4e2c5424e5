"""search / save / clear: synchronous, typed errors; the memory tools through AG2."""

from __future__ import annotations

from typing import Any

import pytest
from autogen import UserProxyAgent

from ag2_memorysync import register_memory_tools
from memorysync_core import APITimeoutError, AuthError, RecalledMemory, ValidationError
from shared.fake_server import Fault
from shared.local_server import stored_memories


def test_save_then_search_round_trips_through_the_server(fake_server, make_capability):
    memory = make_capability(fake_server)
    outcome = memory.save("The user prefers window seats.")
    assert outcome.kept
    found = memory.search("seats")
    assert [m.text for m in found] == ["The user prefers window seats."]
    assert isinstance(found[0], RecalledMemory)
    body = fake_server.requests_to("/memory/add")[0].json
    assert body["session_id"] == "ag2::s1"
    assert body["client_ref"].startswith("ag2:")


def test_search_keeps_the_capabilitys_min_score_unless_given_one(fake_server, make_capability):
    fake_server.seed_memory("alice", "Lives in Lisbon", score=0.9)
    fake_server.seed_memory("alice", "Has a cat", score=0.2)
    memory = make_capability(fake_server, min_score=0.5)
    assert [m.text for m in memory.search("where")] == ["Lives in Lisbon"]
    assert len(memory.search("where", min_score=0.0)) == 2


def test_explicit_calls_raise_typed_errors(fake_server, make_capability):
    memory = make_capability(fake_server, tenant_id="t")
    fake_server.set_default("/memory/add", Fault.status(422, {"detail": "text too short"}))
    with pytest.raises(ValidationError, match="text too short"):
        memory.save("x y z")
    fake_server.set_default("/v1/memory/query", Fault.status(401))
    with pytest.raises(AuthError) as raised:
        memory.search("anything")
    assert "ms_test" not in str(raised.value)


def test_request_timeout_bounds_an_explicit_search_against_a_silent_server(
    fake_server, make_capability
):
    memory = make_capability(fake_server, tenant_id="t", request_timeout=0.2)
    fake_server.set_default("/v1/memory/query", Fault.hang())
    with pytest.raises(APITimeoutError):
        memory.search("where do I live?")
    # Three attempts of 0.2 s each (plus backoff), not three of the default 10 s.
    assert len(fake_server.requests_to("/v1/memory/query")) == 3


def test_clear_deletes_this_session_only_by_default(fake_server, make_capability, kit):
    here = make_capability(fake_server, session_id="here")
    there = make_capability(fake_server, session_id="there")
    for memory, text in ((here, "I live in Lisbon."), (there, "I work in Porto.")):
        bot = kit.scripted_agent("assistant", ["Noted."])
        memory.add_to_agent(bot)
        UserProxyAgent("user", human_input_mode="NEVER", code_execution_config=False).initiate_chat(
            bot, message=text, max_turns=1, silent=True
        )
        assert memory.flush().all_delivered

    result = here.clear()
    assert len(result.deleted_turn_ids) == 2
    assert {m["text"] for m in fake_server.memories} == {"I work in Porto."}
    assert {t["session_id"] for t in fake_server.history} == {"ag2::there"}

    everything = make_capability(fake_server, session_id="there", clear_scope="user")
    everything.clear()
    assert fake_server.memories == []


def test_memory_tools_are_offered_to_the_model_and_run_by_the_executor(
    fake_server, make_capability, kit
):
    fake_server.seed_memory("alice", "Allergic to peanuts")
    memory = make_capability(fake_server)
    assistant = kit.model_agent("assistant")
    user = UserProxyAgent(
        "user", human_input_mode="NEVER", code_execution_config=False, max_consecutive_auto_reply=3
    )
    register_memory_tools(memory, caller=assistant, executor=user)
    tools = {t["function"]["name"] for t in assistant.llm_config["tools"]}
    assert tools == {"search_memory", "save_memory"}

    def call(name: str, args: str, call_id: str) -> dict[str, Any]:
        return {
            "content": None,
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
            ],
        }

    replies = [
        call("search_memory", '{"query": "allergies"}', "c1"),
        call("save_memory", '{"text": "Likes apples"}', "c2"),
        "Avoid peanuts; apples are fine.",
    ]
    with kit.scripted_model(assistant, replies) as inputs:
        user.initiate_chat(assistant, message="What snack can I have?", max_turns=3, silent=True)

    tool_results = [m for m in inputs.calls[1] if m.get("role") == "tool"]
    assert "- Allergic to peanuts" in str(tool_results[-1]["content"])
    assert "Likes apples" in {m["text"] for m in fake_server.memories}


def test_memory_tools_reject_objects_that_are_not_agents(fake_server, make_capability, kit):
    memory = make_capability(fake_server)
    with pytest.raises(TypeError, match="register_for_llm"):
        register_memory_tools(memory, caller=object(), executor=kit.scripted_agent("x", []))
    with pytest.raises(TypeError, match="MemorySyncCapability"):
        register_memory_tools("memory", caller=object(), executor=object())  # type: ignore[arg-type]


def _tool_call(name: str, args: str, call_id: str) -> dict[str, Any]:
    return {
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
        ],
    }


def test_every_memory_tool_failure_is_a_sentence_for_the_model_logged_without_user_text(
    fake_server, make_capability, kit, caplog
):
    memory = make_capability(fake_server)
    assistant = kit.model_agent("assistant")
    user = UserProxyAgent(
        "user", human_input_mode="NEVER", code_execution_config=False, max_consecutive_auto_reply=5
    )
    register_memory_tools(memory, caller=assistant, executor=user)
    closing = {"done": False}

    def close_before_third_call(*args: Any, **kwargs: Any) -> tuple[bool, None]:
        if len(inputs.calls) == 3 and not closing["done"]:
            closing["done"] = True
            memory.close()
        return False, None

    user.register_reply(lambda _sender: True, close_before_third_call, position=0)
    replies = [
        _tool_call("save_memory", '{"text": "   "}', "c1"),  # empty: ValueError before
        _tool_call("search_memory", '{"query": ""}', "c2"),
        _tool_call("save_memory", '{"text": "Secret 4711 likes apples"}', "c3"),  # closed
        _tool_call("search_memory", '{"query": "Secret 4711"}', "c4"),  # closed
        "Sorry, memory is unavailable.",
    ]
    with (
        caplog.at_level("WARNING", logger="memorysync"),
        kit.scripted_model(assistant, replies) as inputs,
    ):
        user.initiate_chat(assistant, message="Remember my snack.", max_turns=5, silent=True)

    results = [str(m["content"]) for m in inputs.calls[-1] if m.get("role") == "tool"]
    assert results == [
        "Nothing was saved: the fact was empty; pass the sentence to remember.",
        "Nothing was searched: the query was empty; pass what to look up.",
        "The fact could not be saved right now (RuntimeError).",
        "Memory search is unavailable right now (RuntimeError).",
    ]
    warnings = [r.getMessage() for r in caplog.records if r.name == "memorysync.ag2"]
    assert len([w for w in warnings if "tool" in w]) == 4
    assert all("4711" not in w for w in warnings)
    assert fake_server.requests_to("/memory/add") == []


def test_search_with_an_empty_query_names_the_query_parameter(fake_server, make_capability):
    memory = make_capability(fake_server)
    for bad in ("", "   "):
        with pytest.raises(ValueError, match=r"^query must be a non-empty string"):
            memory.search(bad)
    assert fake_server.requests_to("/v1/memory/query") == []


def test_a_verbatim_save_stores_the_text_exactly_as_given(served_local_server, make_capability):
    chatter = "Melanie: Haha, sounds good - see you at the pottery class on Friday!"
    memory = make_capability(served_local_server, api_key=served_local_server.api_key)
    assert not memory.save(chatter).kept  # through extraction: chatter keeps nothing
    assert memory.save(chatter, verbatim=True).kept
    stored = stored_memories(served_local_server, served_local_server.tenant_id, "alice")
    assert [row["text"] for row in stored] == [chatter]
