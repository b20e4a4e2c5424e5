"""Defects from the attack run (issue 12): each answer is a 4xx naming the field, never
a 500, and a refused request writes nothing."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from typing import Any

import httpx
import pytest

from shared.local_server import stored_history, stored_memories, stored_turn_receipts

T = "local"
HISTORY = {"tenant_id": T, "user_id": "ana", "session_id": "s", "source": "t"}
TURN = {"tenant_id": T, "user_id": "ana", "text": "I live in Oslo.", "source": "t"}


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": value}
    return value


def messages(answer: httpx.Response) -> str:
    detail = answer.json()["detail"]
    return detail if isinstance(detail, str) else " | ".join(d["msg"] for d in detail)


# --- item 1: nesting is checked once, before anything is written --------------------


@pytest.mark.parametrize("depth", [65, 253, 300, 900])
async def test_a_deep_payload_is_422_and_stores_nothing(
    client: httpx.AsyncClient, server: Any, depth: int
) -> None:
    turns = [{"role": "user", "content": "I live in Oslo.", "payload": nested(depth)}]
    for _ in range(3):  # a client retries; no attempt may add a row
        answer = await client.post("/v1/history/append", json={**HISTORY, "turns": turns})
        assert answer.status_code == 422, answer.text
        assert "turns.0.payload" in messages(answer)
        assert "64 levels" in messages(answer)
    assert stored_history(server, T, "ana") == []
    assert stored_memories(server, T, "ana") == []
    listed = await client.post("/v1/history/list", json=HISTORY)
    assert listed.status_code == 200
    assert listed.json() == {"items": [], "total": 0}


async def test_a_payload_at_the_limit_is_stored_and_listed(
    client: httpx.AsyncClient, server: Any
) -> None:
    turns = [{"role": "assistant", "content": "ok", "payload": nested(64)}]
    answer = await client.post("/v1/history/append", json={**HISTORY, "turns": turns})
    assert answer.status_code == 200, answer.text
    assert answer.json()["items"][0]["payload"] == nested(64)
    listed = await client.post("/v1/history/list", json=HISTORY)
    assert listed.status_code == 200
    assert listed.json()["items"][0]["payload"] == nested(64)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/memory/add_turn", {**TURN, "metadata": {"m": nested(300)}}),
        ("/memory/add", {"text": "I like tea.", "metadata": {"m": nested(300)}}),
        (
            "/v1/history/append",
            {**HISTORY, "turns": [{"role": "user", "content": "hi"}], "metadata": nested(300)},
        ),
    ],
)
async def test_deep_metadata_is_the_same_422_on_every_route(
    client: httpx.AsyncClient, server: Any, path: str, body: dict[str, Any]
) -> None:
    answer = await client.post(path, json=body, headers={"X-End-User-ID": "ana"})
    assert answer.status_code == 422, answer.text
    assert "metadata" in messages(answer)
    assert "64 levels" in messages(answer)
    assert stored_memories(server, T, "ana") == []
    assert stored_history(server, T, "ana") == []


async def test_a_deep_payload_stored_by_an_older_server_still_lists(
    client: httpx.AsyncClient, server: Any
) -> None:
    first = await client.post(
        "/v1/history/append",
        json={**HISTORY, "turns": [{"role": "user", "content": "hello there"}]},
    )
    assert first.status_code == 200
    # What the old input check let through: 300 levels, past pydantic's serializer.
    with closing(sqlite3.connect(server.db_path)) as conn:
        conn.execute("UPDATE history SET payload = ?", (json.dumps(nested(300)),))
        conn.commit()
    listed = await client.post("/v1/history/list", json=HISTORY)
    assert listed.status_code == 200, listed.text
    assert listed.json()["items"][0]["payload"] == nested(300)


# --- item 3: timestamps at both ends of the calendar ---------------------------------

EDGES = ["9999-12-31T23:59:59-05:00", "0001-01-01T00:00:00+05:00"]


@pytest.mark.parametrize("moment", EDGES)
async def test_an_out_of_range_occurred_at_is_422_on_add_turn(
    client: httpx.AsyncClient, server: Any, moment: str
) -> None:
    answer = await client.post("/v1/memory/add_turn", json={**TURN, "occurred_at": moment})
    assert answer.status_code == 422, answer.text
    assert "occurred_at" in messages(answer)
    assert "0001-9999" in messages(answer)
    assert stored_memories(server, T, "ana") == []
    assert stored_turn_receipts(server, T, "ana") == []


@pytest.mark.parametrize("moment", EDGES)
async def test_an_out_of_range_occurred_at_is_422_on_history_append(
    client: httpx.AsyncClient, server: Any, moment: str
) -> None:
    turns = [{"role": "user", "content": "I live in Oslo.", "occurred_at": moment}]
    answer = await client.post("/v1/history/append", json={**HISTORY, "turns": turns})
    assert answer.status_code == 422, answer.text
    assert "turns.0.occurred_at" in messages(answer)
    assert stored_history(server, T, "ana") == []


@pytest.mark.parametrize("moment", EDGES)
@pytest.mark.parametrize("field", ["before", "after"])
async def test_an_out_of_range_forget_filter_is_422(
    client: httpx.AsyncClient, moment: str, field: str
) -> None:
    answer = await client.request(
        "DELETE",
        "/memory/forget",
        json={"filters": {field: moment}},
        headers={"X-End-User-ID": "ana"},
    )
    assert answer.status_code == 422, answer.text
    assert f"filters.{field}" in messages(answer)


@pytest.mark.parametrize(
    ("moment", "stored"),
    [
        ("0001-01-01T00:00:00Z", "0001-01-01T00:00:00.000000Z"),
        ("9999-12-31T23:59:59.999999+00:00", "9999-12-31T23:59:59.999999Z"),
        ("0999-06-01T12:00:00+01:00", "0999-06-01T11:00:00.000000Z"),
    ],
)
async def test_the_calendars_own_ends_are_stored_zero_padded(
    client: httpx.AsyncClient, moment: str, stored: str
) -> None:
    turns = [{"role": "assistant", "content": "x", "occurred_at": moment}]
    answer = await client.post("/v1/history/append", json={**HISTORY, "turns": turns})
    assert answer.status_code == 200, answer.text
    assert answer.json()["items"][0]["occurred_at"] == stored
