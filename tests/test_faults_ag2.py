"""ag2-memorysync under every fault: the chat completes, explicit calls fail typed.

Real ``ConversableAgent`` / ``UserProxyAgent`` chats, no LLM: the assistant's model is
``autogen.testing.TestAgent``'s fake client, wrapped to record what the model receives.
The server is ``shared.fake_server`` on loopback (and, for the outage, the real
``memorysync-local`` behind ``shared.faults.FaultProxy``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from autogen import ConversableAgent, UserProxyAgent
from autogen.testing import TestAgent

from ag2_memorysync import MemorySyncCapability
from memorysync_core import RetryPolicy
from memorysync_core.errors import MemorySyncError
from shared.fake_server import FakeServer, Fault
from shared.faults import (
    FAULTS,
    ODD_RECALL_ANSWERS,
    SLOW_FAULTS,
    FaultCase,
    ShortTimeoutTransport,
    check_error,
    outage,
)
from shared.local_server import stored_history
from shared.secret_guard import TEST_API_KEY, observe
from shared.timing import SLACK, release_when_held

# Long enough for a loopback answer on a busy machine; far below the 5 s and endless faults.
BUDGET = 1.0
EXPLICIT_TIMEOUT = 1.0  # below the 5 s and endless faults, above a busy loopback answer
RECALL = "/v1/memory/recall"
QUERY = "/v1/memory/query"
ADD = "/memory/add"
TENANT = "/org/projects"
APPEND = "/v1/history/append"
QUESTION = "Which city should I fly home to?"
FACT = "Alice lives in Porto."
ANSWER = "Somewhere sunny, I suppose."


@pytest.fixture
def capabilities() -> Iterator[list[MemorySyncCapability]]:
    made: list[MemorySyncCapability] = []
    yield made
    for capability in made:
        capability.close(timeout=2.0)


def _capability(
    made: list[MemorySyncCapability], server: Any, **overrides: Any
) -> MemorySyncCapability:
    settings: dict[str, Any] = {
        "user_id": "alice",
        "session_id": "faults",
        "api_key": TEST_API_KEY,
        "base_url": server.base_url,
        "recall_timeout": BUDGET,
    }
    settings.update(overrides)
    capability = MemorySyncCapability(**settings)
    made.append(capability)
    return capability


def _assistant() -> ConversableAgent:
    llm_config = {"config_list": [{"model": "gpt-4o-mini", "api_key": "sk-test-not-used"}]}
    return ConversableAgent("assistant", llm_config=llm_config, human_input_mode="NEVER")


def _user() -> UserProxyAgent:
    return UserProxyAgent("user", human_input_mode="NEVER", code_execution_config=False)


@contextlib.contextmanager
def _model(agent: ConversableAgent, replies: list[str]) -> Iterator[list[str]]:
    """Script ``agent``'s model; yields the text of the last message of each model call."""
    seen: list[str] = []
    with TestAgent(agent, replies):
        fake = agent.client
        assert fake is not None
        create = fake.create

        def recording_create(**params: Any) -> Any:
            seen.append(str(params["messages"][-1].get("content")))
            return create(**params)

        fake.create = recording_create  # type: ignore[method-assign]
        yield seen


def _timed_chat(capability: MemorySyncCapability) -> tuple[float, str, ConversableAgent]:
    assistant = _assistant()
    capability.add_to_agent(assistant)
    with _model(assistant, [ANSWER]) as seen:
        started = time.monotonic()
        _user().initiate_chat(assistant, message=QUESTION, max_turns=1, silent=True)
        elapsed = time.monotonic() - started
    assert len(seen) == 1
    return elapsed, seen[0], assistant


# The hot path's own loggers. Delivery and close reports are left out: the process-wide
# delivery loop may still be closing an earlier test's capability and log about it.
HOT_PATH_LOGGERS = ("memorysync.recall", "memorysync.client", "memorysync.sync")


def _warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name in HOT_PATH_LOGGERS
        and r.levelno >= logging.WARNING
        and "undelivered" not in r.getMessage()
    ]


# --------------------------------------------------------------------------- hot path

HOT_PATH_CASES = [pytest.param(c, RECALL, id=f"recall-{c}") for c in FAULTS] + [
    pytest.param(c, TENANT, id=f"tenant-{c}")
    for c in FAULTS
    if c.id in ("never-answers", "503", "reset-mid-response", "malformed-json")
]


