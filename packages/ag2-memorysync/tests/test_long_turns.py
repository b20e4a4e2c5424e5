"""A turn over 16,000 characters stores no fact from its cut sentence (issue 12, item 8)."""

from __future__ import annotations

from typing import Any

from autogen import UserProxyAgent

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


def test_classic_capability_stores_no_fact_from_a_fragment(
    local_server: Any, make_capability: Any, kit: Any
) -> None:
    memory = make_capability(local_server)
    assistant = kit.scripted_agent("assistant", ["Noted."])
    user = UserProxyAgent("user", human_input_mode="NEVER", code_execution_config=False)
    memory.add_to_agent(assistant)
    user.initiate_chat(assistant, message=long_turn("I live in Lisbon."), max_turns=1, silent=True)
    assert memory.flush().all_delivered
    no_fragment([m["text"] for m in stored_memories(local_server, "local", "alice")])
