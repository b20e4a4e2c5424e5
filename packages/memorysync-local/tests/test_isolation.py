"""Forget and reads never reach another end user's or another tenant's rows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from shared.local_server import client_for, stored_history, stored_memories


@pytest.mark.parametrize("served", [False, True], ids=["embedded", "served"])
async def test_forget_is_scoped_to_one_end_user_of_one_tenant(
    make_local_server: Callable[..., Any], served: bool
) -> None:
    srv = make_local_server(served=served, api_keys={"ms_acme": "acme"})
    text = "I live in Oslo."
    async with client_for(srv) as local, client_for(srv, "ms_acme") as acme:
        for client, tenant in ((local, "local"), (acme, "acme")):
            for user in ("ana", "bob"):
                body = {
                    "tenant_id": tenant,
                    "user_id": user,
                    "text": text,
                    "source": "t",
                    "metadata": {"session_id": "shared"},
                }
                assert (await client.post("/v1/memory/add_turn", json=body)).status_code == 200
        ana_local = stored_memories(srv, "local", "ana")[0]["id"]
        bob_local = stored_memories(srv, "local", "bob")[0]["id"]
        ana_acme = stored_memories(srv, "acme", "ana")[0]["id"]

        # Ids of another user or tenant are silently out of reach.
        by_ids = await local.request(
            "DELETE",
            "/memory/forget",
            json={"memory_ids": [ana_local, bob_local, ana_acme]},
            headers={"X-End-User-ID": "ana"},
        )
        assert by_ids.json() == [ana_local]
        # A filter matching every row deletes only this tenant's bob.
        by_filter = await acme.request(
            "DELETE",
            "/memory/forget",
            json={"filters": {"session_id": "shared"}},
            headers={"X-End-User-ID": "bob"},
        )
        assert len(by_filter.json()) == 1
        # History deletion is scoped the same way.
        for client, tenant in ((local, "local"), (acme, "acme")):
            await client.post(
                "/v1/history/append",
                json={
                    "tenant_id": tenant,
                    "user_id": "ana",
                    "session_id": "s",
                    "source": "t",
                    "turns": [{"role": "user", "content": "hello there friend"}],
                },
            )
        deleted = await local.post(
            "/v1/history/delete", json={"tenant_id": "local", "user_id": "ana", "session_id": "s"}
        )
        assert len(deleted.json()["deleted_ids"]) == 1

    assert stored_memories(srv, "local", "ana") == []
    assert len(stored_memories(srv, "local", "bob")) == 1
    assert len(stored_memories(srv, "acme", "ana")) == 1
    assert stored_memories(srv, "acme", "bob") == []
    assert len(stored_history(srv, "acme", "ana")) == 1


async def test_recall_and_list_never_show_another_users_memories(
    local_server: Any,
) -> None:
    async with client_for(local_server) as c:
        await c.post(
            "/v1/memory/add_turn",
            json={"tenant_id": "local", "user_id": "bob", "text": "I live in Oslo.", "source": "t"},
        )
        recall = await c.post(
            "/v1/memory/recall", json={"tenant_id": "local", "user_id": "ana", "prompt": "Oslo"}
        )
        listed = await c.get("/v1/memory/local/ana/list")
    assert recall.json()["memories"] == []
    assert listed.json() == {"memories": [], "total": 0}