@pytest.mark.parametrize(("case", "route"), HOT_PATH_CASES)
def test_chat_completes_within_budget_without_memories_under_fault(
    case: FaultCase,
    route: str,
    fake_server: FakeServer,
    capabilities: list[MemorySyncCapability],
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake_server.seed_memory("alice", FACT)
    fake_server.set_default(route, case.fault)
    capability = _capability(capabilities, fake_server)
    with caplog.at_level(logging.WARNING, logger="memorysync"):
        elapsed, shown, _ = _timed_chat(capability)
    assert elapsed < BUDGET + SLACK
    assert shown == QUESTION  # the model got the message alone
    assert 1 <= len(_warnings(caplog)) <= 2  # the warm-up and/or this turn, never a flood
    assert QUESTION not in caplog.text
    if route == RECALL:
        # Capture does not depend on recall: the chat is already in the transcript.
        assert capability.flush(timeout=5.0).all_delivered
        assert [t["content"] for t in fake_server.history] == [QUESTION, ANSWER]

    # Everything recovers as soon as the server does. (Not after a tenant lookup that
    # never answers: that one shared request waits for the client's 10 s timeout, and
    # recall and delivery wait on it; see docs/faults.md.)
    if (route, case.id) != (TENANT, "never-answers"):
        fake_server.set_default(route, None)
        assert capability.flush(timeout=5.0).all_delivered
        assert [t["content"] for t in fake_server.history] == [QUESTION, ANSWER]
        _, shown, _ = _timed_chat(capability)
        assert FACT in shown


@pytest.mark.parametrize("case", [c for c in FAULTS if c.id in SLOW_FAULTS], ids=str)
async def test_async_chat_completes_within_budget_under_fault(
    case: FaultCase, fake_server: FakeServer, capabilities: list[MemorySyncCapability]
) -> None:
    fake_server.set_default(RECALL, case.fault)
    capability = _capability(capabilities, fake_server, tenant_id="t")
    assistant = _assistant()
    capability.add_to_agent(assistant)
    loop = asyncio.get_running_loop()
    with _model(assistant, [ANSWER]) as seen:
        started = loop.time()
        await _user().a_initiate_chat(assistant, message=QUESTION, max_turns=1, silent=True)
        elapsed = loop.time() - started
    assert elapsed < BUDGET + SLACK  # the fault lasts 5 s or forever
    assert seen == [QUESTION]


async def test_async_chat_keeps_the_callers_loop_running_while_recall_waits(
    fake_server: FakeServer, capabilities: list[MemorySyncCapability]
) -> None:
    # The server holds the recall until a task on the caller's loop lets it answer
    # (shared/timing.py): had the recall blocked that loop, the 30 s budget would run
    # out first and the model would see no memory.
    fake_server.seed_memory("alice", FACT)
    gate = threading.Event()
    fake_server.set_default(RECALL, Fault.gate(gate))
    capability = _capability(capabilities, fake_server, tenant_id="t", recall_timeout=30.0)
    assistant = _assistant()
    capability.add_to_agent(assistant)
    opener = asyncio.create_task(release_when_held(fake_server, RECALL, gate))
    with _model(assistant, [ANSWER]) as seen:
        await _user().a_initiate_chat(assistant, message=QUESTION, max_turns=1, silent=True)
    await opener
    assert len(seen) == 1
    assert FACT in seen[0]


@pytest.mark.parametrize(
    ("name", "answer"), ODD_RECALL_ANSWERS, ids=[n for n, _ in ODD_RECALL_ANSWERS]
)
def test_unexpected_recall_shapes_mean_no_memories(
    name: str, answer: Any, fake_server: FakeServer, capabilities: list[MemorySyncCapability]
) -> None:
    fake_server.set_default(RECALL, Fault.json(answer))
    capability = _capability(capabilities, fake_server, tenant_id="t")
    elapsed, shown, _ = _timed_chat(capability)
    assert elapsed < BUDGET + SLACK
    assert shown == QUESTION
    assert len(fake_server.requests_to(RECALL)) == 1  # it was asked, and ignored


def test_a_5xx_burst_costs_one_turn_each_then_memories_return(
    fake_server: FakeServer, capabilities: list[MemorySyncCapability]
) -> None:
    fake_server.seed_memory("alice", FACT)
    fake_server.script(RECALL, [Fault.status(500), Fault.status(502), Fault.status(503)])
    capability = _capability(capabilities, fake_server, tenant_id="t")
    for _ in range(3):
        elapsed, shown, _ = _timed_chat(capability)
        assert elapsed < BUDGET + SLACK
        assert shown == QUESTION
    _, shown, _ = _timed_chat(capability)
    assert FACT in shown
    assert len(fake_server.requests_to(RECALL)) == 4  # the hot path never retries


# --------------------------------------------------------------------------- explicit calls


@pytest.mark.parametrize("case", FAULTS, ids=str)
def test_search_raises_the_typed_error_naming_route_and_status(
    case: FaultCase, fake_server: FakeServer, capabilities: list[MemorySyncCapability]
) -> None:
    fake_server.set_default(QUERY, case.fault)
    capability = _capability(
        capabilities, fake_server, tenant_id="t", transport=ShortTimeoutTransport(EXPLICIT_TIMEOUT)
    )
    with pytest.raises(MemorySyncError) as caught:
        capability.search("Where do I live?")
    check_error(caught.value, case, "POST", QUERY, TEST_API_KEY)
    observe(caught.value, where="ag2 search")


@pytest.mark.parametrize(
    "case",
    [c for c in FAULTS if c.id in ("503", "reset-mid-response", "403", "malformed-json")],
    ids=str,
)
def test_save_raises_the_typed_error_naming_route_and_status(
    case: FaultCase, fake_server: FakeServer, capabilities: list[MemorySyncCapability]
) -> None:
    fake_server.set_default(ADD, case.fault)
    capability = _capability(capabilities, fake_server, tenant_id="t")
    with pytest.raises(MemorySyncError) as caught:
        capability.save("I live in Porto.")
    check_error(caught.value, case, "POST", ADD, TEST_API_KEY)
    observe(caught.value, where="ag2 save")
    attempts = fake_server.requests_to(ADD)
    retried = RetryPolicy().is_retryable(caught.value)
    assert len(attempts) == (3 if retried else 1)
    assert len({a.body for a in attempts}) == 1  # the same client_ref every time


# --------------------------------------------------------------------------- outage


def test_turns_survive_a_three_second_outage_and_are_stored_exactly_once(
    proxied_local: Any, capabilities: list[MemorySyncCapability]
) -> None:
    proxy = proxied_local.proxy
    capability = _capability(capabilities, proxied_local, tenant_id=proxied_local.tenant_id)
    assistant = _assistant()
    capability.add_to_agent(assistant)
    replies = ["Porto, then.", "Noted: window seat.", "Booked."]
    said = ["I live in Porto.", "I prefer window seats.", "Book it, please."]
    user = UserProxyAgent(
        "user",
        human_input_mode="NEVER",
        code_execution_config=False,
        max_consecutive_auto_reply=2,
    )
    follow_ups = iter(said[1:])
    user.register_reply(
        lambda _sender: True,
        lambda *a, **k: (True, next(follow_ups, None)),
        position=0,
    )
    capability.add_to_agent(user)

    end = outage(proxy, Fault.close())
    proxy.script(APPEND, [Fault.status(503), Fault.reset(), Fault.html(502)])
    # The server comes back 3 s after the chat ended, so the chat ran wholly inside it.
    back = threading.Timer(3.0, end)
    try:
        with _model(assistant, replies) as seen:
            user.initiate_chat(assistant, message=said[0], max_turns=3, silent=True)
        assert len(seen) == 3
        # The chat never waited on capture: it ended with all six turns still waiting.
        assert capability.flush(timeout=0.2).pending == 6
        assert stored_history(proxied_local, proxied_local.tenant_id, "alice") == []
        back.start()
        assert capability.flush(timeout=30.0).all_delivered
    finally:
        back.cancel()
        end()

    rows = stored_history(proxied_local, proxied_local.tenant_id, "alice", "ag2::faults")
    expected = [
        ("user", said[0]),
        ("assistant", replies[0]),
        ("user", said[1]),
        ("assistant", replies[1]),
        ("user", said[2]),
        ("assistant", replies[2]),
    ]
    assert [(r["role"], r["content"]) for r in rows] == expected
    attempts = proxy.requests_to(APPEND)
    assert len(attempts) > 2  # retried through the outage
    keys_by_text: dict[str, set[str]] = {}
    for attempt in attempts:
        for turn in attempt.json["turns"]:
            keys_by_text.setdefault(turn["content"], set()).add(turn["idempotency_key"])
    # Same seed and capture id on every attempt: one key per turn, the one stored.
    assert {text: len(keys) for text, keys in keys_by_text.items()} == {
        text: 1 for _, text in expected
    }
    assert {r["idempotency_key"] for r in rows} == set().union(*keys_by_text.values())
