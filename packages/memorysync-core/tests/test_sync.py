"""SyncUserMemory without any framework: order, held turns, one deadline, fork and exit."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import pytest

from memorysync_core import (
    AdapterSettings,
    DeliveryReport,
    RecallResult,
    SyncUserMemory,
)
from memorysync_core._sync.holds import HOLD_MARGIN
from memorysync_core._sync.loop import CALLER_LOOPS
from memorysync_core._wire import transport as memorysync_transport
from shared.fake_server import FakeServer, Fault
from shared.timing import SLACK, release_when_held

from .conftest import API_KEY

APPEND = "/v1/history/append"
RECALL = "/v1/memory/recall"


def settings_for(server: FakeServer, **overrides: Any) -> AdapterSettings:
    """Settings against the fake server (tenant given, so no lookup)."""
    values: dict[str, Any] = {
        "surface": "demo",
        "user_id": "ann",
        "session_id": "s1",
        "top_k": 5,
        "recall_timeout": 1.0,
        "min_prompt_chars": 1,
        "clear_scope": "session",
        "request_timeout": 10.0,
        "context_template": None,
        "min_score": None,
        "max_context_chars": None,
        "api_key": API_KEY,
        "base_url": server.base_url,
        "project_id": None,
        "tenant_id": "t",
        "transport": None,
    }
    values.update(overrides)
    return AdapterSettings.build(**values)


@pytest.fixture
def make_memory(fake_server: FakeServer) -> Any:
    made: list[SyncUserMemory] = []

    def make(**overrides: Any) -> SyncUserMemory:
        recalls = overrides.pop("recalls", None)
        memory = SyncUserMemory(settings_for(fake_server, **overrides), recalls=recalls)
        made.append(memory)
        return memory

    yield make
    for memory in made:
        memory.close(timeout=2.0)


def _by_seq(server: FakeServer) -> list[tuple[str, str]]:
    stored = sorted(server.history, key=lambda turn: turn["seq"])
    return [(turn["role"], turn["content"]) for turn in stored]


def test_two_memories_of_one_conversation_are_ordered_by_capture_not_by_arrival(
    fake_server: FakeServer, make_memory: Any
) -> None:
    # The person's memory holds its turns (a recall may come); the assistant's delivers
    # at once. Arrival order is therefore wrong; seq restores the spoken order.
    person = make_memory(recalls=lambda: True)
    assistant = make_memory(recalls=lambda: False)
    said = [
        ("user", "I live in Porto."),
        ("assistant", "Reply number 1."),
        ("user", "I also have a dog named Rex."),
        ("assistant", "Reply number 2."),
    ]
    for role, text in said:
        (person if role == "user" else assistant).capture(role, text)
    assert assistant.flush().all_delivered
    assert person.flush().all_delivered

    arrived = [(turn["role"], turn["content"]) for turn in fake_server.history]
    assert arrived != said  # the replies overtook the held person turns
    assert _by_seq(fake_server) == said


def test_a_retry_resends_the_same_seq_and_key(fake_server: FakeServer, make_memory: Any) -> None:
    fake_server.script(APPEND, [Fault.status(503), Fault.status(503)])
    memory = make_memory()
    memory.capture("assistant", "Sure.")
    assert memory.flush().all_delivered
    memory.capture("assistant", "Sure.")  # a genuine repeat
    assert memory.flush() == DeliveryReport(delivered=2)
    bodies = [request.json["turns"] for request in fake_server.requests_to(APPEND)]
    assert len(bodies) == 4
    assert bodies[0] == bodies[1] == bodies[2]  # the same seq and key on every attempt
    (first,), (repeat,) = bodies[0], bodies[3]
    assert first["seq"] < repeat["seq"]
    assert first["idempotency_key"] != repeat["idempotency_key"]
    assert [t["content"] for t in fake_server.history] == ["Sure.", "Sure."]


def test_a_reply_never_recalls_its_own_message(fake_server: FakeServer, make_memory: Any) -> None:
    memory = make_memory()
    memory.capture("user", "I am allergic to peanuts.")
    # The reply's recall runs while the person's turn is held: nothing to find yet.
    assert memory.recall("peanuts allergy") == RecallResult.EMPTY
    assert memory.flush().all_delivered
    # The turn left only once the reply's recall had its answer (after it, the hold is
    # released and delivery runs on its own: asserting an empty history then is a race).
    order = [r.path for r in list(fake_server.requests) if r.path in (RECALL, APPEND)]
    assert order == [RECALL, APPEND]
    assert [m.text for m in memory.search("peanuts allergy")] == ["I am allergic to peanuts."]


def test_a_held_turn_nobody_answers_is_delivered_within_the_hold_bound(
    fake_server: FakeServer, make_memory: Any
) -> None:
    memory = make_memory(recall_timeout=0.3)
    started = time.monotonic()
    memory.capture("user", "Nobody replies to this.")
    (request,) = fake_server.wait_for_requests(1, APPEND, timeout=10.0)
    # Held at most recall_timeout + HOLD_MARGIN, without a flush.
    assert time.monotonic() - started < 0.3 + HOLD_MARGIN + SLACK
    assert request.json["turns"][0]["content"] == "Nobody replies to this."


def test_turns_go_out_at_once_when_no_memory_of_the_user_recalls(
    fake_server: FakeServer, make_memory: Any
) -> None:
    # A held turn would wait for the 30 s budget; one not held goes out at once.
    memory = make_memory(recalls=lambda: False, recall_timeout=30.0)
    memory.capture("user", "I live in Porto.")
    assert fake_server.wait_for_requests(1, APPEND, timeout=5 * SLACK)


def test_recall_keeps_one_deadline_against_a_server_that_never_answers(
    fake_server: FakeServer, make_memory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    fake_server.set_default(RECALL, Fault.delay(5.0))
    memory = make_memory(recall_timeout=0.2)
    with caplog.at_level(logging.WARNING, logger="memorysync.recall"):
        started = time.monotonic()
        result = memory.recall("Where do I live?")
        took = time.monotonic() - started
    assert result == RecallResult.EMPTY
    assert took < 0.2 + SLACK  # the budget is the feature; the server answers after 5 s
    warnings = [r for r in caplog.records if r.name == "memorysync.recall"]
    assert len(warnings) == 1  # one deadline, one warning


def test_arecall_keeps_the_deadline(fake_server: FakeServer, make_memory: Any) -> None:
    fake_server.set_default(RECALL, Fault.delay(5.0))
    memory = make_memory(recall_timeout=0.3)
    started = time.monotonic()
    assert asyncio.run(memory.arecall("Where do I live?")) == RecallResult.EMPTY
    assert time.monotonic() - started < 0.3 + SLACK


def test_arecall_keeps_the_callers_loop_running_while_it_waits(
    fake_server: FakeServer, make_memory: Any
) -> None:
    # The held recall is answered by a task on the caller's loop (shared/timing.py): had
    # arecall blocked that loop, the 30 s budget would run out first and recall nothing.
    fake_server.seed_memory("ann", "Lives in Lisbon")
    gate = threading.Event()
    fake_server.set_default(RECALL, Fault.gate(gate))
    memory = make_memory(recall_timeout=30.0)

    async def main() -> RecallResult:
        opener = asyncio.create_task(release_when_held(fake_server, RECALL, gate))
        result = await memory.arecall("Where do I live?")
        await opener
        return result

    assert [m.text for m in asyncio.run(main()).memories] == ["Lives in Lisbon"]


def test_short_prompts_recall_nothing_and_release_held_turns(
    fake_server: FakeServer, make_memory: Any
) -> None:
    # Held, the turn would wait for the 30 s budget; a skipped recall lets it go at once.
    memory = make_memory(min_prompt_chars=8, recall_timeout=30.0)
    memory.capture("user", "I live in Porto.")
    assert memory.recall("ok") == RecallResult.EMPTY
    assert memory.recall(None) == RecallResult.EMPTY
    (request,) = fake_server.wait_for_requests(1, APPEND, timeout=5 * SLACK)
    assert request.json["turns"][0]["content"] == "I live in Porto."
    assert fake_server.requests_to(RECALL) == []


def test_flush_after_a_wrong_key_reports_refused_turns_and_logs_one_error(
    fake_server: FakeServer, make_memory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    fake_server.set_default(APPEND, Fault.status(401))
    memory = make_memory()
    with caplog.at_level(logging.DEBUG, logger="memorysync.delivery"):
        memory.capture("user", "I live in Porto.")
        memory.capture("assistant", "Noted.")
        first = memory.flush()
        memory.capture("user", "I have a dog.")
        second = memory.flush()
    assert (first.delivered, first.refused, first.pending) == (0, 2, 0)
    assert (second.delivered, second.refused, second.pending) == (0, 3, 0)
    assert not second.all_delivered
    assert len(second.reasons) == 1
    assert "check MEMORYSYNC_API_KEY" in second.reasons[0]
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1  # once, not once per batch
    assert "check MEMORYSYNC_API_KEY" in errors[0].getMessage()
    assert memory.close() == second


def test_close_returns_the_report_is_idempotent_and_later_calls_raise(
    fake_server: FakeServer, make_memory: Any
) -> None:
    memory = make_memory()
    memory.capture("user", "I live in Porto.")
    memory.capture("assistant", "Noted.")
    report = memory.close()
    assert report == DeliveryReport(delivered=2)
    assert memory.close() == report
    assert memory.flush() == report
    with pytest.raises(RuntimeError, match="closed"):
        memory.capture("user", "Too late.")
    with pytest.raises(RuntimeError, match="closed"):
        memory.search("Porto")
    assert memory.recall("Where do I live?") == RecallResult.EMPTY


def test_a_memory_is_usable_from_many_threads_at_once(
    fake_server: FakeServer, make_memory: Any
) -> None:
    memory = make_memory(recalls=lambda: False)

    def talk(n: int) -> None:
        for i in range(20):
            memory.capture("assistant", f"thread {n} line {i}")
            memory.recall(f"thread {n} question {i}")

    threads = [threading.Thread(target=talk, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert memory.flush() == DeliveryReport(delivered=80)
    # Each thread's lines keep their order in the transcript.
    listed = [content for _, content in _by_seq(fake_server)]
    for n in range(4):
        mine = [line for line in listed if line.startswith(f"thread {n} ")]
        assert mine == [f"thread {n} line {i}" for i in range(20)]


def test_a_thread_without_an_event_loop_recalls_on_its_own_thread_and_others_hand_over(
    fake_server: FakeServer, make_memory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_server.seed_memory("ann", "Lives in Lisbon")
    sent_from: list[str] = []
    send = memorysync_transport.send

    async def noting_the_thread(*args: Any, **kwargs: Any) -> Any:
        sent_from.append(threading.current_thread().name)
        return await send(*args, **kwargs)

    memory = make_memory()
    memory.search("Lisbon")  # a process's first request is made on the background loop
    monkeypatch.setattr(memorysync_transport, "send", noting_the_thread)

    async def inside_a_running_loop() -> RecallResult:
        return memory.recall("Where do I live?")  # a sync hook inside an async app

    first = memory.recall("Where do I live?")
    second = asyncio.run(inside_a_running_loop())
    assert [m.text for m in first.memories] == ["Lives in Lisbon"]
    assert [m.text for m in second.memories] == ["Lives in Lisbon"]
    # No hand-over (two thread wake-ups) when the caller can wait on a loop of its own;
    # a caller that runs a loop cannot run another: the background loop serves it.
    assert sent_from == [threading.current_thread().name, "memorysync-loop"]


def test_the_loop_of_a_thread_that_recalled_and_ended_is_closed_with_the_memory(
    fake_server: FakeServer, make_memory: Any
) -> None:
    fake_server.seed_memory("ann", "Lives in Lisbon")
    memory = make_memory()
    seen: list[tuple[asyncio.AbstractEventLoop | None, RecallResult]] = []

    def ask() -> None:
        seen.append((CALLER_LOOPS.here(), memory.recall("Where do I live?")))

    worker = threading.Thread(target=ask)
    worker.start()
    worker.join()
    [(loop, result)] = seen
    assert loop is not None
    assert result.block
    assert not loop.is_closed()  # kept for the thread's next recall while it may live
    memory.close()
    assert loop.is_closed()  # its connection closed with it (the leak guard checks)


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


_PRELUDE = """
import os, sys
from memorysync_core import AdapterSettings, SyncUserMemory

