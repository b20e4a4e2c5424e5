"""Every utterance stored once, with the speaker's role; tool traffic never stored."""

from __future__ import annotations

from typing import Any

from autogen import ConversableAgent, GroupChat, GroupChatManager, UserProxyAgent

from shared.local_server import stored_history


def _user(name: str = "user", **kwargs: Any) -> UserProxyAgent:
    kwargs.setdefault("human_input_mode", "NEVER")
    kwargs.setdefault("code_execution_config", False)
    return UserProxyAgent(name, **kwargs)


def _chat_view(agent: ConversableAgent, partner: ConversableAgent) -> list[tuple[str, str]]:
    """(role as the person/assistant, content) of the stored chat, from the assistant's side."""
    return [
        ("user" if m["name"] == partner.name else "assistant", m["content"])
        for m in agent.chat_messages[partner]
        if m.get("content")
    ]


def test_both_sides_attached_store_each_utterance_once_with_the_speakers_role(
    local_server, make_capability, kit
):
    memory = make_capability(local_server)
    assistant = kit.scripted_agent("assistant", ["Noted, Lisbon.", "Vegetarian, got it."])
    user = kit.scripted_agent("user", ["I am vegetarian."], human_input_mode="TERMINATE")
    # A TERMINATE-mode agent without a model speaks for a person.
    memory.add_to_agent(assistant)
    memory.add_to_agent(user)

    user.initiate_chat(assistant, message="I live in Lisbon.", max_turns=2, silent=True)
    assert memory.flush().all_delivered

    stored = kit.said(kit.read_transcript(local_server, "alice", "s1"))
    expected = [
        (role, text, "user" if role == "user" else "assistant")
        for role, text in _chat_view(assistant, user)
    ]
    assert stored == expected
    assert [role for role, _, _ in stored] == ["user", "assistant", "user", "assistant"]
    assert len(stored_history(local_server, "local", "alice")) == 4


def test_attaching_only_the_assistant_stores_the_same_rows(local_server, make_capability, kit):
    memory = make_capability(local_server)
    assistant = kit.scripted_agent("assistant", ["Noted."])
    user = _user()
    memory.add_to_agent(assistant)

    user.initiate_chat(assistant, message="I live in Lisbon.", max_turns=1, silent=True)
    assert memory.flush().all_delivered

    stored = kit.said(kit.read_transcript(local_server, "alice", "s1"))
    assert stored == [("user", "I live in Lisbon.", "user"), ("assistant", "Noted.", "assistant")]


def test_a_repeated_sentence_is_stored_twice(local_server, make_capability, kit):
    memory = make_capability(local_server)
    assistant = kit.scripted_agent("assistant", ["Sure.", "Sure."])
    user = kit.scripted_agent("user", ["Book a window seat."], human_input_mode="TERMINATE")
    memory.add_to_agent(assistant)
    memory.add_to_agent(user)

    user.initiate_chat(assistant, message="Book a window seat.", max_turns=2, silent=True)
    assert memory.flush().all_delivered

    stored = kit.said(kit.read_transcript(local_server, "alice", "s1"))
    assert stored.count(("user", "Book a window seat.", "user")) == 2
    assert stored.count(("assistant", "Sure.", "assistant")) == 2
    keys = [t["idempotency_key"] for t in stored_history(local_server, "local", "alice")]
    assert len(set(keys)) == 4  # same seeds, distinct capture ids
    assert len({key.rsplit(":", 1)[0] for key in keys}) == 2  # one seed per sentence


def test_two_users_in_the_same_session_name_are_both_captured(local_server, make_capability, kit):
    alice = make_capability(local_server, user_id="alice", session_id="shared")
    bob = make_capability(local_server, user_id="bob", session_id="shared")
    alice_bot = kit.scripted_agent("assistant", ["Hello!"])
    bob_bot = kit.scripted_agent("assistant", ["Hello!"])
    alice.add_to_agent(alice_bot)
    bob.add_to_agent(bob_bot)

    _user().initiate_chat(alice_bot, message="Good morning team.", max_turns=1, silent=True)
    _user().initiate_chat(bob_bot, message="Good morning team.", max_turns=1, silent=True)
    assert alice.flush().all_delivered
    assert bob.flush().all_delivered

    for user_id in ("alice", "bob"):
        stored = kit.said(kit.read_transcript(local_server, user_id, "shared"))
        assert stored == [
            ("user", "Good morning team.", "user"),
            ("assistant", "Hello!", "assistant"),
        ]


def test_the_same_capability_on_two_agents_of_one_user_dedups_across_instances(
    local_server, make_capability, kit
):
    # Two capability objects for the same user and session: still one row per utterance.
    first = make_capability(local_server)
    second = make_capability(local_server)
    assistant = kit.scripted_agent("assistant", ["Noted."])
    user = _user()
    first.add_to_agent(assistant)
    second.add_to_agent(user)

    user.initiate_chat(assistant, message="I live in Lisbon.", max_turns=1, silent=True)
    assert first.flush().all_delivered
    assert second.flush().all_delivered
    assert len(stored_history(local_server, "local", "alice")) == 2


