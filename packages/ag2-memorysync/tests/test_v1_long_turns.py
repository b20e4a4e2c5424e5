"""A turn over 16,000 characters is stored whole, in parts, through ag2 1.x (issue 23)."""

from __future__ import annotations

from typing import Any

import pytest

from shared.local_server import stored_history, stored_memories

pytest.importorskip("ag2.middleware", reason="ag2 1.x is not installed (AG2-classic session)")

from ag2 import Agent
from ag2.testing import TestConfig

from ag2_memorysync.v1 import MemorySyncMiddleware
from shared.long_turns import kept_whole, long_turn, no_fragment


async def test_v1_middleware_keeps_a_long_turn_whole(served_local_server: Any) -> None:
    server = served_local_server
    memory = MemorySyncMiddleware(api_key=server.api_key, base_url=server.base_url, user_id="ana")
    agent = Agent("assistant", "You help.", config=TestConfig("Noted!"), middleware=[memory])
    said = long_turn("I live in Lisbon.")
    await agent.ask(said)
    assert (await memory.aclose()).all_delivered
    rows = stored_history(server, server.tenant_id, "ana")
    kept_whole([r["content"] for r in rows if r["role"] == "user"], said)
    no_fragment([m["text"] for m in stored_memories(server, server.tenant_id, "ana")])
