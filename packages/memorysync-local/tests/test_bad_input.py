"""Bad input gets a clear 4xx naming the field; nothing is half-written; never a 500."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from shared.local_server import stored_history, stored_memories

T = "local"
TURN = {"tenant_id": T, "user_id": "ana", "text": "I live in Oslo.", "source": "t"}
HISTORY = {"tenant_id": T, "user_id": "ana", "session_id": "s", "source": "t"}


def messages(answer: httpx.Response) -> str:
    detail = answer.json()["detail"]
    return detail if isinstance(detail, str) else " | ".join(d["msg"] for d in detail)


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/memory/add_turn", {**TURN, "text": "x" * 16_001}, "text"),
        ("/v1/memory/add_turn", {**TURN, "text": "   "}, "text"),
        ("/v1/memory/add_turn", {**TURN, "text": 42}, "text"),
        ("/v1/memory/add_turn", {**TURN, "role": "wizard"}, "role"),
        ("/v1/memory/add_turn", {**TURN, "occurred_at": "yesterday"}, "occurred_at"),
        ("/v1/memory/add_turn", {**TURN, "metadata": ["session"]}, "metadata"),
        ("/v1/memory/add_turn", {**TURN, "colour": "blue"}, "colour"),
        ("/v1/memory/add_turn", {k: v for k, v in TURN.items() if k != "user_id"}, "user_id"),
        ("/v1/memory/recall", {"tenant_id": T, "user_id": "ana", "prompt": "x", "k": 0}, "k"),
        ("/v1/memory/recall", {"tenant_id": T, "user_id": "ana", "prompt": "x", "k": "5"}, "k"),
        (
            "/v1/history/append",
            {**HISTORY, "turns": [{"role": "user", "content": "hi"}] * 101},
            "turns",
        ),
        ("/v1/history/append", {**HISTORY, "turns": []}, "turns"),
        (
            "/v1/history/append",
            {**HISTORY, "turns": [{"role": "user", "content": "hi", "mood": "happy"}]},
            "turns.0.mood",
        ),
        (
            "/v1/history/append",
            {**HISTORY, "turns": [{"role": "user", "content": "hi", "seq": "one"}]},
            "turns.0.seq",
        ),
        ("/v1/history/list", {**HISTORY, "limit": 5001}, "limit"),
        ("/v1/history/delete", {"tenant_id": T, "user_id": "ana"}, "session_id or ids"),
        ("/memory/add", {"text": "I like tea", "client_ref": "r" * 129}, "client_ref"),
        ("/memory/add", {"text": "I like tea", "importance": "high"}, "importance"),
    ],
)
async def test_bad_body_is_422_naming_the_field(
    client: httpx.AsyncClient, path: str, body: dict[str, Any], field: str
) -> None:
    answer = await client.post(path, json=body, headers={"X-End-User-ID": "ana"})
    assert answer.status_code == 422, answer.text
    assert field in messages(answer)


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"memory_ids": list(range(1, 102))}, "memory_ids"),
        ({"memory_ids": []}, "memory_ids"),
        ({"memory_ids": ["m_1"]}, "memory_ids"),
        ({"memory_ids": [2**64]}, "memory_ids"),
        ({"memory_ids": [1], "filters": {"source": "x"}}, "exactly one of memory_ids or filters"),
        ({}, "exactly one of memory_ids or filters"),
        ({"filters": {}}, "at least one criterion"),
        ({"filters": {"colour": "red"}}, "filters.colour"),
        ({"filters": {"before": "soon"}}, "filters.before"),
        ({"memory_ids": [1], "dry_run": "yes"}, "dry_run"),
    ],
)
async def test_bad_forget_is_422_naming_the_field(
    client: httpx.AsyncClient, body: dict[str, Any], needle: str
) -> None:
    answer = await client.request(
        "DELETE", "/memory/forget", json=body, headers={"X-End-User-ID": "ana"}
    )
    assert answer.status_code == 422, answer.text
    assert needle in messages(answer)


@pytest.mark.parametrize(
    "raw",
    [
        b"{not json",
        b"",
        b"[1, 2, 3]",
        b'"just a string"',
        b"[" * 50_000 + b"]" * 50_000,
        b'{"tenant_id": "local", "user_id": "ana", "text": "\\ud800 hi", "source": "t"}',
        b'{"tenant_id": "local", "user_id": "ana", "text": "nul \\u0000", "source": "t"}',
        b"\xff\xfe\x00garbage",
        json.dumps({**TURN, "metadata": {"x": float("nan")}}).encode(),
    ],
    ids=[
        "malformed",
        "empty",
        "array",
        "string",
        "deep",
        "surrogate",
        "nul",
        "binary",
        "nan-metadata",
    ],
)
async def test_unparseable_or_unstorable_bodies_are_4xx_and_store_nothing(
    client: httpx.AsyncClient, server: Any, raw: bytes
) -> None:
    answer = await client.post(
        "/v1/memory/add_turn", content=raw, headers={"content-type": "application/json"}
    )
    assert 400 <= answer.status_code < 500, answer.text
    assert (
        "body" in messages(answer) or "text" in messages(answer) or "metadata" in messages(answer)
    )
    assert stored_memories(server, T, "ana") == []


async def test_a_bad_turn_in_an_append_stores_none_of_the_turns(
    client: httpx.AsyncClient, server: Any
) -> None:
    turns = [{"role": "user", "content": "I live in Oslo."}, {"role": "user", "content": 7}]
    answer = await client.post("/v1/history/append", json={**HISTORY, "turns": turns})
    assert answer.status_code == 422
    assert "turns.1.content" in messages(answer)
    assert stored_history(server, T, "ana") == []
    assert stored_memories(server, T, "ana") == []


async def test_bad_query_parameters_name_the_parameter(client: httpx.AsyncClient) -> None:
    answer = await client.get(f"/v1/memory/{T}/ana/list", params={"limit": -1})
    assert answer.status_code == 422
    assert "limit" in messages(answer)
    huge = await client.get(f"/v1/memory/{T}/ana/list", params={"offset": 2**70})
    assert huge.status_code == 422


async def test_oversized_body_is_413(client: httpx.AsyncClient) -> None:
    answer = await client.post(
        "/v1/memory/add_turn",
        content=b'{"text": "' + b"x" * (9 * 1024 * 1024) + b'"}',
        headers={"content-type": "application/json"},
    )
    assert answer.status_code == 413
    assert "body" in messages(answer)


async def test_unknown_route_and_method_are_4xx(client: httpx.AsyncClient) -> None:
    assert (await client.get("/v1/nothing")).status_code == 404
    assert (await client.put("/v1/memory/add_turn", json=TURN)).status_code == 405
