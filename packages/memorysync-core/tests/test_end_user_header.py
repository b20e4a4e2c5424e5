"""User ids that cannot travel raw in ``X-End-User-ID`` (issue 12, item 7).

Against a server that advertises the encoding (memorysync-local), every route works for
them; against one that does not, the call raises a typed error before the write or the
delete is sent, so nothing can land on another user.
"""

from __future__ import annotations

from typing import Any

import pytest

from memorysync_core import MemorySyncAPI, UserMemory
from memorysync_core.errors import MemorySyncError, UnsupportedUserIdError
from shared.fake_server import FakeServer, Fault

from .conftest import API_KEY

AWKWARD = ["josé", "用户", "a/b", "x y", "emoji 😀", " padded "]


@pytest.mark.parametrize("user_id", AWKWARD)
async def test_write_list_search_and_forget_work_against_memorysync_local(
    make_local_server: Any, user_id: str
) -> None:
    server = make_local_server(served=True)
    api = MemorySyncAPI(server.api_key, base_url=server.base_url)
    try:
        added = await api.add_memory(user_id=user_id, text="I live in Oslo.")
        await api.add_memory(user_id="neighbour", text="I live in Rome.")
        # The header route and the path route address the same user.
        listed = await api.list_memories(user_id=user_id)
        assert [m["text"] for m in listed] == ["Lives in Oslo"]
        assert listed[0]["memory_id"] == added["id"]
        found = await api.query(user_id=user_id, prompt="Where do I live?")
        assert [m["value"] for m in found["memories"]] == ["Lives in Oslo"]
        assert await api.forget(user_id=user_id, memory_ids=[added["id"]]) == [added["id"]]
        assert await api.list_memories(user_id=user_id) == []
        assert [m["text"] for m in await api.list_memories(user_id="neighbour")] == [
            "Lives in Rome"
        ]
    finally:
        await api.aclose()


async def test_user_memory_save_and_clear_work_for_a_non_ascii_user(
    make_local_server: Any,
) -> None:
    server = make_local_server(served=True)
    api = MemorySyncAPI(server.api_key, base_url=server.base_url)
    memory = UserMemory(api, user_id="josé", surface="test", session_id="s")
    try:
        assert (await memory.save("I live in Oslo.")).kept
        assert [m.text for m in await memory.search("Where do I live?")] == ["Lives in Oslo"]
        cleared = await memory.clear("user")
        assert len(cleared.deleted_memory_ids) == 1
        assert await api.list_memories(user_id="josé") == []
    finally:
        await api.aclose()


async def test_the_encoded_form_never_reaches_a_literal_user(make_local_server: Any) -> None:
    server = make_local_server(served=True)
    api = MemorySyncAPI(server.api_key, base_url=server.base_url)
    try:
        await api.add_memory(user_id="josé", text="I live in Oslo.")
        # The ASCII id that looks like the encoding is another user, sent raw.
        assert await api.list_memories(user_id="jos%C3%A9") == []
        assert await api.forget(user_id="jos%C3%A9", filters={"source": "memorysync-core"}) == []
        assert len(await api.list_memories(user_id="josé")) == 1
    finally:
        await api.aclose()


@pytest.mark.parametrize("health", [None, Fault.json({"status": "ok"})])
@pytest.mark.parametrize("user_id", ["josé", "用户", "tab\there", " padded"])
async def test_a_server_without_the_capability_gets_a_typed_error_and_nothing_written(
    fake_server: FakeServer, health: Fault | None, user_id: str
) -> None:
    if health is not None:
        fake_server.set_default("/health", health)
    fake_server.seed_memory(user_id, "Lives in Oslo")
    api = MemorySyncAPI(API_KEY, base_url=fake_server.base_url)
    try:
        with pytest.raises(UnsupportedUserIdError) as added:
            await api.add_memory(user_id=user_id, text="I live in Oslo.")
        with pytest.raises(UnsupportedUserIdError):
            await api.forget(user_id=user_id, memory_ids=[1])
        memory = UserMemory(api, user_id=user_id, surface="test", session_id="s")
        with pytest.raises(UnsupportedUserIdError):
            await memory.clear("user")
    finally:
        await api.aclose()
    assert isinstance(added.value, MemorySyncError)
    assert isinstance(added.value, ValueError)
    assert repr(user_id) in str(added.value)
    assert "X-End-User-ID" in str(added.value)
    assert fake_server.requests_to("/memory/add") == []
    assert fake_server.requests_to("/memory/forget") == []
    assert [m["text"] for m in fake_server.memories] == ["Lives in Oslo"]


async def test_ascii_ids_go_raw_without_asking_the_server(fake_server: FakeServer) -> None:
    api = MemorySyncAPI(API_KEY, base_url=fake_server.base_url)
    try:
        await api.add_memory(user_id="a/b x%C3%A9", text="I live in Oslo.")
    finally:
        await api.aclose()
    (sent,) = fake_server.requests_to("/memory/add")
    assert sent.headers["x-end-user-id"] == "a/b x%C3%A9"
    assert "x-end-user-id-encoding" not in sent.headers
    assert fake_server.requests_to("/health") == []
