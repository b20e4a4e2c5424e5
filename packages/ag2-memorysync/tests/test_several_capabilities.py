"""Several capabilities on one agent: each works, attaching is atomic, closed ones go quiet."""

from __future__ import annotations

from typing import Any

import pytest
from autogen import UserProxyAgent

from memorysync_core import DEFAULT_CONTEXT_TEMPLATE

TEMPLATE_HEAD = DEFAULT_CONTEXT_TEMPLATE.split("\n")[0]


def _user(**kwargs: Any) -> UserProxyAgent:
    kwargs.setdefault("human_input_mode", "NEVER")
    kwargs.setdefault("code_execution_config", False)
    return UserProxyAgent("user", **kwargs)


def test_a_capability_attached_after_another_was_closed_recalls_and_the_closed_one_is_silent(
    local_server, make_capability, kit
):
    make_capability(local_server, user_id="bob").save("I am allergic to peanuts.")
    alice = make_capability(local_server, user_id="alice")
    assistant = kit.model_agent("assistant")
    alice.add_to_agent(assistant)
    with kit.scripted_model(assistant, ["Hello Alice."]):
        _user().initiate_chat(assistant, message="Good morning to you.", max_turns=1, silent=True)
    alice.close()

    bob = make_capability(local_server, user_id="bob")
    bob.add_to_agent(assistant)  # raised AssertionError from register_hook before
    with kit.scripted_model(assistant, ["Try fruit."]) as inputs:
        _user().initiate_chat(
            assistant, message="Are peanuts a good snack for me?", max_turns=1, silent=True
        )
    assert bob.flush().all_delivered

    shown = inputs.last_user_text()
    assert shown.count(TEMPLATE_HEAD) == 1  # bob's block; the closed capability adds none
    assert "Allergic to peanuts" in shown
    assert shown.endswith("\n\nAre peanuts a good snack for me?")
    # The closed capability captured nothing of bob's chat; bob's captured all of it.
    assert [t["content"] for t in kit.read_transcript(local_server, "alice", "s1")] == [
        "Good morning to you.",
        "Hello Alice.",
    ]
    assert [t["content"] for t in kit.read_transcript(local_server, "bob", "s1")] == [
        "Are peanuts a good snack for me?",
        "Try fruit.",
    ]


def test_two_live_capabilities_of_different_users_each_add_their_block_and_capture(
    local_server, make_capability, kit
):
    make_capability(local_server, user_id="alice").save("I am allergic to peanuts.")
    make_capability(local_server, user_id="team").save("I live in Lisbon.")
    personal = make_capability(local_server, user_id="alice")
    shared = make_capability(local_server, user_id="team")
    assistant = kit.model_agent("assistant")
    personal.add_to_agent(assistant)
    shared.add_to_agent(assistant)
    user = _user()
    with kit.scripted_model(assistant, ["Try fruit in Lisbon."]) as inputs:
        user.initiate_chat(
            assistant,
            message="Are peanuts a good snack for me in Lisbon?",
            max_turns=1,
            silent=True,
        )
    assert personal.flush().all_delivered
    assert shared.flush().all_delivered

    shown = inputs.last_user_text()
    assert shown.count(TEMPLATE_HEAD) == 2
    # Attaching order: the first capability's block comes first.
    assert shown.index("Allergic to peanuts") < shown.index("Lives in Lisbon")
    assert shown.endswith("\n\nAre peanuts a good snack for me in Lisbon?")
    for user_id in ("alice", "team"):
        assert [t["content"] for t in kit.read_transcript(local_server, user_id, "s1")] == [
            "Are peanuts a good snack for me in Lisbon?",
            "Try fruit in Lisbon.",
        ]
    # The stored chat holds neither block.
    assert all(TEMPLATE_HEAD not in str(m["content"]) for m in assistant.chat_messages[user])


def test_a_second_capability_of_the_same_user_and_session_stands_by_then_takes_over(
    local_server, make_capability, kit
):
    make_capability(local_server).save("I am allergic to peanuts.")
    first = make_capability(local_server)
    second = make_capability(local_server)
    assistant = kit.model_agent("assistant")
    first.add_to_agent(assistant)
    second.add_to_agent(assistant)
    with kit.scripted_model(assistant, ["Try fruit.", "Try apples."]) as inputs:
        _user().initiate_chat(
            assistant, message="Are peanuts a good snack for me?", max_turns=1, silent=True
        )
        assert first.flush().all_delivered
        first.close()
        _user().initiate_chat(
            assistant, message="Is peanut butter fine for me?", max_turns=1, silent=True
        )
    assert second.flush().all_delivered

    # One block per reply, whichever capability acted.
    assert [inputs.last_user_text(i).count(TEMPLATE_HEAD) for i in (0, 1)] == [1, 1]
    assert "Allergic to peanuts" in inputs.last_user_text(1)
    # Each utterance stored once, before and after the hand-over.
    assert [t["content"] for t in kit.read_transcript(local_server, "alice", "s1")] == [
        "Are peanuts a good snack for me?",
        "Try fruit.",
        "Is peanut butter fine for me?",
        "Try apples.",
    ]


def test_attaching_is_atomic_an_agent_missing_a_hook_is_left_untouched(
    fake_server, make_capability, kit
):
    memory = make_capability(fake_server)
    assistant = kit.model_agent("assistant")
    del assistant.hook_lists["process_all_messages_before_reply"]
    send_hooks = list(assistant.hook_lists["process_message_before_send"])
    replies = list(assistant._reply_func_list)
    receive = assistant._process_received_message

    with pytest.raises(TypeError, match="process_all_messages_before_reply"):
        memory.add_to_agent(assistant)

    assert assistant.hook_lists["process_message_before_send"] == send_hooks
    assert assistant._reply_func_list == replies
    assert assistant._process_received_message == receive
    # Nothing half-attached: a later attach to a proper agent still works.
    other = kit.model_agent("other")
    memory.add_to_agent(other)
    assert len(other._reply_func_list) == len(kit.model_agent("x")._reply_func_list) + 2


def test_a_closed_capabilitys_hooks_do_no_work(fake_server, make_capability, kit):
    fake_server.seed_memory("alice", "Lives in Lisbon")
    memory = make_capability(fake_server)
    assistant = kit.model_agent("assistant")
    memory.add_to_agent(assistant)
    memory.close()
    fake_server.requests.clear()

    with kit.scripted_model(assistant, ["Hello."]) as inputs:
        _user().initiate_chat(assistant, message="Where do I live again?", max_turns=1, silent=True)

    assert inputs.last_user_text() == "Where do I live again?"
    assert fake_server.requests == []
