"""The official ``memorysync`` client's ``/memory/...`` methods against this server.

Each method the compatibility table lists as served is called through the client's
public API over real HTTP, and its parsed answer checked; every other method of the
client is answered 501 (never 404), which the client raises as its ``ServerError``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from memorysync_local._http.official_client_routes import UNSUPPORTED
from shared.local_server import stored_memories

memorysync = pytest.importorskip("memorysync", minversion="1.10.1")


def test_every_memory_method_answers_with_what_the_client_parses(
    make_local_server: Callable[..., Any],
) -> None:
    srv = make_local_server(served=True)
    client = memorysync.MemorySyncClient(srv.api_key, srv.base_url, end_user_id="ana")
    other = memorysync.MemorySyncClient(srv.api_key, srv.base_url, end_user_id="bob")
    try:
        added = client.add("I live in Lisbon.", session_id="s1", tags=["home"])
        assert isinstance(added, memorysync.Memory)
        assert added.text == "Lives in Lisbon"

        bulk = client.bulk_add(
            [
                memorysync.BulkAddItem(text="I am allergic to peanuts.", client_ref="b-1"),
                memorysync.BulkAddItem(text="ok", client_ref="b-2"),
                memorysync.BulkAddItem(text="I am allergic to peanuts.", client_ref="b-1"),
            ]
        )
        assert (bulk.total, bulk.created, bulk.skipped, bulk.rejected) == (3, 1, 2, 0)
        assert [r.status for r in bulk.results] == ["created", "skipped", "skipped"]
        assert bulk.results[2].reason == "already_ingested"
        assert bulk.results[2].memory_ids == bulk.results[0].memory_ids
        [peanut_id] = bulk.results[0].memory_ids

        found = client.query("peanuts", k=3)
        assert [m.text for m in found.memories] == ["Allergic to peanuts"]
        assert found.memories[0].id == peanut_id
        assert found.memories[0].score is not None
        assert "Allergic to peanuts" in (found.context or "")
        retrieved = client.retrieve("Lisbon", k=3)
        assert [m.id for m in retrieved.memories] == [added.id]
        assert client.query("Lisbon", session_id="other").memories == []
        assert other.query("peanuts").memories == []  # another end user sees nothing

        got = client.get(added.id)
        assert (got.id, got.text, got.tags) == (added.id, "Lives in Lisbon", ["home"])
        with pytest.raises(memorysync.NotFoundError):
            other.get(added.id)

        updated = client.update(added.id, tags=["home", "city"], importance=0.9, event_type="fact")
        assert (updated.tags, updated.importance, updated.event_type) == (
            ["home", "city"],
            0.9,
            "fact",
        )
        history = client.history(added.id)
        assert history.total == 2
        assert [r.event for r in history.revisions] == ["created", "updated"]
        assert set(history.revisions[1].changed_fields) == {"tags", "importance", "event_type"}
        assert history.revisions[1].diff["tags"] == {"old": ["home"], "new": ["home", "city"]}
        assert "tags" in history.tracked_fields

        batch = client.batch_update(
            [
                memorysync.BatchUpdateItem(memory_id=peanut_id, importance=1.0),
                memorysync.BatchUpdateItem(memory_id=999_999, tags=["x"]),
            ]
        )
        assert (batch.total, batch.updated, batch.not_found) == (2, 1, 1)
        assert [r.status for r in batch.results] == ["updated", "not_found"]
        assert client.get(peanut_id).importance == 1.0

        exported = client.export_all()
        assert sorted(m["id"] for m in exported.memories) == sorted([added.id, peanut_id])
        assert exported.generated_at

        assert client.forget([peanut_id]) == [peanut_id]
        assert [m["text"] for m in stored_memories(srv, "local", "ana")] == ["Lives in Lisbon"]
        with pytest.raises(memorysync.NotFoundError):
            client.history(peanut_id)  # its change records went with it
    finally:
        client.close()
        other.close()


def test_bulk_add_deduplicate_stores_an_identical_fact_once(
    make_local_server: Callable[..., Any],
) -> None:
    srv = make_local_server(served=True)
    client = memorysync.MemorySyncClient(srv.api_key, srv.base_url, end_user_id="ana")
    nurse = memorysync.BulkAddItem
    try:
        first = client.bulk_add([nurse(text="Works as a nurse"), nurse(text="Works as a nurse")])
        assert (first.created, first.skipped) == (1, 1)
        [nurse_id] = first.results[0].memory_ids
        assert first.results[1].reason == "duplicate"
        assert first.results[1].memory_ids == [nurse_id]

        # Identical = the same extracted fact, case and spacing aside, for this user and
        # session: a re-run (another wording of the same fact) stores nothing new.
        again = client.bulk_add([nurse(text="I work as a  NURSE."), nurse(text="I like tea.")])
        assert [r.status for r in again.results] == ["skipped", "created"]
        assert again.results[0].memory_ids == [nurse_id]
        texts = [m["text"] for m in stored_memories(srv, "local", "ana")]
        assert texts == ["Works as a nurse", "Likes tea"]

        # Another user, or another session, is never deduplicated against.
        other = client.bulk_add(
            [
                nurse(text="Works as a nurse", end_user_id="bob"),
                nurse(text="Works as a nurse", metadata={"session_id": "s2"}),
            ]
        )
        assert other.created == 2

        # deduplicate=False stores what it is sent.
        kept = client.bulk_add([nurse(text="Likes tea")] * 2, deduplicate=False)
        assert kept.created == 2
        tea = [m for m in stored_memories(srv, "local", "ana") if m["text"] == "Likes tea"]
        assert len(tea) == 3
    finally:
        client.close()


def test_metadata_has_one_flat_shape_from_add_get_query_and_export(
    make_local_server: Callable[..., Any],
) -> None:
    srv = make_local_server(served=True)
    client = memorysync.MemorySyncClient(srv.api_key, srv.base_url, end_user_id="ana")
    try:
        added = client.add("I live in Lisbon.", session_id="s1", metadata={"channel": "web"})
        assert isinstance(added, memorysync.Memory)
        expected = {"channel": "web", "session_id": "s1"}
        assert added.metadata == expected
        assert client.get(added.id).metadata == expected
        assert client.query("Lisbon").memories[0].metadata == expected
        assert client.export_all().memories[0]["metadata"] == expected
    finally:
        client.close()


def test_export_all_names_the_end_user_by_its_number(
    make_local_server: Callable[..., Any],
) -> None:
    srv = make_local_server(served=True)
    ana = memorysync.MemorySyncClient(srv.api_key, srv.base_url, end_user_id="ana")
    bob = memorysync.MemorySyncClient(srv.api_key, srv.base_url, end_user_id="bob")
    tenant = memorysync.MemorySyncClient(srv.api_key, srv.base_url)
    try:
        ana.add("I live in Lisbon.")
        bob.add("I live in Oslo.")
        numbers = {e.user_id for e in (ana.export_all(), bob.export_all(), tenant.export_all())}
        assert len(numbers) == 3
        assert 0 not in numbers
        assert ana.export_all().user_id == ana.export_all().user_id  # stable
        # The number resolves to the id through the users listing.
        with httpx.Client(base_url=srv.base_url, headers={"X-API-Key": srv.api_key}) as http:
            users = http.get("/x-local/v1/users").json()["users"]
        assert {u["user_number"]: u["user_id"] for u in users} == {
            ana.export_all().user_id: "ana",
            bob.export_all().user_id: "bob",
        }
    finally:
        for client in (ana, bob, tenant):
            client.close()


def test_other_client_routes_answer_501_naming_the_route(
    make_local_server: Callable[..., Any],
) -> None:
    srv = make_local_server(served=True)
    client = memorysync.MemorySyncClient(srv.api_key, srv.base_url, end_user_id="ana")
    try:
        with pytest.raises(memorysync.ServerError) as caught:
            client.summarize([1])
        assert caught.value.status_code == 501
        assert "does not implement POST /memory/summarize" in str(caught.value)
        with pytest.raises(memorysync.ServerError) as ontology:
            client.get_ontology()
        assert ontology.value.status_code == 501
        with pytest.raises(memorysync.ServerError) as connections:
            client.connections.list()
        assert connections.value.status_code == 501
    finally:
        client.close()
    # Every listed route, by method, answers 501 and names itself (never 404).
    with httpx.Client(base_url=srv.base_url, headers={"X-API-Key": srv.api_key}) as http:
        for method, path, name in UNSUPPORTED:
            concrete = path.replace("{memory_id}", "7").replace("{job_id}", "j1")
            answer = http.request(method, concrete, json={})
            assert answer.status_code == 501, (method, path)
            assert f"{method} {path}" in answer.json()["detail"], name


@pytest.mark.parametrize("api_key", [None, "ms_not_a_key_of_this_server"])
async def test_the_501_routes_check_the_key_first(
    make_local_server: Callable[..., Any], api_key: str | None
) -> None:
    # Issue 26 item 5: a caller without a valid key was told 501 (what is not served)
    # before 401; every route, the stubs included, checks the key first.
    srv = make_local_server(served=True)
    headers = {} if api_key is None else {"X-API-Key": api_key}
    async with httpx.AsyncClient(base_url=srv.base_url, headers=headers, timeout=30) as http:
        routes = [*UNSUPPORTED, ("GET", "/api/v2/integrations/x", "connector namespaces")]
        for method, path, _ in routes:
            concrete = path.replace("{memory_id}", "7").replace("{job_id}", "j1")
            answer = await http.request(method, concrete)
            assert answer.status_code == 401, (method, path, answer.text)
            assert "unsupported" not in answer.text


def test_the_unsupported_list_covers_the_client() -> None:
    """Every public memory method of the client is served or listed as unsupported."""
    served = {
        "add", "bulk_add", "query", "retrieve", "get", "update", "history", "forget",
        "export_all", "batch_update", "add_turn", "recall", "status", "list_memories",
        "append_history", "list_history", "delete_history",
    }  # fmt: skip
    listed = {name for _, _, name in UNSUPPORTED}
    public = {
        name
        for name, value in inspect.getmembers(memorysync.MemorySyncClient, inspect.isfunction)
        if not name.startswith("_") and name not in {"close"}
    }
    assert public - served - listed == set()


def test_the_end_user_header_may_be_percent_encoded(make_local_server: Callable[..., Any]) -> None:
    srv = make_local_server(served=True)
    encoded = {"X-End-User-ID": "jos%C3%A9", "X-End-User-ID-Encoding": "percent"}
    with httpx.Client(base_url=srv.base_url, headers={"X-API-Key": srv.api_key}) as http:
        added = http.post("/memory/add", json={"text": "I live in Porto."}, headers=encoded)
        assert added.status_code == 200, added.text
        found = http.post("/memory/query", json={"query": "Porto"}, headers=encoded).json()
        assert [m["text"] for m in found["memories"]] == ["Lives in Porto"]
        raw = http.post(
            "/memory/query", json={"query": "Porto"}, headers={"X-End-User-ID": "jos%C3%A9"}
        )
        assert raw.json()["memories"] == []  # without the encoding header: another user
    assert [m["text"] for m in stored_memories(srv, "local", "josé")] == ["Lives in Porto"]
