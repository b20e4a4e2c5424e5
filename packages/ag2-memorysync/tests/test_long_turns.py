"""A turn over 16,000 characters is stored whole, in parts cut at sentence ends (issue 23)."""

from __future__ import annotations

from typing import Any

from autogen import UserProxyAgent

from shared.local_server import stored_history, stored_memories
from shared.long_turns import kept_whole, long_turn, no_fragment


def test_classic_capability_keeps_a_long_turn_whole(
    local_server: Any, make_capability: Any, kit: Any
) -> None:
    memory = make_capability(local_server)
    assistant = kit.scripted_agent("assistant", ["Noted."])
    user = UserProxyAgent("user", human_input_mode="NEVER", code_execution_config=False)
    memory.add_to_agent(assistant)
    said = long_turn("I live in Lisbon.")
    user.initiate_chat(assistant, message=said, max_turns=1, silent=True)
    assert memory.flush().all_delivered
    rows = stored_history(local_server, "local", "alice")
    kept_whole([r["content"] for r in rows if r["role"] == "user"], said)
    no_fragment([m["text"] for m in stored_memories(local_server, "local", "alice")])
