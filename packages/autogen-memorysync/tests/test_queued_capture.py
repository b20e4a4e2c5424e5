"""``capture_exchange``: queued like the other adapters' capture (issue 23, item 1).

The fault cases (server down, wrong key, 500) run through a real ``AssistantAgent`` in
``tests/test_faults_autogen.py``; here: order, the report, and the exit handler.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_ext.models.replay import ReplayChatCompletionClient

from autogen_memorysync import MemorySyncMemory
from shared.local_server import stored_history


def _memory(server: Any, **settings: Any) -> MemorySyncMemory:
    return MemorySyncMemory(
        user_id="alice", api_key=server.api_key, base_url=server.base_url, **settings
    )


async def test_exchanges_are_delivered_in_order_and_reported(served_local_server: Any) -> None:
    memory = _memory(served_local_server, session_id="trip")
    replies = ["Noted.", "Window it is.", "Lisbon, then."]
    agent = AssistantAgent(
        "assistant", model_client=ReplayChatCompletionClient(replies), memory=[memory]
    )
    said = ["I am vegetarian.", "I prefer window seats.", "I fly home to Lisbon."]
    for text in said:
        result = await agent.run(task=text)
        assert memory.capture_exchange(text, str(result.messages[-1].content))
    report = await memory.flush(timeout=10)
    await memory.close()
    assert (report.delivered, report.refused, report.pending) == (6, 0, 0)
    rows = stored_history(served_local_server, served_local_server.tenant_id, "alice")
    expected = [text for pair in zip(said, replies, strict=True) for text in pair]
    assert [r["content"] for r in rows] == expected
    assert memory.report() == report  # still true after close


async def test_nothing_to_capture_is_refused_with_a_warning_not_an_error(
    served_local_server: Any, caplog: Any
) -> None:
    memory = _memory(served_local_server)
    assert memory.capture_exchange("   ", "Noted.") is False
    assert memory.capture_exchange(None, "Noted.") is False  # type: ignore[arg-type]
    assert "capture skipped" in caplog.text
    await memory.close()
    assert memory.report().delivered == 0


async def test_a_capture_of_a_number_names_the_type(served_local_server: Any, caplog: Any) -> None:
    memory = _memory(served_local_server)
    assert memory.capture_exchange(123, "Noted.") is False  # type: ignore[arg-type]
    assert "user_text must be a str, got int" in caplog.text
    await memory.close()


def test_a_misspelled_setting_names_the_setting_it_resembles(served_local_server: Any) -> None:
    with pytest.raises(TypeError, match=r"unknown settings: topk \(did you mean `top_k`\?\)"):
        _memory(served_local_server, topk=3)


def test_without_a_running_loop_capture_is_refused_not_raised(served_local_server: Any) -> None:
    memory = _memory(served_local_server)
    assert memory.capture_exchange("I live in Lisbon.", "Noted.") is False


EXIT_SCRIPT = """
    import asyncio, os
    from autogen_memorysync import MemorySyncMemory

    async def main() -> None:
        memory = MemorySyncMemory(
            user_id="alice", api_key=os.environ["KEY"], base_url=os.environ["URL"]
        )
        memory.capture_exchange("I live in Lisbon.", "Noted.")
        # no flush, no close: the core's exit handler must deliver it

    asyncio.run(main())
"""


def test_the_exit_handler_delivers_what_nobody_closed(served_local_server: Any) -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(EXIT_SCRIPT)],
        capture_output=True,
        text=True,
        timeout=120,
        env={
            **os.environ,
            "KEY": served_local_server.api_key,
            "URL": served_local_server.base_url,
        },
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = stored_history(served_local_server, served_local_server.tenant_id, "alice")
    assert [(r["role"], r["content"]) for r in rows] == [
        ("user", "I live in Lisbon."),
        ("assistant", "Noted."),
    ]
