"""Recalled memories reach the model's input, and nothing else, within the budget."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from autogen import UserProxyAgent

from memorysync_core import DEFAULT_CONTEXT_TEMPLATE, RateLimitError
from memorysync_local import Plan
from shared.fake_server import Fault
from shared.timing import SLACK

TEMPLATE_HEAD = DEFAULT_CONTEXT_TEMPLATE.split("\n")[0]


def _user(**kwargs: Any) -> UserProxyAgent:
    kwargs.setdefault("human_input_mode", "NEVER")
    kwargs.setdefault("code_execution_config", False)
    return UserProxyAgent("user", **kwargs)


def _recall_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r for r in caplog.records if r.name == "memorysync.recall" and r.levelno == logging.WARNING
    ]


def test_a_second_session_recalls_the_first_sessions_facts_into_the_model_input(
    local_server, make_capability, kit
):
    first = make_capability(local_server, session_id="monday")
    assistant = kit.model_agent("assistant")
    first.add_to_agent(assistant)
    with kit.scripted_model(assistant, ["Noted."]):
        _user().initiate_chat(
            assistant, message="I am allergic to peanuts.", max_turns=1, silent=True
        )
    assert first.flush().all_delivered

    second = make_capability(local_server, session_id="tuesday")
    assistant2 = kit.model_agent("assistant")
    second.add_to_agent(assistant2)
    with kit.scripted_model(assistant2, ["Try fruit."]) as inputs:
        _user().initiate_chat(
            assistant2, message="Are peanuts a good snack for me?", max_turns=1, silent=True
        )

    shown = inputs.last_user_text()
    assert shown.startswith(TEMPLATE_HEAD)
    assert "Allergic to peanuts" in shown
    assert shown.endswith("\n\nAre peanuts a good snack for me?")


def test_the_stored_conversation_never_contains_the_template(local_server, make_capability, kit):
    make_capability(local_server).save("I live in Lisbon.")
    memory = make_capability(local_server)
    assistant = kit.model_agent("assistant")
    user = _user(max_consecutive_auto_reply=1, default_auto_reply="And the weather in Lisbon?")
    memory.add_to_agent(assistant)
    memory.add_to_agent(user)
    replies = ["Lisbon it is.", "Sunny.", "Draft one.", "Draft two."]
    with kit.scripted_model(assistant, replies) as inputs:
        user.initiate_chat(assistant, message="What is there to do in Lisbon?", silent=True)
        user.send("Any museums in Lisbon?", assistant, request_reply=False, silent=True)
        # Regenerating a reply from the stored chat shows the block once, not twice.
        assistant.generate_reply(sender=user)
        assistant.generate_reply(sender=user)
    assert memory.flush().all_delivered

    # The model saw the block on every call, once each time...
    assert len(inputs.calls) == 4
    for call in inputs.calls:
        assert sum(str(m.get("content")).count(TEMPLATE_HEAD) for m in call) == 1
    # ...while the stored chat (both sides) and the transcript never did.
    for agent, partner in ((assistant, user), (user, assistant)):
        assert all(TEMPLATE_HEAD not in str(m["content"]) for m in agent.chat_messages[partner])
    transcript = kit.read_transcript(local_server, "alice", "s1")
    assert all(TEMPLATE_HEAD not in str(t["content"]) for t in transcript)
    assert [t["content"] for t in transcript] == [
        "What is there to do in Lisbon?",
        "Lisbon it is.",
        "And the weather in Lisbon?",
        "Sunny.",
        "Any museums in Lisbon?",
    ]


def test_short_messages_trigger_no_recall(fake_server, make_capability, kit):
    fake_server.seed_memory("alice", "Lives in Lisbon")
    memory = make_capability(fake_server, min_prompt_chars=8)
    assistant = kit.model_agent("assistant")
    memory.add_to_agent(assistant)
    with kit.scripted_model(assistant, ["Hi!"]) as inputs:
        _user().initiate_chat(assistant, message="hi", max_turns=1, silent=True)

    assert inputs.last_user_text() == "hi"
    assert fake_server.requests_to("/v1/memory/recall") == []


def test_person_agents_get_no_recall(fake_server, make_capability, kit):
    memory = make_capability(fake_server)
    assistant = kit.scripted_agent("assistant", ["Tell me more about your plans."])
    person = _user(max_consecutive_auto_reply=1, default_auto_reply="That's all.")
    memory.add_to_agent(person)
    person.initiate_chat(assistant, message="I want to visit Porto.", max_turns=2, silent=True)
    assert fake_server.requests_to("/v1/memory/recall") == []


def test_recall_against_a_server_that_never_answers_stays_within_budget(
    fake_server, make_capability, kit, caplog
):
    fake_server.set_default("/v1/memory/recall", Fault.hang())
    memory = make_capability(fake_server, recall_timeout=0.5, tenant_id="t")
    assistant = kit.model_agent("assistant")
    memory.add_to_agent(assistant)

    with kit.scripted_model(assistant, ["Fine.", "Still fine."]) as inputs:
        started = time.monotonic()
        assistant.generate_reply(
            messages=[{"role": "user", "content": "What do you know about me?", "name": "u"}],
            sender=None,
        )
        first = time.monotonic() - started
        started = time.monotonic()
        assistant.generate_reply(
            messages=[{"role": "user", "content": "Anything at all about me?", "name": "u"}],
            sender=None,
        )
        second = time.monotonic() - started

    assert first < 0.5 + SLACK  # the first call included (no warm connection)
    assert second < 0.5 + SLACK
    assert all(TEMPLATE_HEAD not in inputs.last_user_text(i) for i in (0, 1))
    assert len(_recall_warnings(caplog)) == 2  # one per turn


def test_tenant_resolution_that_hangs_is_inside_the_budget(fake_server, make_capability, kit):
    fake_server.set_default("/org/projects", Fault.hang())
    memory = make_capability(fake_server, recall_timeout=0.4)
    assistant = kit.model_agent("assistant")
    memory.add_to_agent(assistant)
    with kit.scripted_model(assistant, ["Fine."]) as inputs:
        started = time.monotonic()
        assistant.generate_reply(
            messages=[{"role": "user", "content": "Where do I live again?"}], sender=None
        )
        elapsed = time.monotonic() - started
    assert elapsed < 0.4 + SLACK
    assert inputs.last_user_text() == "Where do I live again?"


@pytest.mark.parametrize(
    "fault",
    [Fault.status(503), Fault.reset(), Fault.rate_limited(retry_after=3)],
    ids=["server-error", "connection-reset", "evaluation-quota-429"],
)
def test_outages_and_a_429_mean_no_memories_this_turn_and_one_warning(
    fake_server, make_capability, kit, caplog, fault
):
    fake_server.seed_memory("alice", "Lives in Lisbon")
    fake_server.set_default("/v1/memory/recall", fault)
    memory = make_capability(fake_server, tenant_id="t")
    assistant = kit.model_agent("assistant")
    memory.add_to_agent(assistant)
    with kit.scripted_model(assistant, ["Hello."]) as inputs:
        _user().initiate_chat(assistant, message="Where do I live again?", max_turns=1, silent=True)
    assert memory.flush().all_delivered

    assert inputs.last_user_text() == "Where do I live again?"
    assert len(_recall_warnings(caplog)) == 1
    # The chat itself was still captured.
    assert [t["content"] for t in fake_server.history] == ["Where do I live again?", "Hello."]


def test_local_free_plan_over_its_limit_is_silent_no_memories_and_no_warning(
    make_local_server, make_capability, kit, caplog
):
    before = make_local_server()
    make_capability(before).save("I live in Lisbon.")
    # The same data, now behind a free plan that is over its monthly limit.
    server = make_local_server(db_path=before.db_path, plans={before.api_key: Plan("free", 0)})
    memory = make_capability(server)
    # Over the limit: the write is accepted and silently not kept (reads go empty from now).
    assert not memory.save("I work in Porto.").kept
    assistant = kit.model_agent("assistant")
    memory.add_to_agent(assistant)
    with kit.scripted_model(assistant, ["Hello."]) as inputs:
        _user().initiate_chat(
            assistant, message="What is there to do in Lisbon?", max_turns=1, silent=True
        )

    assert memory.flush().all_delivered
    assert inputs.last_user_text() == "What is there to do in Lisbon?"
    assert _recall_warnings(caplog) == []
    assert kit.read_transcript(server, "alice", "s1") == []  # accepted, silently not stored


def test_local_evaluation_key_over_its_limit_means_no_memories_one_warning_and_dropped_turns(
    make_local_server, make_capability, kit, caplog
):
    server = make_local_server(eval_keys=["ms_eval"], plans={"ms_eval": Plan("evaluation", 0)})
    memory = make_capability(server, api_key="ms_eval")
    with pytest.raises(RateLimitError):  # explicit calls surface the 429
        memory.save("I work in Porto.")
    assistant = kit.model_agent("assistant")
    memory.add_to_agent(assistant)
    with kit.scripted_model(assistant, ["Hello."]) as inputs:
        _user().initiate_chat(
            assistant, message="What is there to do in Lisbon?", max_turns=1, silent=True
        )

    assert inputs.last_user_text() == "What is there to do in Lisbon?"
    assert len(_recall_warnings(caplog)) == 1
    # The 429 asks to wait until next month: the queue drops both turns, with an error
    # log, and the report says so instead of counting them as delivered.
    report = memory.flush(timeout=5.0)
    assert (report.delivered, report.refused, report.pending) == (0, 2, 0)
    assert report.reasons == ("RateLimitError (status 429)",)
    drops = [r for r in caplog.records if r.name == "memorysync.delivery" and r.levelno >= 40]
    assert sum(int(r.args[0]) for r in drops) == 2  # type: ignore[index]
    assert all("Lisbon" not in r.getMessage() for r in drops)


def test_free_tier_quota_silence_brings_nothing_back_without_a_warning(
    fake_server, make_capability, kit, caplog
):
    fake_server.set_default("/v1/memory/recall", Fault.json({"context": "", "memories": []}))
    fake_server.set_default(
        "/v1/history/append",
        Fault.json({"items": [], "request_ids": [], "status": "skipped"}),
    )
    memory = make_capability(fake_server, tenant_id="t")
    assistant = kit.model_agent("assistant")
    memory.add_to_agent(assistant)
    with kit.scripted_model(assistant, ["Hello."]) as inputs:
        _user().initiate_chat(assistant, message="Where do I live again?", max_turns=1, silent=True)

    assert memory.flush().all_delivered  # accepted (and silently not stored) counts as delivered
    assert inputs.last_user_text() == "Where do I live again?"
    assert _recall_warnings(caplog) == []
    assert len(fake_server.requests_to("/v1/history/append")) >= 1
