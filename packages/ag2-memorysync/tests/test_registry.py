"""The dedup bookkeeping is owned by capabilities: bounded, and released with them."""

from __future__ import annotations

import asyncio
import gc
import weakref
from typing import Any

import pytest
from autogen import ConversableAgent, UserProxyAgent

from ag2_memorysync import MemorySyncCapability, _registry
from ag2_memorysync._registry import MAX_RELAYS, Group
from memorysync_core._sync.loop import LOOP
from shared.local_server import stored_history


def registered_groups() -> int:
    """How many groups the registry holds (read under its lock)."""
    with _registry._groups_lock:
        return len(_registry._groups)


def _bot(name: str = "bot") -> ConversableAgent:
    return ConversableAgent(name, llm_config=False, human_input_mode="NEVER")


def _user(**kwargs: Any) -> UserProxyAgent:
    kwargs.setdefault("human_input_mode", "NEVER")
    kwargs.setdefault("code_execution_config", False)
    return UserProxyAgent("user", **kwargs)


def test_closing_a_thousand_capabilities_for_a_thousand_users_empties_the_registry(fake_server):
    before = registered_groups()
    capabilities = []
    for n in range(1000):
        capability = MemorySyncCapability(
            user_id=f"user-{n}", api_key="ms_t", base_url=fake_server.base_url, tenant_id="t"
        )
        capability.add_to_agent(_bot())
        capabilities.append(capability)
    assert registered_groups() == before + 1000

    for capability in capabilities:
        capability.close(timeout=1.0)
    assert registered_groups() == before


async def _after_queued_work() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


def test_capabilities_collected_without_close_release_their_group(fake_server):
    before = registered_groups()
    refs = []
    alive = []  # held until counted: the collector may run at any allocation
    for n in range(50):
        capability = MemorySyncCapability(
            user_id=f"gc-{n}", api_key="ms_t", base_url=fake_server.base_url, tenant_id="t"
        )
        capability.add_to_agent(_bot())
        refs.append(weakref.ref(capability))
        alive.append(capability)
    assert registered_groups() == before + 50
    del capability, alive
    # The warm-ups queued on the background loop hold their capability until they ran:
    # a coroutine queued after them finishes only once they have.
    LOOP.submit(_after_queued_work()).result(timeout=10)
    gc.collect()

    assert all(ref() is None for ref in refs)
    assert registered_groups() == before


def test_a_group_shared_by_two_capabilities_lives_until_the_last_one_closes(fake_server):
    before = registered_groups()
    kwargs: dict[str, Any] = {"api_key": "ms_t", "base_url": fake_server.base_url}
    first = MemorySyncCapability(user_id="alice", **kwargs)
    second = MemorySyncCapability(user_id="alice", **kwargs)
    assert registered_groups() == before + 1
    first.close()
    assert registered_groups() == before + 1
    second.close()
    assert registered_groups() == before


def test_closing_one_member_detaches_its_agents_so_the_other_still_captures_both_sides(
    local_server, make_capability, kit
):
    on_assistant = make_capability(local_server)
    on_user = make_capability(local_server)
    assistant = kit.scripted_agent("assistant", ["Noted.", "Noted again."])
    user = _user()
    on_assistant.add_to_agent(assistant)
    on_user.add_to_agent(user)
    user.initiate_chat(assistant, message="I live in Lisbon.", max_turns=1, silent=True)
    on_user.close()

    # The user's agent is no longer attached: the assistant's side captures its words.
    user.initiate_chat(assistant, message="I work in Porto.", max_turns=1, silent=True)
    assert on_assistant.flush().all_delivered
    stored = [(t["role"], t["content"]) for t in stored_history(local_server, "local", "alice")]
    # Two capabilities deliver through two queues: compare without their interleaving.
    assert sorted(stored) == sorted(
        [
            ("user", "I live in Lisbon."),
            ("assistant", "Noted."),
            ("user", "I work in Porto."),
            ("assistant", "Noted again."),
        ]
    )


def test_attaching_a_closed_capability_raises(fake_server):
    capability = MemorySyncCapability(
        user_id="alice", api_key="ms_t", base_url=fake_server.base_url
    )
    capability.close()
    with pytest.raises(RuntimeError, match="closed"):
        capability.add_to_agent(_bot())


def test_relay_bookkeeping_is_bounded_and_still_dedups_the_latest_relays():
    group = Group()
    first_member, second_member = object(), object()
    messages = [{"content": f"message {n}"} for n in range(5 * MAX_RELAYS)]
    for message in messages:
        assert group.first_sight_of_relay(message, first_member)
        assert not group.first_sight_of_relay(message, second_member)  # same utterance
    assert group.relays_remembered == MAX_RELAYS

    # A message object delivered again to a member that saw it is a new utterance.
    assert group.first_sight_of_relay(messages[-1], first_member)
    # Equal text in a different object is a different utterance.
    assert group.first_sight_of_relay({"content": "message 0"}, second_member)
