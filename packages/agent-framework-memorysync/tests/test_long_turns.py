"""A turn over 16,000 characters is stored whole, in parts cut at sentence ends (issue 23)."""

from __future__ import annotations

from typing import Any

from shared.local_server import stored_history, stored_memories
from shared.long_turns import kept_whole, long_turn, no_fragment


async def test_a_run_with_a_long_turn_stores_it_whole(
    local_server: Any, provider_on: Any, kit: Any
) -> None:
    memory = provider_on(local_server)
    agent = kit.agent(kit.ScriptedChatClient(["Noted."]), memory)
    said = long_turn("I live in Lisbon.")
    await agent.run(said, session=agent.create_session())
    assert (await memory.flush()).all_delivered
    rows = stored_history(local_server, local_server.tenant_id, "alice")
    kept_whole([r["content"] for r in rows if r["role"] == "user"], said)
    no_fragment([m["text"] for m in stored_memories(local_server, local_server.tenant_id, "alice")])
