"""Defects from the attack run (issue 12): each answer is a 4xx naming the field, never
a 500, and a refused request writes nothing."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from shared.local_server import execute, stored_history, stored_memories, stored_turn_receipts

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
    execute(server, "UPDATE history SET payload = ?", (json.dumps(nested(300)),))
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


# --- item 6: tenant and user ids that are awkward in a path ---------------------------

AWKWARD = ["a/b", "50%", "a%2Fb", "x y", ".", "..", "josé", "用户", "a/../b"]


def segment(value: str) -> str:
    """One path segment, as a client must send it: dot segments encoded too."""
    quoted = quote(value, safe="")
    return quoted.replace(".", "%2E") if set(value) == {"."} else quoted


@pytest.mark.parametrize("tenant", ["team/a", "50%", "x y", "..", "équipe"])
async def test_a_tenant_id_with_a_slash_or_percent_lists_its_own_memories(
    make_local_server: Any, clients: Any, tenant: str
) -> None:
    for served in (False, True):
        server = make_local_server(served=served, api_key="ms_team", tenant_id=tenant)
        async with clients(server) as client:
            body = {"tenant_id": tenant, "user_id": "ana", "text": "I live in Oslo.", "source": "t"}
            stored = await client.post("/v1/memory/add_turn", json=body)
            assert stored.status_code == 200, stored.text
            listed = await client.get(f"/v1/memory/{segment(tenant)}/ana/list")
            assert listed.status_code == 200, listed.text
            assert [m["text"] for m in listed.json()["memories"]] == ["Lives in Oslo"]


@pytest.mark.parametrize("user", AWKWARD)
async def test_an_awkward_user_id_works_on_every_body_and_path_route(
    client: httpx.AsyncClient, server: Any, user: str
) -> None:
    body = {"tenant_id": T, "user_id": user}
    stored = await client.post(
        "/v1/memory/add_turn", json={**body, "text": "I live in Oslo.", "source": "t"}
    )
    assert stored.status_code == 200, stored.text
    listed = await client.get(f"/v1/memory/{T}/{segment(user)}/list")
    assert listed.status_code == 200, listed.text
    assert [m["text"] for m in listed.json()["memories"]] == ["Lives in Oslo"]
    for route in ("/v1/memory/recall", "/v1/memory/query"):
        found = await client.post(route, json={**body, "prompt": "Oslo"})
        assert [m["text"] for m in found.json()["memories"]] == ["Lives in Oslo"], route
    session = {**body, "session_id": user, "source": "t"}
    appended = await client.post(
        "/v1/history/append", json={**session, "turns": [{"role": "user", "content": "hi"}]}
    )
    assert appended.status_code == 200, appended.text
    history = await client.post("/v1/history/list", json=session)
    assert [i["content"] for i in history.json()["items"]] == ["hi"]
    deleted = await client.post("/v1/history/delete", json={**body, "session_id": user})
    assert len(deleted.json()["deleted_ids"]) == 1
    # No other user's rows were touched: the neighbours of the id see nothing.
    for other in {"a", "b", "ana", "", "x"} - {user}:
        if other:
            assert stored_memories(server, T, other) == []


@pytest.mark.parametrize("user", ["a/b", "50%", "x y", ".", "..", "a/../b"])
async def test_an_awkward_user_id_works_on_the_header_routes(
    client: httpx.AsyncClient, server: Any, user: str
) -> None:
    headers = {"X-End-User-ID": user}
    added = await client.post("/memory/add", json={"text": "I like tea."}, headers=headers)
    assert added.status_code == 200, added.text
    assert [m["text"] for m in stored_memories(server, T, user)] == ["Likes tea"]
    listed = await client.get(f"/v1/memory/{T}/{segment(user)}/list")
    assert [m["text"] for m in listed.json()["memories"]] == ["Likes tea"]
    forgot = await client.request(
        "DELETE", "/memory/forget", json={"filters": {"source": "x"}}, headers=headers
    )
    assert forgot.status_code == 200
    forgot = await client.request(
        "DELETE", "/memory/forget", json={"memory_ids": [added.json()["id"]]}, headers=headers
    )
    assert forgot.json() == [added.json()["id"]]
    assert stored_memories(server, T, user) == []


async def test_a_list_path_with_a_bad_utf8_escape_is_a_400_not_a_500(
    client: httpx.AsyncClient,
) -> None:
    answer = await client.get(f"/v1/memory/{T}/%FF%FE/list")
    assert answer.status_code == 400
    assert answer.json() == {"detail": "path: not valid UTF-8 once percent-decoded"}
