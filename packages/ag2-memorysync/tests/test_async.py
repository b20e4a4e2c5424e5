"""Async chats: recall never stalls the caller's event loop, and nothing deadlocks."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from autogen import UserProxyAgent

from memorysync_core import DEFAULT_CONTEXT_TEMPLATE
from shared.fake_server import Fault
from shared.timing import SLACK, release_when_held

TEMPLATE_HEAD = DEFAULT_CONTEXT_TEMPLATE.split("\n")[0]


def _user(**kwargs: Any) -> UserProxyAgent:
    kwargs.setdefault("human_input_mode", "NEVER")
    kwargs.setdefault("code_execution_config", False)
    return UserProxyAgent("user", **kwargs)


def test_a_initiate_chat_in_asyncio_run_keeps_the_callers_loop_running_during_recall(
    fake_server, make_capability, kit
):
    # The server holds the recall until a task on the caller's loop lets it answer
    # (shared/timing.py): had the recall blocked that loop, the 30 s budget would run
    # out first and the model would see no memory.
    fake_server.seed_memory("alice", "Lives in Lisbon")
    gate = threading.Event()
    fake_server.set_default("/v1/memory/recall", Fault.gate(gate))
    memory = make_capability(fake_server, recall_timeout=30.0, tenant_id="t")
    assistant = kit.model_agent("assistant")
    user = _user()
    memory.add_to_agent(assistant)
    memory.add_to_agent(user)

    async def main() -> None:
        opener = asyncio.create_task(release_when_held(fake_server, "/v1/memory/recall", gate))
        await user.a_initiate_chat(
            assistant, message="What should I see in Lisbon?", max_turns=1, silent=True
        )
        await opener

    with kit.scripted_model(assistant, ["The Alfama."]) as inputs:
        asyncio.run(main())

    assert "Lives in Lisbon" in inputs.last_user_text().split("\n\n")[0]
    assert inputs.last_user_text().startswith(TEMPLATE_HEAD)
    assert memory.flush().all_delivered
    said = [t["content"] for t in fake_server.history]
    assert said == ["What should I see in Lisbon?", "The Alfama."]
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
    assert elapsed < 0.3 + SLACK  # the server never answers
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
