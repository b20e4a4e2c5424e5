"""An import stores what it should (issue 26 item 2): an item's identity is what it is.

Before: facts went as ``client_ref="import:<source id>"`` and turns as
``idempotency_key="import:<source id>"``, so an export without ids stored 1 fact of
5, an export from another server with overlapping ids stored none, and a memory
deleted after an import never came back. The core's ``import_export`` runs here
against this server over its real routes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from memorysync_core import EXPORT_SCHEMA, ImportSkip, MemorySyncAPI, UserMemory
from shared.local_server import stored_history, stored_memories

USER = "ana"
FACTS = ["Lives in Porto", "Allergic to peanuts", "Prefers aisle seats", "Works as a nurse"]
OTHER_FACTS = ["Lives in Lima", "Allergic to shellfish", "Prefers window seats", "Likes tea"]


def export_of(
    facts: list[str], *, ids: bool = True, turns: tuple[str, str] = ("Hello.", "Hi there.")
) -> dict[str, Any]:
    """An export as another server would write it (ids 1, 2, ... when ``ids``)."""
    memories = [
        {
            **({"memory_id": n + 1} if ids else {}),
            "text": text,
            "session_id": "s1",
            "created_at": f"2026-01-0{n + 1}T10:00:00Z",
        }
        for n, text in enumerate(facts)
    ]
    transcript = [
        {
            "id": f"h_{n + 1}",
            "role": role,
            "content": content,
            "seq": n,
            "occurred_at": "2026-01-01T10:00:00Z",
        }
        for n, (role, content) in enumerate(zip(("user", "assistant"), turns, strict=True))
    ]
    return {
        "schema": EXPORT_SCHEMA,
        "user_id": USER,
        "memories": memories,
        "transcripts": {"s1": transcript},
    }


@pytest.fixture
async def target(make_local_server: Callable[..., Any]) -> AsyncIterator[tuple[Any, UserMemory]]:
    srv = make_local_server()
    api = MemorySyncAPI(api_key=srv.api_key, base_url=srv.base_url, transport=srv.transport)
    memory = UserMemory(api, user_id=USER, session_id="x", surface="test")
    try:
        yield srv, memory
    finally:
        await memory.aclose()
        await api.aclose()


def texts(srv: Any) -> list[str]:
    return sorted(m["text"] for m in stored_memories(srv, srv.tenant_id, USER))


async def test_memories_without_ids_are_all_imported(target: tuple[Any, UserMemory]) -> None:
    srv, memory = target
    report = await memory.import_export(export_of(FACTS, ids=False))
    assert (report.memories_created, report.memories_skipped) == (4, 0)
    assert report.skipped == ()
    assert texts(srv) == sorted(FACTS)


async def test_another_servers_export_with_overlapping_ids_is_imported_whole(
    target: tuple[Any, UserMemory],
) -> None:
    srv, memory = target
    await memory.import_export(export_of(FACTS))
    other = export_of(OTHER_FACTS, turns=("Good morning.", "Morning!"))
    report = await memory.import_export(other)
    assert (report.memories_created, report.turns_created) == (4, 2)
    assert report.skipped == ()
    assert texts(srv) == sorted(FACTS + OTHER_FACTS)
    history = stored_history(srv, srv.tenant_id, USER, "s1")
    assert [t["content"] for t in history] == ["Hello.", "Hi there.", "Good morning.", "Morning!"]


async def test_a_deleted_memory_comes_back_on_reimport(target: tuple[Any, UserMemory]) -> None:
    srv, memory = target
    data = export_of(FACTS)
    await memory.import_export(data)
    [gone] = [m for m in stored_memories(srv, srv.tenant_id, USER) if m["text"] == FACTS[1]]
    assert await memory.api.forget(user_id=USER, memory_ids=[gone["id"]]) == [gone["id"]]
    assert FACTS[1] not in texts(srv)
    report = await memory.import_export(data)
    assert (report.memories_created, report.memories_skipped) == (1, 3)
    assert texts(srv) == sorted(FACTS)


async def test_a_reimport_of_the_same_file_is_idempotent_and_says_what_it_skipped(
    target: tuple[Any, UserMemory],
) -> None:
    srv, memory = target
    data = export_of(FACTS)
    first = await memory.import_export(data)
    assert (first.memories_created, first.turns_created) == (4, 2)
    second = await memory.import_export(data)
    assert (second.memories_created, second.memories_skipped) == (0, 4)
    assert (second.turns_created, second.turns_skipped) == (0, 2)
    assert second.skipped[0] == ImportSkip("memory", "1", "s1", FACTS[0], "already_ingested")
    assert second.skipped[-1] == ImportSkip("turn", "h_2", "s1", "Hi there.", "already_stored")
    assert len(second.skipped) == 6
    assert texts(srv) == sorted(FACTS)
    assert len(stored_history(srv, srv.tenant_id, USER, "s1")) == 2
