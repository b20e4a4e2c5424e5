"""Users' data through each adapter's public API against memorysync-local.

For the same user: an export taken before the erase holds every fact and turn that
was written; ``forget_user()`` through each of the four adapters leaves ``export()``
empty in every session; the command line and the inspector's routes count what the
API counts; an export imports into another server, idempotently.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from ag2_memorysync import MemorySyncCapability
from ag2_memorysync.v1 import MemorySyncMiddleware
from agent_framework_memorysync import MemorySyncContextProvider
from autogen_memorysync import MemorySyncMemory
from memorysync_core import EXPORT_SCHEMA, MemorySyncAPI, UnsupportedError, UserMemory
from memorysync_local._cli import main as cli_main

USER = "erin@example.com"
WRITES = (
    ("monday", "I live in Porto.", "Noted."),
    ("tuesday", "I am allergic to shellfish.", "I will remember."),
)


def connection(server: Any) -> dict[str, Any]:
    return {"api_key": server.api_key, "base_url": server.base_url, "transport": server.transport}


async def seed(server: Any) -> None:
    """Two sessions of turns (with their facts) and one explicit save, through AutoGen."""
    for session, said, answered in WRITES:
        memory = MemorySyncMemory(user_id=USER, session_id=session, **connection(server))
        await memory.add_turn_pair(said, answered)
        await memory.close()
    memory = MemorySyncMemory(user_id=USER, session_id="monday", **connection(server))
    await memory.save("I prefer aisle seats.")
    await memory.close()


def check_full_export(data: dict[str, Any]) -> None:
    json.dumps(data)  # JSON-serialisable as it is
    assert data["schema"] == EXPORT_SCHEMA
    assert data["complete"] is True
    assert set(data["sessions"]) >= {"autogen::monday", "autogen::tuesday"}
    texts = sorted(m["text"] for m in data["memories"])
    assert texts == ["Allergic to shellfish", "Lives in Porto", "Prefers aisle seats"]
    for session, said, answered in WRITES:
        turns = [(t["role"], t["content"]) for t in data["transcripts"][f"autogen::{session}"]]
        assert turns == [("user", said), ("assistant", answered)]


def check_empty_export(data: dict[str, Any]) -> None:
    assert data["memories"] == []
    assert data["sessions"] == []
    assert data["transcripts"] == {}
    assert data["complete"] is True


def cli(*argv: str) -> Any:
    out = io.StringIO()
    from memorysync_local._cli import build_parser
    from memorysync_local._cli.data_commands import run_data_command

    assert run_data_command(build_parser().parse_args(list(argv)), out) == 0
    return json.loads(out.getvalue())


async def test_autogen_export_then_forget_user(local_server: Any) -> None:
    await seed(local_server)
    memory = MemorySyncMemory(user_id=USER, session_id="other", **connection(local_server))
    try:
        before = await memory.export()
        check_full_export(before)
        # The command line and the inspector's routes count what the API counts.
        [row] = cli("users", "--db", local_server.db_path, "--json")
        assert (row["user_id"], row["memories"], row["turns"], row["sessions"]) == (
            USER,
            len(before["memories"]),
            sum(len(t) for t in before["transcripts"].values()),
            len(before["sessions"]),
        )
        async with httpx.AsyncClient(
            transport=local_server.transport, base_url=local_server.base_url,
            headers={"X-API-Key": local_server.api_key},
        ) as http:  # fmt: skip
            [shown] = (await http.get("/x-local/v1/users")).json()["users"]
        assert shown == row
        page = await memory.list_memories(limit=2)
        assert len(page.items) == 2
        assert page.total == 3
        assert page.next_offset == 2
        rest = await memory.list_memories(limit=2, offset=2)
        assert len(rest.items) == 1
        assert rest.next_offset is None
        sessions = {s["session_id"] for s in await memory.list_sessions()}
        assert sessions == set(before["sessions"])

        report = await memory.forget_user()
        assert report.complete
        assert report.deleted_memories == 3
        assert report.deleted_turns == 4
        assert report.cancelled_jobs == 0
        check_empty_export(await memory.export())
        again = await memory.forget_user()  # idempotent
        assert (again.deleted_memories, again.deleted_turns, again.complete) == (0, 0, True)
        assert cli("users", "--db", local_server.db_path, "--json") == []
    finally:
        await memory.close()


def test_ag2_classic_export_then_forget_user(local_server: Any) -> None:
    import asyncio

    asyncio.run(seed(local_server))
    capability = MemorySyncCapability(user_id=USER, session_id="ag2", **connection(local_server))
    try:
        check_full_export(capability.export())
        report = capability.forget_user()
        assert report.complete
        assert report.deleted_memories == 3
        check_empty_export(capability.export())
        assert capability.list_sessions() == []
    finally:
        capability.close()


async def test_ag2_v1_export_then_forget_user(local_server: Any) -> None:
    await seed(local_server)
    middleware = MemorySyncMiddleware(user_id=USER, **connection(local_server))
    try:
        check_full_export(await middleware.export())
        report = await middleware.forget_user()
        assert report.complete
        assert report.deleted_turns == 4
        check_empty_export(await middleware.export())
    finally:
        await middleware.aclose()


async def test_agent_framework_export_then_forget_user(local_server: Any) -> None:
    await seed(local_server)
    provider = MemorySyncContextProvider(user_id=USER, **connection(local_server))
    try:
        check_full_export(await provider.export())
        report = await provider.forget_user()
        assert report.complete
        assert report.deleted_memories == 3
        assert report.deleted_turns == 4
        check_empty_export(await provider.export())
    finally:
        await provider.close()


async def test_an_export_imports_into_another_server_once(
    make_local_server: Callable[..., Any],
) -> None:
    source, target = make_local_server(), make_local_server()
    await seed(source)
    here = MemorySyncMemory(user_id=USER, session_id="x", **connection(source))
    there = MemorySyncMemory(user_id=USER, session_id="x", **connection(target))
    try:
        exported = await here.export()
        first = await there.import_export(json.loads(json.dumps(exported)))
        assert (first.turns_created, first.turns_skipped) == (4, 0)
        assert first.memories_created + first.memories_skipped == 3
        second = await there.import_export(exported)
        assert (second.memories_created, second.turns_created) == (0, 0)
        assert second.turns_skipped == 4
        assert second.memories_skipped == 3
        copied = await there.export()
        for session in ("autogen::monday", "autogen::tuesday"):
            assert [t["content"] for t in copied["transcripts"][session]] == [
                t["content"] for t in exported["transcripts"][session]
            ]
        with pytest.raises(ValueError, match="schema"):
            await there.import_export({"memories": []})
    finally:
        await here.close()
        await there.close()


async def test_without_the_extension_sessions_are_unsupported_and_erase_is_partial(
    local_server: Any,
) -> None:
    """A server without /x-local (the hosted service): typed error, ``complete=False``."""

    def hosted_like(request: httpx.Request) -> httpx.Response | None:
        if request.url.path.startswith("/x-local/"):
            return httpx.Response(404, json={"detail": "Not Found"})
        return None

    class Hosted(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            answer = hosted_like(request)
            if answer is not None:
                return answer
            response: httpx.Response = await local_server.transport.handle_async_request(request)
            return response

    await seed(local_server)
    api = MemorySyncAPI(base_url=local_server.base_url, api_key=local_server.api_key,
                        transport=Hosted())  # fmt: skip
    memory = UserMemory(api, user_id=USER, session_id="monday", surface="autogen")
    try:
        with pytest.raises(UnsupportedError):
            await memory.list_sessions()
        exported = await memory.export()
        assert exported["complete"] is False
        assert "autogen::monday" in exported["sessions"]
        report = await memory.forget_user()
        assert report.complete is False
        assert report.cancelled_jobs is None
        assert "autogen::monday" in report.sessions
    finally:
        await memory.aclose()
    assert cli_main  # the console entry point imports


def test_the_erase_request_example_proves_nothing_is_left(tmp_path: Any) -> None:
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parents[1] / "examples" / "erase_request.py"
    proc = subprocess.run(
        [sys.executable, str(example)], cwd=tmp_path, capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "exported 3 memories and 4 turns from 2 sessions (complete: True)" in out
    assert "erased 3 memories and 4 turns in 2 sessions (complete: True)" in out
    assert "left after the erase: 0" in out
    assert not list(tmp_path.iterdir())
