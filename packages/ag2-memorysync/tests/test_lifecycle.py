"""Delivery through outages, flush/close, exit and fork."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from typing import Any

import pytest
from autogen import UserProxyAgent

from shared.fake_server import Fault
from shared.timing import SLACK

APPEND = "/v1/history/append"


def _user(**kwargs: Any) -> UserProxyAgent:
    kwargs.setdefault("human_input_mode", "NEVER")
    kwargs.setdefault("code_execution_config", False)
    return UserProxyAgent("user", **kwargs)


def test_flush_delivers_everything_captured_during_a_three_second_outage(
    fake_server, make_capability, kit
):
    fake_server.set_default(APPEND, Fault.status(503))
    memory = make_capability(fake_server, tenant_id="t")
    assistant = kit.scripted_agent("assistant", ["One.", "Two.", "Three."])
    user = kit.scripted_agent(
        "user", ["Second message.", "Third message."], human_input_mode="TERMINATE"
    )
    memory.add_to_agent(assistant)
    memory.add_to_agent(user)
    back = threading.Timer(3.0, lambda: fake_server.set_default(APPEND, None))
    back.start()
    try:
        user.initiate_chat(assistant, message="First message.", max_turns=3, silent=True)
        # During the outage nothing is delivered, and the chat did not wait for it.
        assert memory.flush(timeout=0.5).pending > 0
        assert fake_server.history == []
        assert memory.flush(timeout=10.0).all_delivered
    finally:
        back.cancel()

    assert [t["content"] for t in fake_server.history] == [
        "First message.",
        "One.",
        "Second message.",
        "Two.",
        "Third message.",
        "Three.",
    ]
    assert len(fake_server.requests_to(APPEND)) > 1  # the outage was retried through


def test_close_is_idempotent_and_later_explicit_calls_raise(fake_server, make_capability, kit):
    memory = make_capability(fake_server)
    assistant = kit.scripted_agent("assistant", ["Noted."])
    memory.add_to_agent(assistant)
    _user().initiate_chat(assistant, message="I live in Lisbon.", max_turns=1, silent=True)

    memory.close()
    memory.close()
    assert len(fake_server.history) == 2  # close flushed first
    with pytest.raises(RuntimeError, match="closed"):
        memory.search("Lisbon")
    # Hooks of a closed capability do nothing (and do not break the chat).
    _user().initiate_chat(assistant, message="Still there?", max_turns=1, silent=True)
    assert len(fake_server.history) == 2


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


_PRELUDE = """
import os, sys, warnings
warnings.simplefilter("ignore")
from autogen import ConversableAgent
from ag2_memorysync import MemorySyncCapability

def bot():
    agent = ConversableAgent("bot", llm_config=False, human_input_mode="NEVER")
    agent.register_reply(lambda s: True, lambda *a, **k: (True, "Noted."), position=0)
    return agent

def person():
    return ConversableAgent("person", llm_config=False, human_input_mode="TERMINATE")

memory = MemorySyncCapability(user_id=sys.argv[2], session_id="s", api_key="ms_test",
                              base_url=sys.argv[1], tenant_id="t")
"""


def test_turns_captured_before_exit_are_delivered_by_the_exit_handler(fake_server):
    fake_server.set_default(APPEND, Fault.delay(0.5))
    script = (
        _PRELUDE
        + """
b = bot()
memory.add_to_agent(b)
person().initiate_chat(b, message="Remember the exit handler.", max_turns=1, silent=True)
# no flush, no close: the atexit handler flushes
"""
    )
    done = _run(script, fake_server.base_url, "exiter")
    assert done.returncode == 0, done.stderr
    assert [t["content"] for t in fake_server.history] == ["Remember the exit handler.", "Noted."]


def test_the_exit_flush_is_bounded_with_many_capabilities_and_the_server_down(fake_server):
    fake_server.set_default(APPEND, Fault.hang())
    script = (
        _PRELUDE
        + """
import time
import memorysync_core._sync.loop as background
background.EXIT_FLUSH_SECONDS = 0.5
keep = []
for n in range(30):
    m = MemorySyncCapability(user_id=f"u{n}", session_id="s", api_key="ms_test",
                             base_url=sys.argv[1], tenant_id="t")
    b = bot()
    m.add_to_agent(b)
    person().initiate_chat(b, message="Remember me at exit.", max_turns=1, silent=True)
    keep.append((m, b))
started = time.monotonic()
background.flush_all_at_exit()
print(f"exit flush took {time.monotonic() - started:.2f}")
"""
    )
    done = _run(script, fake_server.base_url, "exiter")
    assert done.returncode == 0, done.stderr
    took = float(done.stdout.rsplit("exit flush took ", 1)[1].split()[0])
    assert took < 0.5 + 2 * SLACK  # one 0.5 s budget; 30 of them adding up would be 15 s
    assert fake_server.history == []


def test_a_forked_child_gets_its_own_background_loop(fake_server):
    script = (
        _PRELUDE
        + """
b = bot()
memory.add_to_agent(b)
person().initiate_chat(b, message="Said by the parent.", max_turns=1, silent=True)
assert memory.flush(30).all_delivered
pid = os.fork()
if pid == 0:
    person().initiate_chat(b, message="Said by the child.", max_turns=1, silent=True)
    os._exit(0 if memory.flush(30).all_delivered else 3)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
"""
    )
    done = _run(script, fake_server.base_url, "forky")
    assert done.returncode == 0, done.stderr
    assert "child 0" in done.stdout
    assert [t["content"] for t in fake_server.history] == [
        "Said by the parent.",
        "Noted.",
        "Said by the child.",
        "Noted.",
    ]
