"""The transcript reads as the chat was said: real chats, memorysync-local over real HTTP.

Each test compares ``/v1/history/list`` with the chat AG2 stored, element by element,
with the speaker's role. The capabilities deliver through separate queues (one per
agent) and person turns are held for recall, so arrival order is not the spoken order;
``seq`` (the capture time) is what puts the transcript in order. The server applies
the contract's "same seq + role + content is one turn" rule literally.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from autogen import ConversableAgent, GroupChat, GroupChatManager

from shared.fake_server import Fault
from shared.faults import FaultProxy, outage

FIRST = "I live in Porto and I'm allergic to shellfish."
SECOND = "I also have a dog named Rex."
REPLIES = ["Reply number 1.", "Reply number 2."]


def _listed(server: Any, kit: Any) -> list[tuple[str, str, str | None]]:
    """The transcript as ``/v1/history/list`` returns it; every turn carries its seq."""
    items = kit.read_transcript(server, "alice", "s1")
    seqs = [item["seq"] for item in items]
    assert all(isinstance(seq, int) for seq in seqs)
    assert seqs == sorted(set(seqs))  # listed by capture order, no seq shared
    return kit.said(items)


def _two_party_chat(
    agent: ConversableAgent, partner: ConversableAgent
) -> list[tuple[str, str, str]]:
    """(role, content, speaker) of the chat as ``agent`` stored it; ``partner`` is the person."""
    return [
        ("user" if m["name"] == partner.name else "assistant", m["content"], m["name"])
        for m in agent.chat_messages[partner]
    ]


def _person(kit: Any, before_second: Any = None) -> ConversableAgent:
    """The person's agent: says FIRST (initiate_chat), then SECOND, then stops."""
    person = kit.scripted_agent("person", [SECOND], human_input_mode="TERMINATE")
    if before_second is not None:

        def hook(recipient: Any, messages: Any = None, sender: Any = None, config: Any = None):
            before_second()
            return False, None  # the scripted reply (SECOND) follows

        person.register_reply(lambda _sender: True, hook, position=0)
    return person


def _capabilities_on_both(make_capability: Any, target: Any, person: Any, bot: Any) -> list[Any]:
    """One capability on each agent, same user and session: two delivery queues."""
    on_person = make_capability(target, api_key=target.api_key)
    on_bot = make_capability(target, api_key=target.api_key)
    on_person.add_to_agent(person)
    on_bot.add_to_agent(bot)
    return [on_person, on_bot]


@pytest.fixture
def served(make_local_server: Any) -> Any:
    return make_local_server(served=True)


@pytest.mark.parametrize("replies_from", ["reply functions", "a model"])
def test_two_rounds_with_the_capability_on_both_agents_list_in_the_order_said(
    served, make_capability, kit, replies_from
):
    person = _person(kit)
    if replies_from == "a model":
        bot = kit.model_agent("assistant")
    else:
        bot = kit.scripted_agent("assistant", REPLIES)
    capabilities = _capabilities_on_both(make_capability, served, person, bot)

    if replies_from == "a model":
        with kit.scripted_model(bot, REPLIES):
            person.initiate_chat(bot, message=FIRST, max_turns=2, silent=True)
    else:
        person.initiate_chat(bot, message=FIRST, max_turns=2, silent=True)
    for capability in capabilities:
        assert capability.flush().all_delivered

    stored = _two_party_chat(bot, person)
    assert [content for _, content, _ in stored] == [FIRST, REPLIES[0], SECOND, REPLIES[1]]
    assert _listed(served, kit) == stored


def test_a_three_agent_group_chat_lists_in_the_order_said(served, make_capability, kit):
    person = kit.scripted_agent("person", ["Thanks, both of you."], human_input_mode="TERMINATE")
    planner = kit.model_agent("planner")
    critic = kit.scripted_agent("critic", ["Looks fine to me.", "Agreed."])
    capabilities = []
    for agent in (person, planner, critic):  # one capability per agent: three queues
        capability = make_capability(served, api_key=served.api_key)
        capability.add_to_agent(agent)
        capabilities.append(capability)
    chat = GroupChat(
        agents=[person, planner, critic],
        messages=[],
        max_round=6,
        speaker_selection_method="round_robin",
    )
    manager = GroupChatManager(chat, llm_config=False)
    with kit.scripted_model(planner, ["A plan: Porto on Friday.", "Friday it is."]):
        person.initiate_chat(manager, message=FIRST, silent=True)
    for capability in capabilities:
        assert capability.flush().all_delivered

    stored = [
        ("user" if m["name"] == person.name else "assistant", m["content"], m["name"])
        for m in chat.messages
        if m.get("content")
    ]
    assert len(stored) >= 5
    assert {name for _, _, name in stored} == {"person", "planner", "critic"}
    assert _listed(served, kit) == stored


@pytest.fixture
def proxy(served: Any) -> Iterator[FaultProxy]:
    with FaultProxy(served) as fault_proxy:
        yield fault_proxy


def test_two_rounds_with_a_three_second_outage_in_the_middle_list_in_the_order_said(
    served, proxy, make_capability, kit
):
    back = threading.Event()

    def outage_for_three_seconds() -> None:
        end = outage(proxy, Fault.status(503))
        timer = threading.Timer(3.0, lambda: (end(), back.set()))
        timer.daemon = True
        timer.start()

    # The outage starts as the person is about to say SECOND: the first round may be
    # in flight or held, the second round is captured while nothing gets through.
    person = _person(kit, before_second=outage_for_three_seconds)
    bot = kit.model_agent("assistant")
    through_proxy = SimpleNamespace(base_url=proxy.base_url, api_key=served.api_key)
    capabilities = _capabilities_on_both(make_capability, through_proxy, person, bot)

    with kit.scripted_model(bot, REPLIES):
        person.initiate_chat(bot, message=FIRST, max_turns=2, silent=True)
    assert not back.is_set()  # the chat did not wait for the outage
    for capability in capabilities:
        assert capability.flush(timeout=15.0).all_delivered
    assert back.is_set()

    stored = _two_party_chat(bot, person)
    assert [content for _, content, _ in stored] == [FIRST, REPLIES[0], SECOND, REPLIES[1]]
    assert _listed(served, kit) == stored
    assert len(proxy.requests_to("/v1/history/append")) > 2  # refused, then retried


def test_flush_after_a_wrong_key_reports_the_turns_as_refused(served, make_capability, kit, caplog):
    memory = make_capability(served, api_key="ms_wrong_key_0000")
    bot = kit.scripted_agent("assistant", REPLIES)
    person = _person(kit)
    memory.add_to_agent(bot)
    memory.add_to_agent(person)
    with caplog.at_level(logging.DEBUG, logger="memorysync.delivery"):
        person.initiate_chat(bot, message=FIRST, max_turns=1, silent=True)
        report = memory.flush()

    assert report.delivered == 0
    assert report.refused == 2
    assert report.pending == 0
    assert not report.all_delivered
    assert len(report.reasons) == 1
    assert "AuthError (status 401)" in report.reasons[0]
    assert "check MEMORYSYNC_API_KEY" in report.reasons[0]
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1
    assert "check MEMORYSYNC_API_KEY" in errors[0].getMessage()
    assert kit.read_transcript(served, "alice", "s1") == []
