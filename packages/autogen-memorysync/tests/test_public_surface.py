"""Public names, constructor validation, readable settings and the component round-trip."""

from __future__ import annotations

import json
from importlib.metadata import version
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_core.memory import Memory
from autogen_ext.models.replay import ReplayChatCompletionClient

import autogen_memorysync
from autogen_memorysync import MemorySyncMemory, MemorySyncMemoryConfig
from memorysync_core import DEFAULT_CONTEXT_TEMPLATE, SETTING_DEFAULTS, AdapterSettings

EVERY_SETTING: dict[str, Any] = {
    "user_id": "customer-42",
    "session_id": "support-chat",
    "top_k": 7,
    "recall_timeout": 0.8,
    "min_prompt_chars": 3,
    "context_template": "Known facts:\n{context}",
    "clear_scope": "user",
    "request_timeout": 4.5,
    "base_url": "http://memorysync.test:8080",
    "project_id": "proj_123",
    "tenant_id": "tenant-9",
    "min_score": 0.4,
    "max_context_chars": 900,
    "transcript": False,
}


def test_public_names_are_exactly_the_documented_ones() -> None:
    assert autogen_memorysync.__all__ == [
        "MemorySyncMemory",
        "MemorySyncMemoryConfig",
        "__version__",
        "create_memory_tools",
    ]
    assert autogen_memorysync.__version__ == version("autogen-memorysync")


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"user_id": ""}, "user_id"),
        ({"user_id": "   "}, "user_id"),
        ({"session_id": ""}, "session_id"),
        ({"top_k": 0}, "top_k"),
        ({"recall_timeout": 0}, "recall_timeout"),
        ({"request_timeout": 0}, "request_timeout"),
        ({"request_timeout": "10"}, "request_timeout"),
        ({"recall_timeout": -1.0}, "recall_timeout"),
        ({"recall_timeout": float("nan")}, "recall_timeout"),
        ({"min_prompt_chars": -1}, "min_prompt_chars"),
        ({"clear_scope": "everything"}, "clear_scope"),
        ({"context_template": "no placeholder here"}, "context_template"),
        ({"max_context_chars": 0}, "max_context_chars"),
        ({"min_score": float("inf")}, "min_score"),
        ({"api_key": "  "}, "api_key"),
        ({"base_url": "ftp://example.org"}, "base_url"),
    ],
)
def test_invalid_settings_raise_value_error_naming_the_parameter(
    overrides: dict[str, Any], named: str, kit: Any
) -> None:
    settings = {"user_id": "alice", "api_key": kit.API_KEY, **overrides}
    with pytest.raises(ValueError, match=named):
        MemorySyncMemory(**settings)


def test_missing_key_is_a_value_error_naming_the_environment_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MEMORYSYNC_API_KEY", raising=False)
    with pytest.raises(ValueError, match="MEMORYSYNC_API_KEY"):
        MemorySyncMemory(user_id="alice")


async def test_every_setting_is_readable_from_settings(kit: Any) -> None:
    memory = MemorySyncMemory(api_key=kit.API_KEY, **EVERY_SETTING)
    try:
        for name, value in EVERY_SETTING.items():
            assert getattr(memory.settings, name) == value, name
        assert memory.user_id == "customer-42"
        assert memory.scope == "autogen::support-chat"
    finally:
        await memory.close()


async def test_defaults_are_the_cores_declared_defaults(kit: Any) -> None:
    memory = MemorySyncMemory(user_id="alice", api_key=kit.API_KEY)
    try:
        assert memory.settings.options() == {**SETTING_DEFAULTS, "api_key": kit.API_KEY}
        assert memory.settings.renderer.template == DEFAULT_CONTEXT_TEMPLATE
        assert memory.session_id == "default"
    finally:
        await memory.close()


async def test_settings_of_another_adapter_start_a_memory(kit: Any) -> None:
    base = AdapterSettings.build(surface="ag2", user_id="alice", api_key=kit.API_KEY, top_k=2)
    memory = MemorySyncMemory(settings=base, session_id="friday")
    try:
        assert (memory.user_id, memory.settings.top_k, memory.scope) == (
            "alice",
            2,
            "autogen::friday",
        )
    finally:
        await memory.close()


def test_the_component_config_declares_exactly_the_cores_serializable_settings() -> None:
    fields = set(MemorySyncMemoryConfig.model_fields)
    assert fields == {"user_id"} | (set(SETTING_DEFAULTS) - {"api_key", "transport"})
    for name, field in MemorySyncMemoryConfig.model_fields.items():
        if name != "user_id":
            assert field.default == SETTING_DEFAULTS[name], name


async def test_component_round_trip_keeps_every_setting_but_never_the_key(
    monkeypatch: pytest.MonkeyPatch, kit: Any
) -> None:
    memory = MemorySyncMemory(api_key=kit.API_KEY, **EVERY_SETTING)
    dumped = memory.dump_component()
    text = dumped.model_dump_json()
    assert kit.API_KEY not in text
    assert kit.API_KEY not in repr(memory)
    assert dumped.provider == "autogen_memorysync.MemorySyncMemory"
    assert dumped.config == EVERY_SETTING

    monkeypatch.setenv("MEMORYSYNC_API_KEY", "ms_key_from_the_environment")
    loaded = Memory.load_component(json.loads(text))
    try:
        assert isinstance(loaded, MemorySyncMemory)
        for name, value in EVERY_SETTING.items():
            assert getattr(loaded.settings, name) == value, name
        assert loaded.block_source == memory.block_source
        assert loaded.dump_component() == dumped
    finally:
        await memory.close()
        await loaded.close()


async def test_settings_from_the_environment_are_not_pinned_in_the_config(
    monkeypatch: pytest.MonkeyPatch, kit: Any
) -> None:
    monkeypatch.setenv("MEMORYSYNC_BASE_URL", "http://from-env.test")
    memory = MemorySyncMemory(user_id="alice", api_key=kit.API_KEY)
    try:
        assert "base_url='http://from-env.test'" in repr(memory)  # used, not pinned
        assert memory.settings.base_url is None
        assert memory.dump_component().config == {
            "user_id": "alice",
            "session_id": "default",
            "top_k": 5,
            "recall_timeout": 1.2,
            "min_prompt_chars": 8,
            "clear_scope": "session",
            "request_timeout": 10.0,
            "transcript": True,
        }
    finally:
        await memory.close()


def test_config_refuses_an_api_key_field_without_quoting_it() -> None:
    with pytest.raises(ValueError, match="api_key") as caught:
        MemorySyncMemoryConfig.model_validate({"user_id": "alice", "api_key": "ms_smuggled"})
    assert "ms_smuggled" not in str(caught.value)
    assert "ms_smuggled" not in repr(caught.value)


async def test_assistant_agent_with_the_memory_dumps_without_key_and_loads_back(
    monkeypatch: pytest.MonkeyPatch, kit: Any
) -> None:
    memory = MemorySyncMemory(api_key=kit.API_KEY, **EVERY_SETTING)
    agent = AssistantAgent(
        "assistant", model_client=ReplayChatCompletionClient(["hi"]), memory=[memory]
    )
    text = agent.dump_component().model_dump_json()
    assert kit.API_KEY not in text

    monkeypatch.setenv("MEMORYSYNC_API_KEY", "ms_key_from_the_environment")
    loaded = AssistantAgent.load_component(json.loads(text))
    (loaded_memory,) = loaded._memory or []
    try:
        assert isinstance(loaded_memory, MemorySyncMemory)
        assert loaded_memory.dump_component().config == EVERY_SETTING
    finally:
        await memory.close()
        await loaded_memory.close()
