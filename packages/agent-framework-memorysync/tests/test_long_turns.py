"""A turn over 16,000 characters stores no fact from its cut sentence (issue 12, item 8)."""

from __future__ import annotations

from typing import Any

from shared.local_server import stored_memories
from shared.long_turns import long_turn, no_fragment


async def test_a_run_with_a_long_turn_stores_no_fact_from_a_fragment(
    local_server: Any, provider_on: Any, kit: Any
) -> None:
    memory = provider_on(local_server)
    agent = kit.agent(kit.ScriptedChatClient(["Noted."]), memory)
    await agent.run(long_turn("I live in Lisbon."), session=agent.create_session())
    assert (await memory.flush()).all_delivered
    no_fragment([m["text"] for m in stored_memories(local_server, local_server.tenant_id, "alice")])
