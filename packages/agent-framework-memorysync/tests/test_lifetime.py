"""Who delivers and closes: ``async with``, ``close()``, ``asyncio.run`` per request, exit."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from agent_framework_memorysync import MemorySyncContextProvider
from shared.local_server import stored_history

ROOT = Path(__file__).resolve().parents[3]
MARKER = "<user_memories>"


def _turns(server: Any, user: str = "alice") -> list[tuple[str, str]]:
    return [(h["role"], h["content"]) for h in stored_history(server, server.tenant_id, user)]


def _provider(server: Any, **settings: Any) -> MemorySyncContextProvider:
    return MemorySyncContextProvider(
        user_id="alice", api_key=server.api_key, base_url=server.base_url, **settings
    )


async def test_async_with_delivers_everything_on_exit(served_local_server: Any, kit: Any) -> None:
    async with _provider(served_local_server) as memory:
        agent = kit.agent(kit.ScriptedChatClient(["Noted."]), memory)
        await agent.run("I live in Lisbon.", session=agent.create_session())
    assert memory.pending == 0
    assert _turns(served_local_server) == [("user", "I live in Lisbon."), ("assistant", "Noted.")]


async def test_close_reports_and_the_provider_can_be_used_again(
    served_local_server: Any, kit: Any
) -> None:
    memory = _provider(served_local_server)
    agent = kit.agent(kit.ScriptedChatClient(["One.", "Two."]), memory)
    session = agent.create_session()
    await agent.run("I live in Lisbon.", session=session)
    first = await memory.close()
    assert (first.delivered, first.pending, first.refused) == (2, 0, 0)
    assert await memory.close() == type(first)()  # idempotent: nothing left
    await agent.run("I prefer window seats.", session=session)  # reused after close
    second = await memory.aclose()
    assert second.delivered == 2
    assert [text for _, text in _turns(served_local_server)] == [
        "I live in Lisbon.",
        "One.",
        "I prefer window seats.",
        "Two.",
    ]


def test_two_asyncio_run_calls_in_a_row_both_recall_and_capture(
    served_local_server: Any, kit: Any
) -> None:
    """A web app calling ``asyncio.run`` per request, with one provider for the process.

    Each request ends with ``close()``: it delivers that request's turns and releases
    that loop's connection; the provider stays usable for the next request.
    """
    memory = _provider(served_local_server)
    client = kit.ScriptedChatClient(["First.", "Second."])
    agent = kit.agent(client, memory)
    session = agent.create_session()

    async def request(text: str) -> Any:
        await agent.run(text, session=session)
        return await memory.close()

    async def remember(text: str) -> None:
        await memory.save(text)
        await memory.close()

    asyncio.run(remember("I am vegetarian and I live in Lisbon."))
    first = asyncio.run(request("A vegetarian place in Lisbon for lunch?"))
    second = asyncio.run(request("And a vegetarian place in Lisbon for dinner?"))
    assert (first.delivered, second.delivered) == (2, 2)
    assert first.all_delivered
    assert second.all_delivered
    assert [text.count(MARKER) for text in kit.instructions(client)] == [1, 1]
    assert _turns(served_local_server) == [
        ("user", "A vegetarian place in Lisbon for lunch?"),
        ("assistant", "First."),
        ("user", "And a vegetarian place in Lisbon for dinner?"),
        ("assistant", "Second."),
    ]


def _run_script(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, **env},
        check=False,
    )


TELL = """
    import asyncio, os, sys
    sys.path.insert(0, os.environ["TESTS_DIR"])
    from conftest import ScriptedChatClient, Kit
    from agent_framework_memorysync import MemorySyncContextProvider

    async def main() -> None:
        memory = MemorySyncContextProvider(
            user_id="alice", api_key=os.environ["KEY"], base_url=os.environ["URL"]
        )
        agent = Kit.agent(ScriptedChatClient(["Noted."]), memory)
        session = agent.create_session(session_id=os.environ["SESSION"])
        await agent.run(os.environ["TEXT"], session=session)
        if os.environ.get("CLOSE") == "1":
            assert (await memory.close()).all_delivered
        # else: nothing closes the provider; the exit handler must deliver

    asyncio.run(main())
"""


def test_the_exit_handler_delivers_what_nobody_closed(served_local_server: Any) -> None:
    done = _run_script(
        TELL,
        TESTS_DIR=str(Path(__file__).parent),
        KEY=served_local_server.api_key,
        URL=served_local_server.base_url,
        SESSION="left-open",
        TEXT="I live in Lisbon.",
    )
    assert done.returncode == 0, done.stderr
    assert _turns(served_local_server) == [("user", "I live in Lisbon."), ("assistant", "Noted.")]


async def test_a_second_process_recalls_what_the_first_was_told(
    served_local_server: Any, kit: Any
) -> None:
    done = await asyncio.to_thread(
        _run_script,
        TELL,
        TESTS_DIR=str(Path(__file__).parent),
        KEY=served_local_server.api_key,
        URL=served_local_server.base_url,
        SESSION="monday",
        TEXT="I am vegetarian and I live in Lisbon.",
        CLOSE="1",
    )
    assert done.returncode == 0, done.stderr
    async with _provider(served_local_server) as memory:
        client = kit.ScriptedChatClient(["Try Ao 26."])
        agent = kit.agent(client, memory)
        await agent.run(
            "A vegetarian restaurant in Lisbon tonight?", session=agent.create_session()
        )
    (instructions,) = kit.instructions(client)
    assert instructions.count(MARKER) == 1
    assert "Vegetarian" in instructions
    assert "Lisbon" in instructions
