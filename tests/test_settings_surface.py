"""One settings surface: every adapter takes the core's settings and reads them the same."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import memorysync_local
from ag2_memorysync import MemorySyncCapability
from ag2_memorysync.v1 import MemorySyncMiddleware
from agent_framework_memorysync import MemorySyncContextProvider
from autogen_memorysync import MemorySyncMemory
from memorysync_core import SETTING_DEFAULTS, AdapterSettings

EVERY_SETTING: dict[str, Any] = {
    "session_id": "support-chat",
    "top_k": 7,
    "recall_timeout": 0.8,
    "min_prompt_chars": 3,
    "context_template": "Known facts:\n{context}",
    "clear_scope": "user",
    "request_timeout": 4.5,
    "project_id": "proj_123",
    "tenant_id": "tenant-9",
    "min_score": 0.4,
    "max_context_chars": 900,
    "transcript": False,
    "said_template": " (said {date})",
}
# The outbox is a file: test_every_async_adapter_keeps_its_turns_in_the_outbox gives one.
assert set(EVERY_SETTING) | {"api_key", "base_url", "transport", "outbox"} == set(SETTING_DEFAULTS)

ADAPTERS: dict[str, Callable[..., Any]] = {
    "autogen": MemorySyncMemory,
    "ag2": MemorySyncCapability,
    "ag2-v1": MemorySyncMiddleware,
    "agent-framework": MemorySyncContextProvider,
}


@pytest.fixture
def server() -> Any:
    with memorysync_local.embedded() as srv:
        yield srv


def connection(server: Any) -> dict[str, Any]:
    return {"api_key": server.api_key, "base_url": server.base_url, "transport": server.transport}


@pytest.mark.parametrize("name", ["autogen", "ag2-v1", "agent-framework"])
async def test_every_async_adapter_keeps_its_turns_in_the_outbox(
    name: str, server: Any, tmp_path: Any
) -> None:
    path = str(tmp_path / "outbox.db")
    adapter = ADAPTERS[name](user_id="alice", outbox=path, **connection(server))
    try:
        assert adapter.settings.outbox == path
        assert adapter._kit.outbox is not None
        assert adapter._kit.outbox.path.name == "outbox.db"
    finally:
        await _close(adapter)


@pytest.mark.parametrize("name", ADAPTERS)
async def test_every_adapter_takes_every_setting_and_exposes_it(name: str, server: Any) -> None:
    adapter = ADAPTERS[name](user_id="alice", **EVERY_SETTING, **connection(server))
    try:
        for setting, value in EVERY_SETTING.items():
            assert getattr(adapter.settings, setting) == value, (name, setting)
        assert adapter.settings.api_key == server.api_key
        assert server.api_key not in repr(adapter.settings)
    finally:
        await _close(adapter)


@pytest.mark.parametrize("name", ADAPTERS)
async def test_every_adapter_refuses_an_unknown_setting_by_name(name: str) -> None:
    with pytest.raises(TypeError, match="top_kk"):
        ADAPTERS[name](user_id="alice", api_key="ms_x", top_kk=3)


@pytest.mark.parametrize("name", ADAPTERS)
async def test_settings_move_from_one_framework_to_another(name: str, server: Any) -> None:
    origin = AdapterSettings.build(
        surface="autogen", user_id="alice", top_k=2, **connection(server)
    )
    adapter = ADAPTERS[name](settings=origin, session_id="friday")
    try:
        assert (adapter.settings.user_id, adapter.settings.top_k) == ("alice", 2)
        assert adapter.settings.session_id == "friday"
    finally:
        await _close(adapter)


@pytest.mark.parametrize("name", ADAPTERS)
def test_user_id_is_required_unless_settings_carry_one(name: str) -> None:
    # The signature says ``str | None`` only so that ``settings`` can supply the user.
    with pytest.raises(ValueError, match="user_id is required"):
        ADAPTERS[name](api_key="ms_x")


async def _close(adapter: Any) -> None:
    if isinstance(adapter, MemorySyncCapability):
        adapter.close()
    elif isinstance(adapter, MemorySyncMiddleware):
        await adapter.aclose()
    else:
        await adapter.close()
