"""Every route of the contract, over the embedded transport and over real HTTP."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from shared.local_server import client_for, stored_history, stored_memories

T = "local"


def turn(text: str, **extra: Any) -> dict[str, Any]:
    return {"tenant_id": T, "user_id": "ana", "text": text, "source": "test", **extra}


async def test_projects_lists_the_keys_tenant(client: httpx.AsyncClient) -> None:
    answer = await client.get("/org/projects")
    assert answer.status_code == 200
    [project] = answer.json()
    assert project["tenant_id"] == "local"
    assert project["id"].startswith("proj_")
    assert project["is_default"] is True
    assert answer.headers["x-request-id"].startswith("req_")


async def test_add_turn_stores_facts_inline_and_never_the_turn(
    client: httpx.AsyncClient, server: Any
) -> None:
    answer = await client.post(
        "/v1/memory/add_turn",
        json=turn(
            "Hi! I live in Lisbon and I'm allergic to peanuts. What's the weather like?",
            metadata={"session_id": "autogen::s1", "channel": "web", "nested": {"x": 1}},
        ),
    )
    assert answer.status_code == 200
    body = answer.json()
    assert body == {
        "status": "ok",
        "processing_status": "completed",
        "request_id": body["request_id"],
        "memory_id": None,
        "already_exists": False,
    }
    rows = stored_memories(server, T, "ana")
    assert [r["text"] for r in rows] == ["Lives in Lisbon", "Allergic to peanuts"]
    assert all(r["session_id"] == "autogen::s1" for r in rows)
    assert rows[0]["metadata"] == {"channel": "web", "session_id": "autogen::s1"}


async def test_add_turn_filler_and_non_user_turns_store_nothing(
    client: httpx.AsyncClient, server: Any
) -> None:
    filler = await client.post("/v1/memory/add_turn", json=turn("ok, thanks!"))
    assistant = await client.post(
        "/v1/memory/add_turn", json=turn("I love Lisbon too.", role="assistant")
    )
    prefixed = await client.post("/v1/memory/add_turn", json=turn("assistant: I live in Rome."))
    by_speaker = await client.post(
        "/v1/memory/add_turn", json=turn("I live in Rome.", speaker="ai@autogen::s#h0")
    )
    by_metadata = await client.post(
        "/v1/memory/add_turn", json=turn("I live in Rome.", metadata={"role": "tool"})
    )
    assert filler.json()["processing_status"] == "skipped_low_value"
    for answer in (assistant, prefixed, by_speaker, by_metadata):
        assert answer.json()["processing_status"] == "skipped_non_user_turn"
    assert stored_memories(server, T, "ana") == []


async def test_add_turn_user_prefix_is_removed_before_extraction(
    client: httpx.AsyncClient, server: Any
) -> None:
    answer = await client.post("/v1/memory/add_turn", json=turn("user: I prefer aisle seats."))
    assert answer.json()["processing_status"] == "completed"
    assert [r["text"] for r in stored_memories(server, T, "ana")] == ["Prefers aisle seats"]


async def test_add_turn_replay_is_recognised_and_not_extracted_again(
    client: httpx.AsyncClient, server: Any
) -> None:
    body = turn(
        "I work as a nurse.", speaker="human@autogen::s#h1", occurred_at="2026-01-02T03:04:05Z"
    )
    first = (await client.post("/v1/memory/add_turn", json=body)).json()
    # The same instant in another notation is the same occurred_at.
    body["occurred_at"] = "2026-01-02T03:04:05+00:00"
    again = (await client.post("/v1/memory/add_turn", json=body)).json()
    later = (
        await client.post(
            "/v1/memory/add_turn", json={**body, "occurred_at": "2026-01-02T09:00:00Z"}
        )
    ).json()
    assert first["already_exists"] is False
    assert again["processing_status"] == "skipped_replay"
    assert again["already_exists"] is True
    assert later["processing_status"] == "completed"
    # The later turn says a fact that is already current: the turn is kept, the fact once.
    assert len(stored_memories(server, T, "ana")) == 1


async def test_add_turn_replay_without_occurred_at_compares_equal(
    client: httpx.AsyncClient,
) -> None:
    body = turn("I have two cats.", speaker="human@x#h2")
    await client.post("/v1/memory/add_turn", json=body)
    again = await client.post("/v1/memory/add_turn", json=body)
    assert again.json()["processing_status"] == "skipped_replay"


async def test_recall_groups_context_and_scores_memories(client: httpx.AsyncClient) -> None:
    await client.post(
        "/v1/memory/add_turn",
        json=turn("I'm allergic to shellfish. I live in Porto. I love sailing on weekends."),
    )
    answer = await client.post(
        "/v1/memory/recall",
        json={"tenant_id": T, "user_id": "ana", "prompt": "any shellfish dishes in Porto?", "k": 5},
    )
    assert answer.status_code == 200
    body = answer.json()
    texts = [m["value"] for m in body["memories"]]
    assert set(texts) == {"Allergic to shellfish", "Lives in Porto"}
    assert all(isinstance(m["memory_id"], int) and 0 < m["score"] <= 1 for m in body["memories"])
    assert body["context"].count("- ") == 2
    assert "Constraints:\n- Allergic to shellfish" in body["context"]
    assert isinstance(body["latency_ms"], float)


async def test_recall_nothing_relevant_is_empty(client: httpx.AsyncClient) -> None:
    await client.post("/v1/memory/add_turn", json=turn("I live in Porto."))
    answer = await client.post(
        "/v1/memory/recall", json={"tenant_id": T, "user_id": "ana", "prompt": "quantum physics"}
    )
    assert answer.json()["context"] == ""
    assert answer.json()["memories"] == []


@pytest.mark.parametrize("served", [False, True], ids=["embedded", "served"])
async def test_recall_equal_word_scores_prefer_the_newest(
    make_local_server: Any, served: bool
) -> None:
    # Word recall alone: with recall by meaning, the closer meaning decides a tie.
    server = make_local_server(served=served, embedder="none")
    async with client_for(server) as client:
        await client.post("/v1/memory/add_turn", json=turn("I play chess."))
        await client.post("/v1/memory/add_turn", json=turn("I teach chess."))
        answer = await client.post(
            "/v1/memory/query", json={"tenant_id": T, "user_id": "ana", "prompt": "chess", "k": 1}
        )
    [best] = answer.json()["memories"]
    assert best["value"] == "Teaches chess"


async def test_the_same_fact_from_two_sessions_is_recalled_once(
    client: httpx.AsyncClient, server: Any
) -> None:
    for day, session in (("01", "autogen::s1"), ("02", "autogen::s2")):
        said = turn(
            "I prefer aisle seats.",
            occurred_at=f"2026-11-{day}T10:00:00Z",
            metadata={"session_id": session},
        )
        await client.post("/v1/memory/add_turn", json=said)
    assert len(stored_memories(server, T, "ana")) == 2  # both sessions keep their fact
    answer = await client.post(
        "/v1/memory/recall", json={"tenant_id": T, "user_id": "ana", "prompt": "aisle seats"}
    )
    assert [m["value"] for m in answer.json()["memories"]] == ["Prefers aisle seats"]
    assert answer.json()["context"].count("Prefers aisle seats") == 1


async def test_query_returns_memories_only(client: httpx.AsyncClient) -> None:
    await client.post("/v1/memory/add_turn", json=turn("I prefer window seats."))
    answer = await client.post(
        "/v1/memory/query", json={"tenant_id": T, "user_id": "ana", "prompt": "window seat"}
    )
    assert set(answer.json()) == {"memories"}
    assert [m["value"] for m in answer.json()["memories"]] == ["Prefers window seats"]


async def test_list_is_newest_first_with_production_metadata_and_pages(
    client: httpx.AsyncClient,
) -> None:
    for text in ("I live in Oslo.", "I drive a tram.", "I prefer tea."):
        await client.post("/v1/memory/add_turn", json=turn(text, metadata={"session_id": "s"}))
    everything = (await client.get(f"/v1/memory/{T}/ana/list?limit=0")).json()
    assert everything["total"] == 3
    assert [m["text"] for m in everything["memories"]] == [
        "Prefers tea",
        "Drives a tram",
        "Lives in Oslo",
    ]
    assert everything["memories"][0]["metadata"]["metadata"]["session_id"] == "s"
    page = (await client.get(f"/v1/memory/{T}/ana/list", params={"limit": 1, "offset": 1})).json()
    assert [m["text"] for m in page["memories"]] == ["Drives a tram"]
    assert page["total"] == 3


async def test_list_accepts_url_quoted_user_ids(client: httpx.AsyncClient) -> None:
    user = "team/ana b"
    await client.post("/v1/memory/add_turn", json={**turn("I live in Oslo."), "user_id": user})
    quoted = "team%2Fana%20b"
    answer = await client.get(f"/v1/memory/{T}/{quoted}/list")
    assert answer.status_code == 200
    assert [m["text"] for m in answer.json()["memories"]] == ["Lives in Oslo"]


async def test_memory_add_stores_an_explicit_fact_and_recognises_client_ref(
    client: httpx.AsyncClient, server: Any
) -> None:
    headers = {"X-End-User-ID": "ana"}
    body = {"text": "Prefers aisle seats", "session_id": "s9", "client_ref": "ref-1"}
    first = (await client.post("/memory/add", json=body, headers=headers)).json()
    again = (await client.post("/memory/add", json=body, headers=headers)).json()
    assert first["memory_ids"] == [first["id"]]
    assert first["text"] == "Prefers aisle seats"
    assert first["metadata"] == {"session_id": "s9"}  # flat, as GET /memory/{id} answers
    assert again == {"status": "skipped", "reason": "already_ingested", "memory_ids": [first["id"]]}
    assert [r["session_id"] for r in stored_memories(server, T, "ana")] == ["s9"]


async def test_memory_add_of_a_question_is_skipped(client: httpx.AsyncClient) -> None:
    answer = await client.post(
        "/memory/add", json={"text": "What time is it?"}, headers={"X-End-User-ID": "ana"}
    )
    assert answer.json() == {
        "status": "skipped",
        "reason": "no_high_value_content",
        "memory_ids": [],
    }


async def test_memory_routes_need_the_end_user_header(client: httpx.AsyncClient) -> None:
    answer = await client.request("DELETE", "/memory/forget", json={"memory_ids": [1]})
    assert answer.status_code == 400
    assert "X-End-User-ID" in answer.json()["detail"]


async def test_status_of_a_memory(client: httpx.AsyncClient) -> None:
    await client.post("/v1/memory/add_turn", json=turn("I live in Oslo."))
    [memory] = (await client.get(f"/v1/memory/{T}/ana/list")).json()["memories"]
    mid = memory["memory_id"]
    assert (await client.get(f"/v1/memory/status/{mid}")).json() == {
        "memory_id": mid,
        "status": "ready",
    }
    assert (await client.get(f"/v1/memory/status/m_{mid}")).status_code == 200
    assert (await client.get("/v1/memory/status/999999")).status_code == 404
    bad = await client.get("/v1/memory/status/abc")
    assert bad.status_code == 422
    assert "memory_id" in bad.json()["detail"]


async def test_forget_by_ids_and_by_filters_with_dry_run(
    client: httpx.AsyncClient, server: Any
) -> None:
    await client.post(
        "/v1/memory/add_turn", json=turn("I live in Oslo.", metadata={"session_id": "a"})
    )
    await client.post(
        "/v1/memory/add_turn", json=turn("I prefer tea.", metadata={"session_id": "b"})
    )
    ids = [r["id"] for r in stored_memories(server, T, "ana")]
    headers = {"X-End-User-ID": "ana"}
    dry = await client.request(
        "DELETE",
        "/memory/forget",
        json={"filters": {"session_id": "a"}, "dry_run": True},
        headers=headers,
    )
    assert dry.json() == [ids[0]]
    assert len(stored_memories(server, T, "ana")) == 2
    by_filter = await client.request(
        "DELETE",
        "/memory/forget",
        json={"filters": {"session_id": "a"}, "reason": "user asked"},
        headers=headers,
    )
    assert by_filter.json() == [ids[0]]
    by_id = await client.request(
        "DELETE", "/memory/forget", json={"memory_ids": [ids[1], 987654]}, headers=headers
    )
    assert by_id.json() == [ids[1]]
    assert stored_memories(server, T, "ana") == []


async def test_forget_filters_before_and_after(client: httpx.AsyncClient, server: Any) -> None:
    await client.post("/v1/memory/add_turn", json=turn("I live in Oslo."))
    [row] = stored_memories(server, T, "ana")
    headers = {"X-End-User-ID": "ana"}
    before = await client.request(
        "DELETE",
        "/memory/forget",
        json={"filters": {"before": "2000-01-01T00:00:00Z"}},
        headers=headers,
    )
    after = await client.request(
        "DELETE",
        "/memory/forget",
        json={"filters": {"after": "2000-01-01T00:00:00Z"}},
        headers=headers,
    )
    assert before.json() == []
    assert after.json() == [row["id"]]


async def test_history_append_list_delete_round_trip(
    client: httpx.AsyncClient, server: Any
) -> None:
    body = {
        "tenant_id": T,
        "user_id": "ana",
        "session_id": "ag2::support",
        "source": "ag2",
        "metadata": {"channel": "chat", "deep": {"x": 1}},
        "turns": [
            {"role": "Human", "content": "I'm vegan.", "seq": 2, "payload": {"name": "ana"}},
            {"role": "AI", "content": "Noted, I love that.", "seq": 1},
            {"role": "user", "content": "ok", "occurred_at": "2026-01-01T00:00:00Z"},
        ],
    }
    appended = (await client.post("/v1/history/append", json=body)).json()
    assert appended["status"] == "ok"
    assert [i["role"] for i in appended["items"]] == ["user", "assistant", "user"]
    assert all(i["created"] is True and i["id"].startswith("h_1000000") for i in appended["items"])
    assert len(appended["request_ids"]) == 2  # the two user turns
    assert appended["items"][0]["payload"] == {"name": "ana"}
    facts = stored_memories(server, T, "ana")
    assert [(f["text"], f["session_id"], f["metadata"]) for f in facts] == [
        ("Vegan", "ag2::support", {"channel": "chat", "session_id": "ag2::support"})
    ]
    assert facts[0]["history_id"] == appended["items"][0]["id"]

    listed = (
        await client.post(
            "/v1/history/list",
            json={"tenant_id": T, "user_id": "ana", "session_id": "ag2::support"},
        )
    ).json()
    assert listed["total"] == 3
    assert [i["content"] for i in listed["items"]] == ["Noted, I love that.", "I'm vegan.", "ok"]
    assert "created" not in listed["items"][0]
    latest = (
        await client.post(
            "/v1/history/list",
            json={"tenant_id": T, "user_id": "ana", "session_id": "ag2::support", "limit": 1},
        )
    ).json()
    assert [i["content"] for i in latest["items"]] == ["ok"]
    assert latest["total"] == 3

    # History is never memory: not in list, not in recall.
    memories = (await client.get(f"/v1/memory/{T}/ana/list")).json()["memories"]
    assert [m["text"] for m in memories] == ["Vegan"]

    deleted = (
        await client.post(
            "/v1/history/delete",
            json={
                "tenant_id": T,
                "user_id": "ana",
                "ids": [appended["items"][0]["id"]],
                "delete_derived_facts": True,
            },
        )
    ).json()
    assert deleted == {
        "deleted_ids": [appended["items"][0]["id"]],
        "deleted_fact_ids": [f"m_{facts[0]['id']}"],
    }
    by_session = (
        await client.post(
            "/v1/history/delete",
            json={"tenant_id": T, "user_id": "ana", "session_id": "ag2::support"},
        )
    ).json()
    assert len(by_session["deleted_ids"]) == 2
    assert by_session["deleted_fact_ids"] == []
    assert stored_history(server, T, "ana") == []


async def test_history_extract_false_stores_no_facts(
    client: httpx.AsyncClient, server: Any
) -> None:
    body = {
        "tenant_id": T,
        "user_id": "ana",
        "session_id": "s",
        "source": "t",
        "extract": False,
        "turns": [{"role": "user", "content": "I live in Oslo."}],
    }
    answer = (await client.post("/v1/history/append", json=body)).json()
    assert answer["request_ids"] == []
    assert stored_memories(server, T, "ana") == []
    assert len(stored_history(server, T, "ana", "s")) == 1


async def test_openapi_document_lists_every_route(client: httpx.AsyncClient) -> None:
    paths = (await client.get("/openapi.json")).json()["paths"]
    assert {
        "/org/projects",
        "/v1/memory/add_turn",
        "/v1/memory/recall",
        "/v1/memory/query",
        "/v1/memory/{tenant_id}/{user_id}/list",
        "/memory/forget",
        "/memory/add",
        "/v1/memory/status/{memory_id}",
        "/v1/history/append",
        "/v1/history/list",
        "/v1/history/delete",
    } <= set(paths)
