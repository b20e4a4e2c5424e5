"""Bad arguments name themselves; a long turn is stored whole, in parts (issues 12, 23)."""

from __future__ import annotations

from typing import Any

import pytest
from autogen_core.memory import MemoryContent, MemoryMimeType

from autogen_memorysync import MemorySyncMemory
from shared.local_server import stored_history, stored_memories
from shared.long_turns import kept_whole, long_turn, no_fragment


@pytest.fixture
async def memory(local_server: Any) -> Any:
    made = MemorySyncMemory(
        user_id="alice",
        api_key=local_server.api_key,
        base_url=local_server.base_url,
        transport=local_server.transport,
    )
    yield made
    await made.close()


async def test_query_none_is_a_type_error_naming_the_parameter(memory: MemorySyncMemory) -> None:
    with pytest.raises(TypeError, match=r"query must be .*got NoneType"):
        await memory.query(None)  # type: ignore[arg-type]


async def test_add_none_is_a_type_error_naming_the_parameter(memory: MemorySyncMemory) -> None:
    with pytest.raises(TypeError, match=r"content must be a MemoryContent, got NoneType"):
        await memory.add(None)  # type: ignore[arg-type]


async def test_add_of_json_content_raises_and_stores_nothing(
    memory: MemorySyncMemory, local_server: Any
) -> None:
    content = MemoryContent(content={"city": "Lisbon"}, mime_type=MemoryMimeType.JSON)
    with pytest.raises(TypeError, match=r"content\.content.*dict"):
        await memory.add(content)
    assert stored_memories(local_server, local_server.tenant_id, "alice") == []


async def test_a_long_turn_is_stored_whole_by_every_capture_path(
    memory: MemorySyncMemory, local_server: Any
) -> None:
    said, queued = long_turn("I live in Lisbon."), long_turn("I live in Lisbon, really.")
    await memory.add_turn_pair(said, "Noted.")
    assert memory.capture_exchange(queued, "Noted.")
    assert (await memory.flush()).all_delivered
    await memory.add(MemoryContent(content=long_turn("I work as a nurse."), mime_type="text/plain"))
    rows = [r for r in stored_history(local_server, local_server.tenant_id, "alice")]
    users = [r["content"] for r in rows if r["role"] == "user"]
    kept_whole(users[: len(users) // 2], said)
    kept_whole(users[len(users) // 2 :], queued)
    stored = stored_memories(local_server, local_server.tenant_id, "alice")
    no_fragment([row["text"] for row in stored])
    assert "Works as a nurse" in [row["text"] for row in stored]


async def test_clear_erases_a_non_ascii_user_on_memorysync_local(local_server: Any) -> None:
    memory = MemorySyncMemory(
        user_id="josé",
        api_key=local_server.api_key,
        base_url=local_server.base_url,
        transport=local_server.transport,
    )
    try:
        await memory.add_turn_pair("I live in Lisbon.", "Noted.")
        assert stored_memories(local_server, local_server.tenant_id, "josé")
        await memory.clear()
        assert stored_memories(local_server, local_server.tenant_id, "josé") == []
    finally:
        await memory.close()