def memory(user="ann"):
    settings = AdapterSettings.build(
        surface="demo", user_id=user, session_id="s", top_k=5, recall_timeout=30.0,
        min_prompt_chars=1, clear_scope="session", request_timeout=5.0,
        context_template=None, min_score=None, max_context_chars=None, api_key="ms_test",
        base_url=sys.argv[1], project_id=None, tenant_id="t", transport=None,
    )
    return SyncUserMemory(settings, recalls=lambda: False)
"""


def test_the_first_request_of_a_process_is_made_on_the_background_loop(
    fake_server: FakeServer,
) -> None:
    # It imports httpx's async backend, which a caller's own loop could not interrupt
    # at the deadline; later recalls from this thread run on its own loop.
    fake_server.seed_memory("ann", "Ann lives in Porto.")
    script = (
        _PRELUDE
        + """
import threading
from memorysync_core._wire import transport as _transport
send, threads = _transport.send, []

async def noting(*args, **kwargs):
    threads.append(threading.current_thread().name)
    return await send(*args, **kwargs)

_transport.send = noting
m = memory()
print("recalled", [bool(m.recall("Where does Ann live?").block) for _ in range(2)])
print("threads", threads)
"""
    )
    done = _run(script, fake_server.base_url)
    assert done.returncode == 0, done.stderr
    assert "recalled [True, True]" in done.stdout
    assert "threads ['memorysync-loop', 'MainThread']" in done.stdout


def test_turns_captured_before_exit_are_delivered_by_the_exit_handler(
    fake_server: FakeServer,
) -> None:
    fake_server.set_default(APPEND, Fault.delay(0.5))
    script = (
        _PRELUDE
        + """
