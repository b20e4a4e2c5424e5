"""Ids that are awkward in a URL path reach the right user against memorysync-local."""

from __future__ import annotations

from typing import Any

import pytest

from memorysync_core import MemorySyncAPI


@pytest.mark.parametrize("user_id", [".", "..", "a/../b", "a/b", "50%", "x y", "josé"])
async def test_list_memories_reaches_a_user_whose_id_is_awkward_in_a_path(
    make_local_server: Any, user_id: str
) -> None:
    server = make_local_server(served=True)
    api = MemorySyncAPI(server.api_key, base_url=server.base_url)
    try:
        await api.add_turn(user_id=user_id, text="I live in Oslo.", source="test")
        await api.add_turn(user_id="neighbour", text="I live in Rome.", source="test")
        listed = await api.list_memories(user_id=user_id)
        assert [memory["text"] for memory in listed] == ["Lives in Oslo"]
    finally:
        await api.aclose()
