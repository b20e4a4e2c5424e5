"""The public surface: names, validation, attaching, the role rule."""

from __future__ import annotations

import math
from importlib.metadata import version

import pytest
from autogen import ConversableAgent, UserProxyAgent

import ag2_memorysync
from ag2_memorysync import MemorySyncCapability, speaks_for_a_person


def test_the_public_names_are_exactly_the_documented_ones():
    assert sorted(ag2_memorysync.__all__) == [
        "MemorySyncCapability",
        "__version__",
        "register_memory_tools",
        "speaks_for_a_person",
    ]
    assert ag2_memorysync.__version__ == version("ag2-memorysync")


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"user_id": ""}, "user_id"),
        ({"session_id": " "}, "session_id"),
        ({"top_k": 0}, "top_k"),
        ({"recall_timeout": 0}, "recall_timeout"),
        ({"request_timeout": float("nan")}, "request_timeout"),
        ({"recall_timeout": math.inf}, "recall_timeout"),
        ({"min_prompt_chars": -1}, "min_prompt_chars"),
        ({"capture": "everything"}, "capture"),
        ({"clear_scope": "tenant"}, "clear_scope"),
        ({"context_template": "no placeholder"}, "context_template"),
        ({"max_context_chars": 0}, "max_context_chars"),
    ],
)
def test_invalid_arguments_raise_value_error_naming_the_parameter(kwargs, named):
    base = {"user_id": "alice", "api_key": "ms_test", "base_url": "http://127.0.0.1:9"}
    with pytest.raises(ValueError, match=named):
        MemorySyncCapability(**{**base, **kwargs})


def test_a_missing_api_key_is_a_construction_error(monkeypatch):
    monkeypatch.delenv("MEMORYSYNC_API_KEY", raising=False)
    with pytest.raises(ValueError, match="MEMORYSYNC_API_KEY"):
        MemorySyncCapability(user_id="alice")


def test_user_and_session_are_readable_and_the_key_is_never_shown():
    memory = MemorySyncCapability(
        user_id="alice", session_id="trip", api_key="ms_secret_123", base_url="http://127.0.0.1:9"
    )
    assert (memory.user_id, memory.session_id, memory.scope) == ("alice", "trip", "ag2::trip")
    assert "ms_secret_123" not in repr(memory)


def test_attaching_something_without_hooks_names_the_package_to_install():
    memory = MemorySyncCapability(user_id="alice", api_key="ms_t", base_url="http://127.0.0.1:9")
    with pytest.raises(TypeError, match="pip install autogen"):
        memory.add_to_agent(object())
    agent = ConversableAgent("bot", llm_config=False, human_input_mode="NEVER")
    with pytest.raises(ValueError, match="speaks_for_person"):
        memory.add_to_agent(agent, speaks_for_person="yes")  # type: ignore[arg-type]


def test_attaching_twice_is_a_no_op():
    memory = MemorySyncCapability(user_id="alice", api_key="ms_t", base_url="http://127.0.0.1:9")
    agent = ConversableAgent("bot", llm_config=False, human_input_mode="NEVER")
    memory.add_to_agent(agent)
    hooks = {name: len(hooks) for name, hooks in agent.hook_lists.items()}
    replies = len(agent._reply_func_list)
    memory.add_to_agent(agent)
    assert {name: len(hooks) for name, hooks in agent.hook_lists.items()} == hooks
    assert len(agent._reply_func_list) == replies
    memory.close()


def test_who_speaks_for_a_person():
    llm = {"config_list": [{"model": "gpt-4o-mini", "api_key": "sk-test"}]}
    assert speaks_for_a_person(UserProxyAgent("u", code_execution_config=False))
    assert speaks_for_a_person(
        UserProxyAgent("u", human_input_mode="NEVER", code_execution_config=False)
    )
    assert speaks_for_a_person(ConversableAgent("a", llm_config=llm, human_input_mode="ALWAYS"))
    assert speaks_for_a_person(ConversableAgent("t", llm_config=False))  # TERMINATE, no model
    assert not speaks_for_a_person(ConversableAgent("m", llm_config=llm))  # TERMINATE + model
    assert not speaks_for_a_person(
        ConversableAgent("n", llm_config=False, human_input_mode="NEVER")
    )