m = memory()
m.capture("user", "Remember the exit handler.")
m.capture("assistant", "Noted.")
# no flush, no close: the atexit handler flushes
"""
    )
    done = _run(script, fake_server.base_url)
    assert done.returncode == 0, done.stderr
    assert [t["content"] for t in fake_server.history] == ["Remember the exit handler.", "Noted."]


def test_the_exit_flush_is_bounded_with_many_memories_and_the_server_down(
    fake_server: FakeServer,
) -> None:
    fake_server.set_default(APPEND, Fault.hang())
    script = (
        _PRELUDE
        + """
import time
import memorysync_core._sync.loop as background
background.EXIT_FLUSH_SECONDS = 0.5
keep = [memory(f"u{n}") for n in range(30)]
for m in keep:
    m.capture("user", "Remember me at exit.")
started = time.monotonic()
left = background.flush_all_at_exit()
print(f"exit flush took {time.monotonic() - started:.2f} left {left}")
"""
    )
    done = _run(script, fake_server.base_url)
    assert done.returncode == 0, done.stderr
    took = float(done.stdout.rsplit("exit flush took ", 1)[1].split()[0])
    assert took < 0.5 + 2 * SLACK  # one 0.5 s budget; 30 of them adding up would be 15 s
    assert "left 30" in done.stdout
    assert fake_server.history == []


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="os.fork is POSIX-only")
def test_a_forked_child_gets_its_own_loop_and_connection(fake_server: FakeServer) -> None:
    fake_server.seed_memory("ann", "Ann lives in Porto.")
    script = (
        _PRELUDE
        + """
