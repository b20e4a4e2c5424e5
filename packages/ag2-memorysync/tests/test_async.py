"""Async chats: recall never stalls the caller's event loop, and nothing deadlocks."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

from autogen import UserProxyAgent

from memorysync_core import DEFAULT_CONTEXT_TEMPLATE
from shared.fake_server import Fault

TEMPLATE_HEAD = DEFAULT_CONTEXT_TEMPLATE.split("\n")[0]


def _user(**kwargs: Any) -> UserProxyAgent:
    kwargs.setdefault("human_input_mode", "NEVER")
    kwargs.setdefault("code_execution_config", False)
    return UserProxyAgent("user", **kwargs)


def test_a_initiate_chat_in_asyncio_run_keeps_the_callers_loop_ticking_during_a_slow_recall(
    local_server, make_capability, kit
):
    make_capability(local_server).save("I live in Lisbon.")
    slow = kit.SlowRecall(local_server.transport, delay=1.0)
    memory = make_capability(local_server, transport=slow, recall_timeout=3.0)
    assistant = kit.model_agent("assistant")
    user = _user()
    memory.add_to_agent(assistant)
    memory.add_to_agent(user)

    async def main() -> tuple[float, float]:
        ticks: list[float] = []
        stop = asyncio.Event()

        async def heartbeat() -> None:
            while not stop.is_set():
                ticks.append(time.monotonic())
                await asyncio.sleep(0.01)

        beat = asyncio.create_task(heartbeat())
        started = time.monotonic()
        await user.a_initiate_chat(
            assistant, message="What should I see in Lisbon?", max_turns=1, silent=True
        )
        elapsed = time.monotonic() - started
        stop.set()
        await beat
        gaps = [b - a for a, b in itertools.pairwise(ticks)]
        return elapsed, max(gaps)

    with kit.scripted_model(assistant, ["The Alfama."]) as inputs:
        elapsed, worst_gap = asyncio.run(main())

    assert elapsed >= 1.0  # the slow recall really was awaited...
    assert worst_gap < 0.1  # ...while the caller's loop kept running
    assert "Lisbon" in inputs.last_user_text().split("\n\n")[0]
    assert inputs.last_user_text().startswith(TEMPLATE_HEAD)
    assert memory.flush().all_delivered
    transcript = kit.read_transcript(local_server, "alice", "s1")
    assert [t["content"] for t in transcript] == ["What should I see in Lisbon?", "The Alfama."]
    assert all(TEMPLATE_HEAD not in m["content"] for m in assistant.chat_messages[user])


def test_a_slow_recall_in_an_async_chat_gives_up_at_the_budget(fake_server, make_capability, kit):
    fake_server.set_default("/v1/memory/recall", Fault.hang())
    memory = make_capability(fake_server, recall_timeout=0.3, tenant_id="t")
    assistant = kit.model_agent("assistant")
    memory.add_to_agent(assistant)

    async def main() -> float:
        started = time.monotonic()
        await _user().a_initiate_chat(
            assistant, message="Where do I live again?", max_turns=1, silent=True
        )
        return time.monotonic() - started

    with kit.scripted_model(assistant, ["No idea."]) as inputs:
        elapsed = asyncio.run(main())
    assert elapsed < 0.3 + 0.5
    assert inputs.last_user_text() == "Where do I live again?"
    assert len(inputs.calls) == 1  # the sync twin did not recall a second time


def test_a_sync_chat_started_inside_a_running_loop_completes(fake_server, make_capability, kit):
    fake_server.seed_memory("alice", "Lives in Lisbon")
    memory = make_capability(fake_server, tenant_id="t")
    assistant = kit.model_agent("assistant")
    memory.add_to_agent(assistant)

    async def main() -> None:
        # Blocking the caller's own loop is what a sync chat does; it must not deadlock.
        _user().initiate_chat(assistant, message="Where do I live again?", max_turns=1, silent=True)

    with kit.scripted_model(assistant, ["In Lisbon."]) as inputs:
        asyncio.run(main())
    assert "- Lives in Lisbon" in inputs.last_user_text()