def test_roles_follow_the_speaker_override_included(local_server, make_capability, kit):
    memory = make_capability(local_server)
    # NEVER-mode model-less agents are assistants by the rule; the override makes one a person.
    person = kit.scripted_agent("person", [])
    bot = kit.scripted_agent("bot", ["Understood."])
    memory.add_to_agent(person, speaks_for_person=True)
    memory.add_to_agent(bot)

    person.initiate_chat(bot, message="Call me Ana.", max_turns=1, silent=True)
    assert memory.flush().all_delivered

    stored = kit.said(kit.read_transcript(local_server, "alice", "s1"))
    assert stored == [("user", "Call me Ana.", "person"), ("assistant", "Understood.", "bot")]


def test_a_tool_calling_exchange_persists_no_tool_traffic(local_server, make_capability, kit):
    memory = make_capability(local_server)
    assistant = kit.model_agent("assistant")
    user = _user(max_consecutive_auto_reply=2)

    def get_weather(city: str) -> str:
        return f"Sunny in {city}"

    assistant.register_for_llm(name="get_weather", description="Weather for a city")(get_weather)
    user.register_for_execution(name="get_weather")(get_weather)
    memory.add_to_agent(assistant)
    memory.add_to_agent(user)
    tool_call = {
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'},
            }
        ],
    }
    with kit.scripted_model(assistant, [tool_call, "It is sunny in Lisbon."]) as inputs:
        user.initiate_chat(
            assistant, message="What is the weather in Lisbon?", max_turns=2, silent=True
        )
    assert memory.flush().all_delivered

    # The tool ran and its result reached the model...
    assert any(m.get("role") == "tool" for m in inputs.calls[-1])
    # ...and none of it was stored.
    stored = kit.said(kit.read_transcript(local_server, "alice", "s1"))
    assert stored == [
        ("user", "What is the weather in Lisbon?", "user"),
        ("assistant", "It is sunny in Lisbon.", "assistant"),
    ]
    everything = stored_history(local_server, "local", "alice")
    assert all("Sunny in Lisbon" not in (t["content"] or "") for t in everything)
    assert all(t["role"] in ("user", "assistant") for t in everything)


def _group_chat(kit, agents_replies: dict[str, list[str]]) -> tuple[list[Any], GroupChatManager]:
    agents = [kit.scripted_agent(name, replies) for name, replies in agents_replies.items()]
    chat = GroupChat(agents, messages=[], max_round=6, speaker_selection_method="round_robin")
    return agents, GroupChatManager(chat, llm_config=False)


def test_a_three_agent_group_chat_stores_each_utterance_once_with_its_speaker(
    local_server, make_capability, kit
):
    memory = make_capability(local_server)
    (planner, critic, writer), manager = _group_chat(
        kit,
        {
            "planner": ["Plan: two days in Lisbon."],
            "critic": ["Add a day trip to Sintra.", "Looks complete."],
            "writer": ["Itinerary written.", "Final."],
        },
    )
    memory.add_to_agent(critic)  # attached: captures its own words on send
    memory.add_to_agent(writer)  # attached
    # The planner is not attached: its words are captured once from the relays.

    planner.initiate_chat(manager, message="Plan a Lisbon trip for me.", silent=True)
    assert memory.flush().all_delivered

    stored = kit.said(kit.read_transcript(local_server, "alice", "s1"))
    spoken = [(m["name"], m["content"]) for m in manager.groupchat.messages]
    assert [(name, text) for _, text, name in stored] == spoken
    assert len(stored) == 6
    assert {name for _, _, name in stored} == {"planner", "critic", "writer"}
    assert all(role == "assistant" for role, _, _ in stored)


def test_a_group_chat_with_the_person_in_it_labels_the_person(local_server, make_capability, kit):
    memory = make_capability(local_server)
    person = kit.scripted_agent("ana", ["Thanks!"], human_input_mode="ALWAYS")
    guide = kit.scripted_agent("guide", ["Visit Belem.", "Enjoy."])
    critic = kit.scripted_agent("critic", ["Also Alfama."])
    chat = GroupChat(
        [person, guide, critic], messages=[], max_round=4, speaker_selection_method="round_robin"
    )
    manager = GroupChatManager(chat, llm_config=False)
    memory.add_to_agent(guide)
    memory.add_to_agent(critic)

    person.initiate_chat(manager, message="What should I see in Lisbon?", silent=True)
    assert memory.flush().all_delivered

    stored = kit.said(kit.read_transcript(local_server, "alice", "s1"))
    assert stored == [
        ("user", "What should I see in Lisbon?", "ana"),
        ("assistant", "Visit Belem.", "guide"),
        ("assistant", "Also Alfama.", "critic"),
        ("user", "Thanks!", "ana"),
    ]


def test_capture_sent_only_skips_what_attached_agents_receive(local_server, make_capability, kit):
    memory = make_capability(local_server, capture="sent")
    assistant = kit.scripted_agent("assistant", ["Noted."])
    memory.add_to_agent(assistant)

    _user().initiate_chat(assistant, message="I live in Lisbon.", max_turns=1, silent=True)
    assert memory.flush().all_delivered

    stored = kit.said(kit.read_transcript(local_server, "alice", "s1"))
    assert stored == [("assistant", "Noted.", "assistant")]
