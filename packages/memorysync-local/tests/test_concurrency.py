"""Races: concurrent duplicates, several event loops and threads on one app."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from memorysync_local import embedded
from shared.local_server import client_for, stored_history, stored_memories, stored_turn_receipts

BODY = {
    "tenant_id": "local",
    "user_id": "ana",
    "text": "I'm allergic to peanuts and I live in Lisbon.",
    "source": "test",
    "speaker": "human@autogen::s#h041ad25ce2132a2f",
    "occurred_at": "2026-03-01T10:00:00Z",
}


@pytest.mark.parametrize("served", [False, True], ids=["embedded", "served"])
async def test_twenty_identical_add_turns_at_once_extract_once(
    make_local_server: Callable[..., Any], served: bool
) -> None:
    srv = make_local_server(served=served)
    async with client_for(srv) as c:
        answers = await asyncio.gather(
            *(c.post("/v1/memory/add_turn", json=BODY) for _ in range(20))
        )
    bodies = [a.json() for a in answers]
    assert all(a.status_code == 200 for a in answers)
    statuses = sorted(b["processing_status"] for b in bodies)
    assert statuses == ["completed"] + ["skipped_replay"] * 19
    assert sum(b["already_exists"] for b in bodies) == 19
    assert [m["text"] for m in stored_memories(srv, "local", "ana")] == [
        "Allergic to peanuts",
        "Lives in Lisbon",
    ]
    assert len(stored_turn_receipts(srv, "local", "ana")) == 1


@pytest.mark.parametrize("served", [False, True], ids=["embedded", "served"])
async def test_concurrent_history_retries_store_each_turn_once(
    make_local_server: Callable[..., Any], served: bool
) -> None:
    srv = make_local_server(served=served)
    body = {
        "tenant_id": "local",
        "user_id": "ana",
        "session_id": "s",
        "source": "t",
        "turns": [
            {"role": "user", "content": "I live in Lisbon.", "idempotency_key": "seed:cap1"},
            {"role": "assistant", "content": "Nice city.", "seq": 2},
        ],
    }
    async with client_for(srv) as c:
        answers = await asyncio.gather(
            *(c.post("/v1/history/append", json=body) for _ in range(10))
        )
    created = [i["created"] for a in answers for i in a.json()["items"]]
    assert created.count(True) == 2
    assert len(stored_history(srv, "local", "ana")) == 2
    assert len(stored_memories(srv, "local", "ana")) == 1


def test_embedded_app_is_usable_from_several_loops_and_threads(tmp_path: Any) -> None:
    """No loop-bound state: four threads, each with its own event loop, share one app."""
    with embedded(str(tmp_path / "db.sqlite")) as srv:
        errors: list[BaseException] = []
        barrier = threading.Barrier(4)

        def worker(n: int) -> None:
            async def run() -> None:
                async with httpx.AsyncClient(
                    transport=srv.transport,
                    base_url=srv.base_url,
                    headers={"X-API-Key": srv.api_key},
                ) as c:
                    barrier.wait()
                    for i in range(5):
                        answer = await c.post(
                            "/v1/memory/add_turn",
                            json={**BODY, "user_id": f"u{n}", "text": f"I own {i + 2} bikes."},
                        )
                        assert answer.json()["processing_status"] == "completed"

            try:
                asyncio.run(run())
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == []
        assert all(len(stored_memories(srv, "local", f"u{n}")) == 5 for n in range(4))


def test_in_memory_database_is_shared_by_every_thread() -> None:
    """':memory:' is one database, whichever thread or loop serves a request."""
    with embedded(":memory:") as srv:

        async def write() -> None:
            async with httpx.AsyncClient(
                transport=srv.transport, base_url=srv.base_url, headers={"X-API-Key": srv.api_key}
            ) as c:
                await c.post("/v1/memory/add_turn", json={**BODY, "text": "I live in Oslo."})

        async def read() -> list[str]:
            async with httpx.AsyncClient(
                transport=srv.transport, base_url=srv.base_url, headers={"X-API-Key": srv.api_key}
            ) as c:
                listed = await c.get("/v1/memory/local/ana/list")
                return [m["text"] for m in listed.json()["memories"]]

        thread = threading.Thread(target=lambda: asyncio.run(write()))
        thread.start()
        thread.join(30)
        assert asyncio.run(read()) == ["Lives in Oslo"]


async def test_async_extraction_answers_distilling_then_stores(
    make_local_server: Callable[..., Any],
) -> None:
    srv = make_local_server(async_extraction=True)
    async with client_for(srv) as c:
        answer = (await c.post("/v1/memory/add_turn", json=BODY)).json()
        filler = (await c.post("/v1/memory/add_turn", json={**BODY, "text": "thanks!"})).json()
    assert answer["status"] == "processing"
    assert answer["processing_status"] == "distilling"
    assert filler["processing_status"] == "skipped_low_value"
    assert srv.wait_for_extraction(10)
    assert len(stored_memories(srv, "local", "ana")) == 2
