"""The official ``memorysync`` client (PyPI, test-only dependency) against this server.

Both of its clients are driven: the sync ``MemorySyncClient`` over real HTTP
(uvicorn on loopback) and the ``AsyncMemorySyncClient`` over the embedded ASGI
transport. Only the client's public API is used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from memorysync_local import Plan
from shared.local_server import stored_history, stored_memories

memorysync = pytest.importorskip("memorysync", minversion="1.10.1")


def test_sync_client_drives_every_route_over_http(
    make_local_server: Callable[..., Any],
) -> None:
    srv = make_local_server(served=True)
    client = memorysync.MemorySyncClient(srv.api_key, srv.base_url, end_user_id="ana")
    try:
        answer = client.add_turn(
            tenant_id="local",
            user_id="ana",
            text="I'm allergic to peanuts. I live in Lisbon.",
            speaker="human@autogen::s1#h041ad25ce2132a2f",
            occurred_at="2026-03-01T10:00:00Z",
            session_id="autogen::s1",
            source="autogen",
        )
        assert answer["processing_status"] == "completed"
        replay = client.add_turn(
            tenant_id="local",
            user_id="ana",
            text="I'm allergic to peanuts. I live in Lisbon.",
            speaker="human@autogen::s1#h041ad25ce2132a2f",
            occurred_at="2026-03-01T10:00:00Z",
            session_id="autogen::s1",
            source="autogen",
        )
        assert replay["already_exists"] is True

        recalled = client.recall(tenant_id="local", user_id="ana", prompt="peanuts allergy", k=3)
        assert [m["value"] for m in recalled["memories"]] == ["Allergic to peanuts"]
        assert "Allergic to peanuts" in recalled["context"]

        listed = client.list_memories(tenant_id="local", user_id="ana", limit=10, offset=0)
        assert listed["total"] == 2
        assert {m["metadata"]["metadata"]["session_id"] for m in listed["memories"]} == {
            "autogen::s1"
        }

        added = client.add("Prefers aisle seats", session_id="s2", client_ref="r-1")
        assert isinstance(added, memorysync.Memory)
        assert added.text == "Prefers aisle seats"
        again = client.add("Prefers aisle seats", session_id="s2", client_ref="r-1")
        assert isinstance(again, memorysync.AddSkippedResponse)
        assert again.reason == "already_ingested"
        assert again.memory_ids == [added.id]
        assert client.status(added.id)["status"] == "ready"

        dry = client.forget(filters={"session_id": "autogen::s1"}, dry_run=True)
        assert len(dry) == 2
        assert client.forget([added.id]) == [added.id]
        assert sorted(client.forget(filters={"session_id": "autogen::s1"})) == sorted(dry)
        assert stored_memories(srv, "local", "ana") == []

        appended = client.append_history(
            tenant_id="local",
            user_id="ana",
            session_id="ag2::support",
            source="ag2",
            turns=[
                {"role": "user", "content": "I work as a nurse.", "idempotency_key": "k1"},
                {"role": "assistant", "content": "Thanks for sharing.", "seq": 2},
            ],
        )
        assert [i["created"] for i in appended["items"]] == [True, True]
        retried = client.append_history(
            tenant_id="local",
            user_id="ana",
            session_id="ag2::support",
            source="ag2",
            turns=[{"role": "user", "content": "I work as a nurse.", "idempotency_key": "k1"}],
        )
        assert [i["created"] for i in retried["items"]] == [False]
        history = client.list_history(tenant_id="local", user_id="ana", session_id="ag2::support")
        assert history["total"] == 2
        deleted = client.delete_history(
            tenant_id="local",
            user_id="ana",
            ids=[appended["items"][0]["id"]],
            delete_derived_facts=True,
        )
        assert deleted["deleted_ids"] == [appended["items"][0]["id"]]
        assert len(deleted["deleted_fact_ids"]) == 1
        assert len(stored_history(srv, "local", "ana")) == 1
    finally:
        client.close()


async def test_async_client_over_the_embedded_transport(local_server: Any) -> None:
    client = memorysync.AsyncMemorySyncClient(
        local_server.api_key,
        local_server.base_url,
        end_user_id="bob",
        transport=local_server.transport,
    )
    try:
        await client.add_turn(tenant_id="local", user_id="bob", text="I prefer window seats.")
        recalled = await client.recall(tenant_id="local", user_id="bob", prompt="window seat")
        assert [m["value"] for m in recalled["memories"]] == ["Prefers window seats"]
        [memory] = (await client.list_memories(tenant_id="local", user_id="bob"))["memories"]
        assert await client.forget([memory["memory_id"]]) == [memory["memory_id"]]
        history = await client.append_history(
            tenant_id="local",
            user_id="bob",
            session_id="s",
            turns=[{"role": "human", "content": "hi"}],
        )
        assert history["items"][0]["role"] == "user"
        listed = await client.list_history(tenant_id="local", user_id="bob", session_id="s")
        assert listed["total"] == 1
        gone = await client.delete_history(tenant_id="local", user_id="bob", session_id="s")
        assert gone["deleted_ids"] == [history["items"][0]["id"]]
    finally:
        await client.aclose()


async def test_official_client_sees_typed_errors(make_local_server: Callable[..., Any]) -> None:
    srv = make_local_server(eval_keys=["ms_eval"], plans={"ms_eval": Plan("evaluation", 0)})
    bad = memorysync.AsyncMemorySyncClient("ms_wrong", srv.base_url, transport=srv.transport)
    limited = memorysync.AsyncMemorySyncClient("ms_eval", srv.base_url, transport=srv.transport)
    try:
        with pytest.raises(memorysync.AuthError):
            await bad.recall(tenant_id="local", user_id="u", prompt="x")
        with pytest.raises(memorysync.RateLimitError) as caught:
            await limited.add_turn(tenant_id="default", user_id="u", text="I live in Oslo.")
        assert caught.value.retry_after_seconds > 0
        with pytest.raises(memorysync.ValidationError):
            await limited.list_history(tenant_id="default", user_id="u", session_id="s", limit=-1)
    finally:
        await bad.aclose()
        await limited.aclose()