m = memory()
m.capture("user", "Said by the parent.")
assert m.flush(30).all_delivered
assert m.recall("Where does Ann live?").block  # the parent's own loop and connection
pid = os.fork()
if pid == 0:
    recalled = bool(m.recall("Where does Ann live?").block)
    m.capture("user", "Said by the child.")
    report = m.flush(30)
    os._exit(0 if recalled and report.delivered == 1 and report.all_delivered else 3)
_, status = os.waitpid(pid, 0)
m.capture("assistant", "Back in the parent.")
assert m.flush(30).delivered == 2
assert m.recall("Where does Ann live?").block
print("child", os.waitstatus_to_exitcode(status))
"""
    )
    done = _run(script, fake_server.base_url)
    assert done.returncode == 0, done.stderr
    assert "child 0" in done.stdout
    assert sorted(t["content"] for t in fake_server.history) == [
        "Back in the parent.",
        "Said by the child.",
        "Said by the parent.",
    ]


def test_everything_works_where_os_register_at_fork_does_not_exist(
    fake_server: FakeServer,
) -> None:
    # Windows has no os.register_at_fork (and no fork): the sync face must not need it.
    fake_server.seed_memory("ann", "Ann lives in Porto.")
    script = (
        """
import os
import asyncio, httpx, random  # the standard library's own users of it, loaded first
del os.register_at_fork
"""
        + _PRELUDE
        + """
m = memory()
print("recalled", bool(m.recall("Where does Ann live?").block))
m.capture("user", "I have a dog named Rex.")
print("flushed", m.flush(30).all_delivered)
m.capture("assistant", "Noted.")
# the last turn is left to the exit handler
"""
    )
    done = _run(script, fake_server.base_url)
    assert done.returncode == 0, done.stderr
    assert "recalled True" in done.stdout
    assert "flushed True" in done.stdout
    assert [t["content"] for t in fake_server.history] == ["I have a dog named Rex.", "Noted."]
