"""Conversation order (issue 11): ``seq``, else the turn's time, in microseconds; then arrival.

``tests/data/schema_v1.sqlite3`` was written by memorysync-local 2.0.0 as released
(schema version 1) through its HTTP API: session ``chat`` holds four turns without
``seq`` (three with an ``occurred_at`` on 2026-11-30 between 10:00:00.001 and
10:00:05, the fourth without one, received 2026-12-01T04:04), session
``counted`` two turns with the small seqs 1 and 2, and user ``ana`` three facts.
"""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest

from memorysync_local import embedded
from memorysync_local._storage.sqlite.database import SCHEMA_VERSION
from shared.local_server import client_for, stored_history

T = "local"
V1 = Path(__file__).parent / "data" / "schema_v1.sqlite3"
CHAT = {"tenant_id": T, "user_id": "ana", "session_id": "chat"}
OLD_CHAT = [
    "I live in Porto.",
    "Reply number 1.",
    "I also have a dog named Rex.",
    "Reply number 2.",
]


def micros(iso: str) -> int:
    moment = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    return round((moment - datetime(1970, 1, 1, tzinfo=timezone.utc)).total_seconds() * 1e6)


@pytest.fixture
def upgraded(tmp_path: Path) -> Any:
    """An embedded server over a copy of the version-1 file (migrated on open)."""
    path = tmp_path / "v1.db"
    shutil.copy(V1, path)
    with embedded(str(path)) as server:
        yield server


def contents(answer: httpx.Response) -> list[str]:
    assert answer.status_code == 200, answer.text
    return [item["content"] for item in answer.json()["items"]]


async def test_the_migration_fills_the_sort_key_of_every_old_turn(upgraded: Any) -> None:
    with closing(sqlite3.connect(upgraded.db_path)) as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_version ORDER BY 1")]
        rows = conn.execute(
            "SELECT content, seq, occurred_at, created_at, sort_key FROM history ORDER BY id"
        ).fetchall()
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert versions == list(range(1, SCHEMA_VERSION + 1))
    assert len(rows) == 6
    for content, seq, occurred_at, created_at, key in rows:
        expected = seq if seq is not None else micros(occurred_at or created_at)
        assert key == expected, content
    assert "history_in_order" in indexes
    assert "history_by_session" not in indexes
    # Nothing stored before was lost or changed by the upgrade.
    assert [r[0] for r in rows] == [*OLD_CHAT, "one", "two"]
    assert len(stored_history(upgraded, T, "ana", "chat")) == 4


async def test_an_upgraded_session_lists_old_and_new_turns_in_spoken_order(
    upgraded: Any,
) -> None:
    # New turns carry seq = capture time in microseconds, as memorysync-core sends them:
    # one said between the old turns (delivered late, e.g. after an outage) and two now.
    late = micros("2026-11-30T10:00:03Z")
    now = micros("2026-12-01T09:00:00Z")
    async with client_for(upgraded) as client:
        appended = await client.post(
            "/v1/history/append",
            json={
                **CHAT,
                "turns": [
                    {"role": "user", "content": "And I'm vegan.", "seq": now},
                    {"role": "assistant", "content": "Noted.", "seq": now + 1},
                ],
            },
        )
        assert appended.status_code == 200
        await client.post(
            "/v1/history/append",
            json={
                **CHAT,
                "turns": [{"role": "assistant", "content": "A late reply.", "seq": late}],
            },
        )
        listed = await client.post("/v1/history/list", json=CHAT)
        latest = await client.post("/v1/history/list", json={**CHAT, "limit": 3})
        one = await client.post("/v1/history/list", json={**CHAT, "limit": 1})
    spoken = [
        "I live in Porto.",
        "Reply number 1.",
        "A late reply.",
        "I also have a dog named Rex.",
        "Reply number 2.",  # no occurred_at: its arrival time, 2026-12-01T04:04
        "And I'm vegan.",
        "Noted.",
    ]
    assert contents(listed) == spoken
    assert listed.json()["total"] == 7
    assert contents(latest) == spoken[-3:]
    assert latest.json()["total"] == 7
    assert contents(one) == ["Noted."]


async def test_turns_delivered_out_of_order_list_by_seq_then_arrival(
    client: httpx.AsyncClient,
) -> None:
    base = micros("2026-12-01T12:00:00Z")
    session = {**CHAT, "session_id": "two-capabilities"}
    # Each capability delivers its own batch: the person's turns first, then the replies.
    for turns in (
        [("user", "Round one.", base), ("user", "Round two.", base + 20)],
        [("assistant", "Reply one.", base + 10), ("assistant", "Reply two.", base + 30)],
        [("assistant", "Same microsecond, later arrival.", base + 30)],
    ):
        answer = await client.post(
            "/v1/history/append",
            json={
                **session,
                "turns": [{"role": r, "content": c, "seq": s} for r, c, s in turns],
            },
        )
        assert answer.status_code == 200
    listed = await client.post("/v1/history/list", json=session)
    assert contents(listed) == [
        "Round one.",
        "Reply one.",
        "Round two.",
        "Reply two.",
        "Same microsecond, later arrival.",
    ]
    assert [i["role"] for i in listed.json()["items"]] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "assistant",
    ]


async def test_turns_without_seq_list_by_occurred_at_not_by_arrival(
    client: httpx.AsyncClient,
) -> None:
    session = {**CHAT, "session_id": "times"}
    for content, at in (("second", "2026-12-01T10:00:02Z"), ("first", "2026-12-01T10:00:01Z")):
        await client.post(
            "/v1/history/append",
            json={**session, "turns": [{"role": "user", "content": content, "occurred_at": at}]},
        )
    assert contents(await client.post("/v1/history/list", json=session)) == ["first", "second"]


async def test_the_same_seq_role_and_content_is_stored_once_whatever_the_keys(
    client: httpx.AsyncClient, server: Any
) -> None:
    seq = micros("2026-12-01T12:00:00Z")
    session = {**CHAT, "session_id": "literal"}
    first = await client.post(
        "/v1/history/append",
        json={
            **session,
            "turns": [
                {"role": "user", "content": "I live in Porto.", "seq": seq, "idempotency_key": "a"}
            ],
        },
    )
    again = await client.post(
        "/v1/history/append",
        json={
            **session,
            "turns": [
                {"role": "user", "content": "I live in Porto.", "seq": seq, "idempotency_key": "b"},
                {"role": "user", "content": "I live in Porto.", "seq": seq},
                {"role": "user", "content": "I live in Porto.", "seq": seq + 1},
            ],
        },
    )
    assert first.json()["items"][0]["created"] is True
    created = [i["created"] for i in again.json()["items"]]
    assert created == [False, False, True]
    assert again.json()["items"][0]["id"] == first.json()["items"][0]["id"]
    assert len(stored_history(server, T, "ana", "literal")) == 2
