"""Both key kinds, tenant ownership, and both quota modes (free silent, evaluation 429)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from memorysync_local import Plan
from shared.local_server import client_for, stored_history, stored_memories


def turn(tenant: str, text: str = "I live in Oslo.", user: str = "ana") -> dict[str, Any]:
    return {"tenant_id": tenant, "user_id": user, "text": text, "source": "test"}


@pytest.mark.parametrize("served", [False, True], ids=["embedded", "served"])
async def test_missing_or_unknown_key_is_401(
    make_local_server: Callable[..., Any], served: bool
) -> None:
    srv = make_local_server(served=served)
    async with client_for(srv, api_key="") as anonymous, client_for(srv, "ms_nope") as unknown:
        missing = await anonymous.get("/org/projects")
        wrong = await unknown.post("/v1/memory/add_turn", json=turn("local"))
    assert missing.status_code == 401
    assert wrong.status_code == 401
    assert "ms_nope" not in wrong.text


@pytest.mark.parametrize("served", [False, True], ids=["embedded", "served"])
async def test_evaluation_key_has_no_projects_and_lives_in_default(
    make_local_server: Callable[..., Any], served: bool
) -> None:
    srv = make_local_server(served=served, eval_keys=["ms_eval"])
    async with client_for(srv, "ms_eval") as c:
        assert (await c.get("/org/projects")).status_code == 403
        assert (await c.post("/v1/memory/add_turn", json=turn("default"))).status_code == 200
        assert (await c.post("/v1/memory/add_turn", json=turn("local"))).status_code == 403
    assert [m["text"] for m in stored_memories(srv, "default", "ana")] == ["Lives in Oslo"]


async def test_key_with_its_own_tenant(make_local_server: Callable[..., Any]) -> None:
    srv = make_local_server(api_keys={"ms_acme": "acme"})
    async with client_for(srv, "ms_acme") as c:
        [project] = (await c.get("/org/projects")).json()
        assert project["tenant_id"] == "acme"
        denied = await c.get("/v1/memory/local/ana/list")
        assert denied.status_code == 403
        assert "local" in denied.json()["detail"]


@pytest.mark.parametrize("served", [False, True], ids=["embedded", "served"])
async def test_free_plan_over_limit_is_silent(
    make_local_server: Callable[..., Any], served: bool
) -> None:
    srv = make_local_server(served=served, plans={"ms_local_dev_key": Plan("free", 2)})
    async with client_for(srv) as c:
        first = (await c.post("/v1/memory/add_turn", json=turn("local"))).json()
        filler = (await c.post("/v1/memory/add_turn", json=turn("local", "ok"))).json()
        recall_body = {"tenant_id": "local", "user_id": "ana", "prompt": "Oslo"}
        before = (await c.post("/v1/memory/recall", json=recall_body)).json()
        over = (await c.post("/v1/memory/add_turn", json=turn("local", "I prefer tea."))).json()
        after = (await c.post("/v1/memory/recall", json=recall_body)).json()
        listed = (await c.get("/v1/memory/local/ana/list")).json()
        history = (
            await c.post(
                "/v1/history/append",
                json={
                    "tenant_id": "local",
                    "user_id": "ana",
                    "session_id": "s",
                    "source": "t",
                    "turns": [{"role": "user", "content": "I like jazz."}],
                },
            )
        ).json()
        added = (
            await c.post(
                "/memory/add", json={"text": "Likes jazz"}, headers={"X-End-User-ID": "ana"}
            )
        ).json()
    assert first["processing_status"] == "completed"
    assert filler["processing_status"] == "skipped_low_value"  # still counted as an add
    assert [m["value"] for m in before["memories"]] == ["Lives in Oslo"]
    assert over["processing_status"] == "skipped"
    assert after == {"context": "", "memories": [], "latency_ms": after["latency_ms"]}
    assert listed == {"memories": [], "total": 0}
    assert history == {"items": [], "request_ids": [], "status": "skipped"}
    assert added["status"] == "skipped"
    assert [m["text"] for m in stored_memories(srv, "local", "ana")] == ["Lives in Oslo"]
    assert stored_history(srv, "local", "ana") == []


@pytest.mark.parametrize("served", [False, True], ids=["embedded", "served"])
async def test_evaluation_plan_over_limit_answers_429_with_retry_after(
    make_local_server: Callable[..., Any], served: bool
) -> None:
    srv = make_local_server(
        served=served, eval_keys=["ms_eval"], plans={"ms_eval": Plan("evaluation", 1)}
    )
    async with client_for(srv, "ms_eval") as c:
        ok = await c.post("/v1/memory/add_turn", json=turn("default"))
        refused = await c.post("/v1/memory/add_turn", json=turn("default", "I prefer tea."))
        read = await c.post(
            "/v1/memory/recall", json={"tenant_id": "default", "user_id": "ana", "prompt": "Oslo"}
        )
    assert ok.status_code == 200
    assert refused.status_code == 429
    body = refused.json()
    assert body["error"]["retry_after"] == body["retry_after"] > 0
    assert refused.headers["retry-after"] == str(body["retry_after"])
    assert read.status_code == 429
    assert [m["text"] for m in stored_memories(srv, "default", "ana")] == ["Lives in Oslo"]


async def test_history_retry_of_stored_turns_is_not_counted(
    make_local_server: Callable[..., Any],
) -> None:
    srv = make_local_server(plans={"ms_local_dev_key": Plan("evaluation", 1)})
    body = {
        "tenant_id": "local",
        "user_id": "ana",
        "session_id": "s",
        "source": "t",
        "turns": [{"role": "user", "content": "I like jazz.", "idempotency_key": "k1"}],
    }
    async with client_for(srv) as c:
        first = await c.post("/v1/history/append", json=body)
        retry = await c.post("/v1/history/append", json=body)
        new = await c.post(
            "/v1/history/append",
            json={**body, "turns": [{"role": "user", "content": "I like blues.", "seq": 1}]},
        )
    assert first.status_code == retry.status_code == 200
    assert retry.json()["items"][0]["created"] is False
    assert new.status_code == 429
    assert srv.store.usage(srv.app.state.keys.lookup("ms_local_dev_key")) == (1, 1)


def test_plan_parsing_and_validation() -> None:
    assert Plan.parse("evaluation:10") == Plan("evaluation", 10)
    with pytest.raises(ValueError, match="free:N"):
        Plan.parse("gold:10")
    with pytest.raises(ValueError, match="monthly_limit"):
        Plan("free", -1)


def test_plan_for_an_unconfigured_key_is_refused() -> None:
    from memorysync_local import create_app

    with pytest.raises(ValueError, match="not configured"):
        create_app(":memory:", plans={"ms_ghost": Plan("free", 1)})
