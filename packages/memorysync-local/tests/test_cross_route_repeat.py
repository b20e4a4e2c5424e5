"""One sentence through ``add_turn`` and then ``history/append``: a repeat, by decision.

Issue 26 item 5 asked whether the second is a retry of the first. A retry resends
the same request, with the identity of its route: ``add_turn`` knows a turn by its
speaker seed, capture time and text, ``history/append`` by its idempotency key (or
``seq``). A history turn carries no speaker, so matching it to an ``add_turn`` would
go by text alone, which would also swallow a person saying "yes" twice. So it is a
repeat: stored and extracted again (docs/wire-protocol.md, Idempotency). A client
that already sent a turn to extraction records it in the transcript with
``extract: false``.
"""

from __future__ import annotations

from typing import Any

import httpx

from shared.local_server import stored_history, stored_memories

T = "local"
SENTENCE = "I live in Oslo."


async def _add_turn(client: httpx.AsyncClient) -> httpx.Response:
    return await client.post(
        "/v1/memory/add_turn",
        json={
            "tenant_id": T,
            "user_id": "ana",
            "text": SENTENCE,
            "speaker": "human@s1#h1",
            "occurred_at": "2026-01-01T10:00:00Z",
            "metadata": {"session_id": "s1"},
        },
    )


async def _append(client: httpx.AsyncClient, *, extract: bool) -> httpx.Response:
    return await client.post(
        "/v1/history/append",
        json={
            "tenant_id": T,
            "user_id": "ana",
            "session_id": "s1",
            "turns": [{"role": "user", "content": SENTENCE, "idempotency_key": "k1"}],
            "extract": extract,
        },
    )


async def test_the_same_sentence_through_both_routes_is_a_repeat(
    client: httpx.AsyncClient, server: Any
) -> None:
    first = await _add_turn(client)
    assert first.status_code == 200, first.text
    assert first.json().get("already_exists") is not True
    second = await _append(client, extract=True)
    assert second.status_code == 200, second.text
    assert second.json()["items"][0]["created"] is True
    origins = sorted(m["origin"] for m in stored_memories(server, T, "ana"))
    assert origins == ["add_turn"]  # the second route's equal fact is not stored again
    assert {m["text"] for m in stored_memories(server, T, "ana")} == {"Lives in Oslo"}


async def test_a_turn_already_extracted_is_recorded_with_extract_false(
    client: httpx.AsyncClient, server: Any
) -> None:
    assert (await _add_turn(client)).status_code == 200
    recorded = await _append(client, extract=False)
    assert recorded.status_code == 200, recorded.text
    assert [t["content"] for t in stored_history(server, T, "ana", "s1")] == [SENTENCE]
    assert [m["origin"] for m in stored_memories(server, T, "ana")] == ["add_turn"]
