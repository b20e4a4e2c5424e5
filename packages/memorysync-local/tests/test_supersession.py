"""Memory that stays true: a newer fact supersedes, a retraction closes, reads see the
current memories unless asked for history, and every memory knows when it was said.
Over the embedded transport and over real HTTP (the ``client`` fixture)."""

from __future__ import annotations

import io
import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

from memorysync_local import embedded
from memorysync_local._cli import build_parser
from memorysync_local._cli.data_commands import run_data_command
from memorysync_local._service.users_data import export_user, forget_user
from memorysync_local._storage.sqlite import database as db_module

T = "local"
LIST = f"/v1/memory/{T}/ana/list"


async def tell(client: httpx.AsyncClient, text: str, occurred_at: str | None = None) -> None:
    body: dict[str, Any] = {"tenant_id": T, "user_id": "ana", "text": text, "source": "test"}
    if occurred_at is not None:
        body["occurred_at"] = occurred_at
    answer = await client.post("/v1/memory/add_turn", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["processing_status"] == "completed"


async def recall(client: httpx.AsyncClient, prompt: str, **extra: Any) -> dict[str, Any]:
    body = {"tenant_id": T, "user_id": "ana", "prompt": prompt, **extra}
    answer = await client.post("/v1/memory/recall", json=body)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


async def listed(client: httpx.AsyncClient, **params: Any) -> dict[str, Any]:
    answer = await client.get(LIST, params=params)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


async def test_a_newer_fact_supersedes_the_current_one(client: httpx.AsyncClient) -> None:
    await tell(client, "I live in Lisbon with my two cats.", "2025-02-01T10:00:00Z")
    await tell(client, "I moved to Toronto last year.", "2026-03-14T09:30:00Z")
    answer = await recall(client, "Where do I live now?")
    assert "Toronto" in answer["context"]
    assert "Lisbon" not in answer["context"]
    assert [m["state"] for m in answer["memories"]] == ["current"]

    both = await recall(client, "Where do I live now? Lisbon or Toronto?", history=True)
    by_text = {m["text"]: m for m in both["memories"]}
    lisbon = by_text["Lives in Lisbon with their two cats"]
    toronto = by_text["Moved to Toronto last year (2025)"]  # dated against said_at
    assert lisbon["state"] == "superseded"
    assert lisbon["superseded_by"] == toronto["memory_id"]
    assert lisbon["valid_until"] == toronto["said_at"] == "2026-03-14T09:30:00.000000Z"
    assert lisbon["said_at"] == "2025-02-01T10:00:00.000000Z"
    assert toronto["state"] == "current"
    assert "valid_until" not in toronto


async def test_the_list_route_shows_history_only_when_asked(client: httpx.AsyncClient) -> None:
    await tell(client, "I work at Google.")
    await tell(client, "I work at Shopify.")
    current = await listed(client)
    assert [m["text"] for m in current["memories"]] == ["Works at Shopify"]
    assert current["total"] == 1
    everything = await listed(client, history="true")
    assert everything["total"] == 2
    assert [(m["text"], m["state"]) for m in everything["memories"]] == [
        ("Works at Shopify", "current"),
        ("Works at Google", "superseded"),
    ]


async def test_a_retraction_closes_the_fact_and_adds_none(client: httpx.AsyncClient) -> None:
    await tell(client, "I live in Lisbon.")
    await tell(client, "I'm allergic to peanuts.")
    await tell(client, "I don't live in Lisbon any more.")
    assert [m["text"] for m in (await listed(client))["memories"]] == ["Allergic to peanuts"]
    [lisbon] = [
        m for m in (await listed(client, history="true"))["memories"] if "Lisbon" in m["text"]
    ]
    assert lisbon["state"] == "superseded"
    assert lisbon["superseded_by"] is None
    assert (await recall(client, "Where do I live?"))["memories"] == []


async def test_that_is_not_true_any_more_closes_the_last_fact(client: httpx.AsyncClient) -> None:
    await tell(client, "I love jazz.", "2026-01-01T00:00:00Z")
    await tell(client, "I play chess every Sunday.", "2026-01-02T00:00:00Z")
    await tell(client, "That's not true any more.", "2026-01-03T00:00:00Z")
    assert [m["text"] for m in (await listed(client))["memories"]] == ["Loves jazz"]


async def test_a_multi_valued_attribute_adds(client: httpx.AsyncClient) -> None:
    await tell(client, "I have a cat.")
    await tell(client, "I also have a dog.")
    await tell(client, "I speak French.")
    await tell(client, "I speak Portuguese too.")
    texts = {m["text"] for m in (await listed(client))["memories"]}
    assert texts == {"Has a cat", "Also has a dog", "Speaks French", "Speaks Portuguese too"}


async def test_a_fact_said_earlier_but_arriving_later_stays_history(
    client: httpx.AsyncClient,
) -> None:
    await tell(client, "I live in Toronto.", "2026-03-01T00:00:00Z")
    await tell(client, "I live in Lisbon.", "2025-01-01T00:00:00Z")
    current = (await listed(client))["memories"]
    assert [m["text"] for m in current] == ["Lives in Toronto"]
    [late] = [
        m for m in (await listed(client, history="true"))["memories"] if m["state"] != "current"
    ]
    assert late["text"] == "Lives in Lisbon"
    assert late["superseded_by"] == current[0]["memory_id"]


async def test_since_and_until_keep_the_memories_said_in_the_window(
    client: httpx.AsyncClient,
) -> None:
    await tell(client, "I love jazz.", "2026-01-10T00:00:00Z")
    await tell(client, "I love hiking.", "2026-03-10T00:00:00Z")
    prompt = "What do I love?"
    march = await recall(client, prompt, since="2026-03-01T00:00:00Z")
    assert [m["text"] for m in march["memories"]] == ["Loves hiking"]
    january = await recall(client, prompt, until="2026-02-01T00:00:00+00:00")
    assert [m["text"] for m in january["memories"]] == ["Loves jazz"]
    query = await client.post(
        "/v1/memory/query",
        json={"tenant_id": T, "user_id": "ana", "prompt": prompt, "since": "2026-03-01"},
    )
    assert [m["text"] for m in query.json()["memories"]] == ["Loves hiking"]


async def test_a_window_that_ends_before_it_starts_is_refused(client: httpx.AsyncClient) -> None:
    answer = await client.post(
        "/v1/memory/recall",
        json={
            "tenant_id": T,
            "user_id": "ana",
            "prompt": "x",
            "since": "2026-03-01T00:00:00Z",
            "until": "2026-01-01T00:00:00Z",
        },
    )
    assert answer.status_code == 422
    assert "until (2026-01-01T00:00:00.000000Z) must be after since" in answer.text


async def test_said_at_is_the_write_time_without_occurred_at(client: httpx.AsyncClient) -> None:
    await tell(client, "I love jazz.")
    [memory] = (await listed(client))["memories"]
    assert memory["said_at"] == memory["created_at"]


async def test_history_appends_carry_the_turns_time(client: httpx.AsyncClient) -> None:
    answer = await client.post(
        "/v1/history/append",
        json={
            "tenant_id": T,
            "user_id": "ana",
            "session_id": "s1",
            "source": "test",
            "turns": [
                {
                    "role": "user",
                    "content": "I live in Lisbon.",
                    "occurred_at": "2025-05-05T00:00:00Z",
                },
                {
                    "role": "user",
                    "content": "I moved to Porto.",
                    "occurred_at": "2025-06-06T00:00:00Z",
                },
            ],
        },
    )
    assert answer.status_code == 200, answer.text
    [porto] = (await listed(client))["memories"]
    assert (porto["text"], porto["said_at"]) == ("Moved to Porto", "2025-06-06T00:00:00.000000Z")


async def test_the_cli_the_inspector_route_and_the_export_show_the_history(
    client: httpx.AsyncClient, server: Any
) -> None:
    await tell(client, "I live in Lisbon.")
    await tell(client, "I moved to Toronto.")
    out = io.StringIO()
    args = build_parser().parse_args(["memories", "ana", "--db", server.db_path, "--json"])
    assert run_data_command(args, out) == 0
    listed = [(m["text"], m["state"]) for m in json.loads(out.getvalue())]
    assert listed == [("Moved to Toronto", "current"), ("Lives in Lisbon", "superseded")]
    inspector = await client.get("/x-local/v1/memories", params={"user_id": "ana"})
    assert [m["state"] for m in inspector.json()["memories"]] == ["current", "superseded"]
    export = export_user(server.store.db, T, "ana")
    [lisbon, toronto] = export["memories"]
    assert (lisbon["text"], lisbon["superseded_by"]) == ("Lives in Lisbon", toronto["memory_id"])
    assert forget_user(server.store.db, T, "ana")["memories"] == 2  # the history too


def test_an_upgrade_classifies_stored_memories_and_keeps_the_newest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "v6.db"
    monkeypatch.setattr(db_module, "SCHEMA_VERSION", 6)
    old = db_module.Database(str(path))
    with old.write() as conn:
        for text, created in (
            ("Lives in Lisbon", "2025-01-01T00:00:00.000000Z"),
            ("Has a cat", "2025-01-02T00:00:00.000000Z"),
            ("Moved to Toronto", "2025-02-01T00:00:00.000000Z"),
            ("Also has a dog", "2025-03-01T00:00:00.000000Z"),
        ):
            conn.execute(
                "INSERT INTO memories (tenant_id, user_id, text, origin, created_at) "
                "VALUES ('local', 'ana', ?, 'add', ?)",
                (text, created),
            )
    old.close()
    monkeypatch.undo()
    with embedded(str(path), embedder="none") as server:
        current, _ = server.store.list_memories("local", "ana", 0, 0)
        # The upgrade indexed the attribute's words: "live" finds "Moved to Toronto".
        found = server.store.search("local", "ana", "Where do I live?", 5)
    assert [m["text"] for m in found] == ["Moved to Toronto"]
    assert {m["text"] for m in current} == {"Moved to Toronto", "Has a cat", "Also has a dog"}
    with closing(sqlite3.connect(path)) as conn:
        rows = conn.execute(
            "SELECT text, attribute, said_at, valid_until, superseded_by FROM memories ORDER BY id"
        ).fetchall()
    assert rows[0] == (
        "Lives in Lisbon",
        "residence",
        "2025-01-01T00:00:00.000000Z",
        "2025-02-01T00:00:00.000000Z",
        3,
    )
    assert rows[1][1:] == ("pets", "2025-01-02T00:00:00.000000Z", None, None)


async def test_the_same_fact_said_three_times_in_a_session_is_one_memory(
    client: httpx.AsyncClient,
) -> None:
    for key in ("k1", "k2", "k3"):
        answer = await client.post(
            "/v1/history/append",
            json={
                "tenant_id": T,
                "user_id": "ana",
                "session_id": "s1",
                "turns": [{"role": "user", "content": "I live in Oslo.", "idempotency_key": key}],
                "extract": True,
            },
        )
        assert answer.status_code == 200, answer.text
    turns = await client.post(
        "/v1/history/list", json={"tenant_id": T, "user_id": "ana", "session_id": "s1"}
    )

    assert [m["text"] for m in (await listed(client))["memories"]] == ["Lives in Oslo"]
    assert [t["content"] for t in turns.json()["items"]] == ["I live in Oslo."] * 3


async def test_a_move_kept_in_the_users_words_is_superseded_by_a_later_one(
    client: httpx.AsyncClient,
) -> None:
    await tell(client, "Btw I finally moved to Toronto, the winters are brutal!")
    await tell(client, "Update: I'm in Vancouver now, the hospital transferred me.")

    texts = [m["text"] for m in (await listed(client))["memories"]]
    assert texts == ["Is in Vancouver now, the hospital transferred them"]
    history = [m["text"] for m in (await listed(client, history="true"))["memories"]]
    assert "Finally moved to Toronto, the winters are brutal" in history
