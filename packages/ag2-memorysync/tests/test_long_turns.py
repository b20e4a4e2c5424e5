"""A turn over 16,000 characters stores no fact from its cut sentence (issue 12, item 8)."""

from __future__ import annotations

from typing import Any

from autogen import UserProxyAgent

from shared.local_server import stored_memories
from shared.long_turns import long_turn, no_fragment


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
