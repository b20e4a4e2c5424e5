"""Public names, constructor validation, the settings surface, repr and the key."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

import pytest
from agent_framework import ContextProvider

import agent_framework_memorysync
from agent_framework_memorysync import MemorySyncContextProvider
from memorysync_core import AdapterSettings

KEY = "ms_test_secret_key_do_not_leak"


def _make(**overrides: Any) -> MemorySyncContextProvider:
    settings: dict[str, Any] = {
        "user_id": "customer-42",
        "api_key": KEY,
        "base_url": "http://memorysync.test",
    }
    settings.update(overrides)
    return MemorySyncContextProvider(**settings)


def test_public_names_are_exactly_the_documented_ones() -> None:
    assert agent_framework_memorysync.__all__ == [
        "MemorySyncContextProvider",
        "__version__",
        "create_memory_tools",
    ]
    assert agent_framework_memorysync.__version__ == version("agent-framework-memorysync")


def test_it_is_a_context_provider_with_the_published_scope_and_source() -> None:
    provider = _make()
    assert isinstance(provider, ContextProvider)
    assert provider.source_id == "memorysync"
    assert MemorySyncContextProvider.after_run_once_per_turn is True
    memory = provider.memory_for("trip-42")
    assert memory.scope == "agent-framework::trip-42"
    assert memory.api.source == "agent-framework"
    assert provider.memory_for(None).scope == "agent-framework::default"


def test_the_settings_are_the_cores_one_surface() -> None:
    provider = _make(
        session_id="support",
        top_k=7,
        recall_timeout=0.8,
        min_prompt_chars=3,
        context_template="Known facts:\n{context}",
        clear_scope="user",
        request_timeout=4.5,
        project_id="proj_123",
        tenant_id="tenant-9",
        min_score=0.4,
        max_context_chars=900,
    )
    settings = provider.settings
    assert isinstance(settings, AdapterSettings)
    assert (settings.surface, settings.user_id, settings.session_id) == (
        "agent-framework",
        "customer-42",
        "support",
    )
    assert (settings.top_k, settings.recall_timeout, settings.min_prompt_chars) == (7, 0.8, 3)
    assert (settings.clear_scope, settings.request_timeout) == ("user", 4.5)
    assert (settings.project_id, settings.tenant_id) == ("proj_123", "tenant-9")
    assert settings.renderer.template == "Known facts:\n{context}"
    assert (settings.renderer.min_score, settings.renderer.max_context_chars) == (0.4, 900)
    assert provider.session_id == "support"
    assert provider.memory_for("another").scope == "agent-framework::support"  # fixed wins


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"user_id": ""}, "user_id"),
        ({"session_id": " "}, "session_id"),
        ({"top_k": 0}, "top_k"),
        ({"recall_timeout": float("nan")}, "recall_timeout"),
        ({"request_timeout": 0}, "request_timeout"),
        ({"min_prompt_chars": -1}, "min_prompt_chars"),
        ({"clear_scope": "everything"}, "clear_scope"),
        ({"context_template": "no placeholder here"}, "context_template"),
        ({"source_id": ""}, "source_id"),
    ],
)
def test_bad_settings_raise_a_value_error_naming_the_parameter(
    overrides: dict[str, Any], named: str
) -> None:
    with pytest.raises(ValueError, match=named):
        _make(**overrides)


async def test_the_key_never_shows(caplog: pytest.LogCaptureFixture) -> None:
    provider = _make(session_id="s")
    shown = " ".join([repr(provider), repr(provider.settings), repr(provider.memory_for())])
    assert KEY not in shown
    assert "customer-42" in repr(provider)
    with pytest.raises(ValueError, match="scope") as raised:
        await provider.clear("everything")  # type: ignore[arg-type]
    assert KEY not in str(raised.value)
    await provider.close()


async def test_save_refuses_empty_text() -> None:
    provider = _make()
    with pytest.raises(ValueError, match="text"):
        await provider.save("   ")
    await provider.close()
