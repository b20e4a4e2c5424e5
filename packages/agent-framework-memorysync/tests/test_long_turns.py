"""A turn over 16,000 characters stores no fact from its cut sentence (issue 12, item 8)."""

from __future__ import annotations

from typing import Any

from memorysync_core import MAX_TEXT_CHARS
from shared.local_server import stored_memories

FILLER = "The quick brown fox jumps over the lazy dog again. "


def long_turn(early: str, fact: str = "I am allergic to peanuts.") -> str:
    """``early``, filler, then ``fact`` cut by the contract's 16,000-character limit."""
    count = (MAX_TEXT_CHARS - len(early) - 1 - len(fact)) // len(FILLER)
    prefix = early + " " + FILLER * count
    gap = MAX_TEXT_CHARS - len(prefix) - len(fact) + 5
    text = prefix + "z" * (gap - 1) + " " + fact + " " + FILLER * 300
    assert text[:MAX_TEXT_CHARS].endswith(fact[:-5])
    return text


def no_fragment(texts: list[str]) -> None:
    """The early fact is stored; nothing came out of the cut sentence."""
    assert "Lives in Lisbon" in texts
    assert not [t for t in texts if "allergic" in t.lower()], texts


async def test_a_run_with_a_long_turn_stores_no_fact_from_a_fragment(
    local_server: Any, provider_on: Any, kit: Any
) -> None:
    memory = provider_on(local_server)
    agent = kit.agent(kit.ScriptedChatClient(["Noted."]), memory)
    await agent.run(long_turn("I live in Lisbon."), session=agent.create_session())
    assert (await memory.flush()).all_delivered
    no_fragment([m["text"] for m in stored_memories(local_server, local_server.tenant_id, "alice")])
