"""The reply to a message never recalls facts extracted from that same message."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import httpx
from autogen import GroupChat, GroupChatManager, UserProxyAgent

from memorysync_core import DEFAULT_CONTEXT_TEMPLATE
from memorysync_core._sync.holds import HOLD_MARGIN
from shared.timing import SLACK

TEMPLATE_HEAD = DEFAULT_CONTEXT_TEMPLATE.split("\n")[0]
FACT = "I am allergic to peanuts and I live in Lisbon."


def _user(**kwargs: Any) -> UserProxyAgent:
    kwargs.setdefault("human_input_mode", "NEVER")
    kwargs.setdefault("code_execution_config", False)
    return UserProxyAgent("user", **kwargs)


def test_a_first_session_fact_is_never_recalled_into_the_reply_to_its_own_message(
    local_server, make_capability, kit
):
    # Twenty first sessions, half with the person's agent attached too (its send hook
    # captures then); before the fix, delivery raced the recall and often won.
    for round_ in range(20):
        memory = make_capability(local_server, user_id=f"user{round_}", session_id="monday")
        assistant = kit.model_agent("assistant")
        user = _user()
        memory.add_to_agent(assistant)
        if round_ % 2:
            memory.add_to_agent(user)
        with kit.scripted_model(assistant, ["Noted."]) as inputs:
            user.initiate_chat(assistant, message=FACT, max_turns=1, silent=True)
        assert memory.flush().all_delivered

        assert inputs.last_user_text() == FACT, f"round {round_}"
        # The fact was captured and extracted all the same.
        assert [m.text for m in memory.search("peanuts allergy")], f"round {round_}"


def test_the_first_turn_of_a_group_chat_is_not_recalled_into_its_first_reply(
    local_server, make_capability, kit
):
    for round_ in range(5):
        memory = make_capability(local_server, user_id=f"group{round_}")
        user = _user(max_consecutive_auto_reply=0)
        planner = kit.model_agent("planner")
        critic = kit.scripted_agent("critic", ["Looks fine."])
        for agent in (user, planner, critic):
            memory.add_to_agent(agent)
        chat = GroupChat(
            agents=[user, planner, critic],
            messages=[],
            max_round=3,
            speaker_selection_method="round_robin",
        )
        manager = GroupChatManager(chat, llm_config=False)
        with kit.scripted_model(planner, ["A plan."]) as inputs:
            user.initiate_chat(manager, message=FACT, silent=True)
        assert memory.flush().all_delivered

        assert inputs.calls, f"round {round_}"
        assert inputs.last_user_text(0) == FACT, f"round {round_}"


class _SeesAppend(httpx.AsyncBaseTransport):
    """Forwards to the embedded server; sets ``delivered`` when a transcript append arrives."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.delivered = threading.Event()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if request.url.path == "/v1/history/append":
            self.delivered.set()
        return response


def test_a_held_turn_that_prompts_no_reply_is_still_delivered_within_the_hold_bound(
    local_server, make_capability, kit
):
    watch = _SeesAppend(local_server.transport)
    memory = make_capability(local_server, transport=watch, recall_timeout=0.3)
    assistant = kit.model_agent("assistant")
    memory.add_to_agent(assistant)
    user = _user()
    started = time.monotonic()
    user.send(FACT, assistant, request_reply=False, silent=True)  # no reply, so no recall

    # Held at most recall_timeout + HOLD_MARGIN (1.3 s), then delivered without flush.
    assert watch.delivered.wait(timeout=10.0)
    assert time.monotonic() - started < 0.3 + HOLD_MARGIN + SLACK
    assert [t["content"] for t in kit.read_transcript(local_server, "alice", "s1")] == [FACT]


def test_in_async_chats_a_first_session_fact_is_never_recalled_into_its_own_reply(
    local_server, make_capability, kit
):
    for round_ in range(10):
        memory = make_capability(local_server, user_id=f"async{round_}")
        assistant = kit.model_agent("assistant")
        user = _user()
        memory.add_to_agent(assistant)
        memory.add_to_agent(user)

        async def chat(user: UserProxyAgent = user, assistant: Any = assistant) -> None:
            await user.a_initiate_chat(assistant, message=FACT, max_turns=1, silent=True)

        with kit.scripted_model(assistant, ["Noted."]) as inputs:
            asyncio.run(chat())
        assert memory.flush().all_delivered

        assert inputs.last_user_text() == FACT, f"round {round_}"
