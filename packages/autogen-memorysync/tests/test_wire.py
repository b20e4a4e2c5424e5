"""The exact requests of the explicit calls (respx pins method, path, headers and body)."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest
import respx
from autogen_core.memory import MemoryContent, MemoryMimeType

from memorysync_core import __version__ as core_version
from memorysync_core._delivery.seeds import assistant_turn_seed, user_turn_seed
from memorysync_core.adapters import fnv1a64
from memorysync_core.errors import RateLimitError, ServerError, ValidationError

ISO_Z = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")
SCOPE = "autogen::trip"
FACT = "I prefer window seats and I live in Lisbon."
REPLY = "Noted: window seats, and Lisbon as home."
ADD_TURN_OK = {
    "status": "processing",
    "processing_status": "distilling",
    "request_id": "req_1",
    "memory_id": None,
    "already_exists": False,
}


def _body(request: httpx.Request) -> Any:
    return json.loads(request.content)


def _assert_headers(request: httpx.Request, kit: Any, *, end_user: str | None = None) -> None:
    assert request.headers["X-API-Key"] == kit.API_KEY
    assert request.headers["Accept"] == "application/json"
    assert request.headers["User-Agent"] == f"memorysync-core/{core_version} (+autogen)"
    assert request.headers.get("X-End-User-ID") == end_user
    assert "X-Project-ID" not in request.headers


def _append_ok(request: httpx.Request) -> httpx.Response:
    turns = _body(request)["turns"]
    items = [{"id": f"h_{i}", "created": True, **turn} for i, turn in enumerate(turns)]
    return httpx.Response(200, json={"items": items, "request_ids": ["req_1"], "status": "ok"})


async def test_add_sends_one_user_turn_with_seed_capture_time_and_session_scope(
    server: respx.MockRouter, make_memory: Any, kit: Any
) -> None:
    route = server.post("/v1/memory/add_turn").respond(json=ADD_TURN_OK)
    metadata = {"topic": "travel", "role": "user", "nested": {"dropped": True}}
    snapshot = json.dumps(metadata, sort_keys=True)

    await make_memory(session_id="trip").add(
        MemoryContent(content=f"  {FACT}  ", mime_type=MemoryMimeType.TEXT, metadata=metadata)
    )

    request = route.calls.last.request
    _assert_headers(request, kit)
    body = _body(request)
    assert ISO_Z.fullmatch(body.pop("occurred_at"))
    assert body == {
        "tenant_id": kit.TENANT,
        "user_id": "alice",
        "text": FACT,
        "source": "autogen",
        "role": "user",
        "speaker": user_turn_seed(SCOPE, FACT),
        "metadata": {"topic": "travel", "role": "user", "session_id": SCOPE},
    }
    assert json.dumps(metadata, sort_keys=True) == snapshot  # the caller's dict is untouched


@pytest.mark.parametrize("role", ["assistant", "system", "tool", "function", "Assistant"])
async def test_add_does_not_send_non_user_turns(
    role: str, server: respx.MockRouter, make_memory: Any
) -> None:
    route = server.post("/v1/memory/add_turn").respond(json=ADD_TURN_OK)

    await make_memory().add(
        MemoryContent(content=REPLY, mime_type=MemoryMimeType.TEXT, metadata={"role": role})
    )

    assert route.call_count == 0


async def test_add_sends_a_long_text_whole_in_parts_with_seeds_from_the_contract_seed(
    server: respx.MockRouter, make_memory: Any
) -> None:
    route = server.post("/v1/memory/add_turn").respond(json=ADD_TURN_OK)
    text = "I like trains. " * 2000  # 30,000 characters; the hard cut ends "I like tra"

    await make_memory().add(MemoryContent(content=text, mime_type=MemoryMimeType.TEXT))

    bodies = [_body(call.request) for call in route.calls]
    assert [b["text"] for b in bodies] == [
        ("I like trains. " * 1066).strip(),  # 15,989 characters, cut at a sentence end
        ("I like trains. " * 934).strip(),
    ]
    seed = "#h" + fnv1a64("human:" + text.strip()[:16_000])
    assert [b["speaker"].rsplit("#", 1)[1] for b in bodies] == [seed[1:] + "~p1", seed[1:] + "~p2"]
    assert len({b["occurred_at"] for b in bodies}) == 1  # one turn, captured once


async def test_add_retries_a_transient_failure_with_the_same_body_then_succeeds(
    server: respx.MockRouter, make_memory: Any
) -> None:
    route = server.post("/v1/memory/add_turn")
    route.side_effect = [
        httpx.Response(503, json={"detail": "busy"}),
        httpx.Response(200, json=ADD_TURN_OK),
    ]

    await make_memory().add(MemoryContent(content=FACT, mime_type=MemoryMimeType.TEXT))

    first, second = (call.request.content for call in route.calls)
    assert first == second


async def test_add_raises_the_typed_error_after_bounded_retries(
    server: respx.MockRouter, make_memory: Any
) -> None:
    route = server.post("/v1/memory/add_turn").respond(503, json={"detail": "down"})

    with pytest.raises(ServerError) as caught:
        await make_memory().add(MemoryContent(content=FACT, mime_type=MemoryMimeType.TEXT))

    assert route.call_count == 3
    assert "/v1/memory/add_turn -> 503" in str(caught.value)


async def test_add_turn_pair_appends_both_turns_to_the_session_transcript(
    server: respx.MockRouter, make_memory: Any, kit: Any
) -> None:
    route = server.post("/v1/history/append").mock(side_effect=_append_ok)

    answer = await make_memory(session_id="trip").add_turn_pair(FACT, REPLY, turn_id="turn-7")

    request = route.calls.last.request
    _assert_headers(request, kit)
    body = _body(request)
    for turn in body["turns"]:
        assert ISO_Z.fullmatch(turn.pop("occurred_at"))
    seqs = [turn.pop("seq") for turn in body["turns"]]
    assert seqs[0] < seqs[1]  # the capture order (microseconds since the epoch)
    assert body == {
        "tenant_id": kit.TENANT,
        "user_id": "alice",
        "session_id": SCOPE,
        "source": "autogen",
        "turns": [
            {
                "role": "user",
                "content": FACT,
                "idempotency_key": f"{user_turn_seed(SCOPE, FACT)}:turn-7",
            },
            {
                "role": "assistant",
                "content": REPLY,
                "idempotency_key": f"{assistant_turn_seed(SCOPE, REPLY)}:turn-7",
            },
        ],
        "extract": True,
    }
    assert answer["status"] == "ok"


async def test_add_turn_pair_sends_metadata_scalars_with_the_transcript(
    server: respx.MockRouter, make_memory: Any
) -> None:
    route = server.post("/v1/history/append").mock(side_effect=_append_ok)
    metadata = {"channel": "web", "priority": 2, "tags": ["not", "scalar"]}

    await make_memory(session_id="trip").add_turn_pair(FACT, REPLY, metadata=metadata)

    assert _body(route.calls.last.request)["metadata"] == {"channel": "web", "priority": 2}
    assert metadata == {"channel": "web", "priority": 2, "tags": ["not", "scalar"]}


async def test_add_turn_pair_retry_resends_the_same_keys_and_a_repeat_gets_new_ones(
    server: respx.MockRouter, make_memory: Any
) -> None:
    route = server.post("/v1/history/append")
    route.side_effect = [
        httpx.Response(502, json={"detail": "bad gateway"}),
        _append_ok,
        _append_ok,
    ]
    memory = make_memory(session_id="trip")

    await memory.add_turn_pair(FACT, REPLY)
    await memory.add_turn_pair(FACT, REPLY)  # the user said it again: a new exchange

    keys = [[t["idempotency_key"] for t in _body(c.request)["turns"]] for c in route.calls]
    assert keys[0] == keys[1]
    assert keys[2] != keys[1]
    assert all(k.startswith(user_turn_seed(SCOPE, FACT) + ":") for k in (keys[0][0], keys[2][0]))


async def test_add_turn_pair_without_transcript_sends_only_the_user_turn(
    server: respx.MockRouter, make_memory: Any, kit: Any
) -> None:
    add_turn = server.post("/v1/memory/add_turn").respond(json=ADD_TURN_OK)
    append = server.post("/v1/history/append").mock(side_effect=_append_ok)

    await make_memory(session_id="trip", transcript=False).add_turn_pair(
        FACT, REPLY, metadata={"channel": "web"}
    )

    assert append.call_count == 0
    assert add_turn.call_count == 1
    body = _body(add_turn.calls.last.request)
    assert ISO_Z.fullmatch(body.pop("occurred_at"))
    assert body == {
        "tenant_id": kit.TENANT,
        "user_id": "alice",
        "text": FACT,
        "source": "autogen",
        "role": "user",
        "speaker": user_turn_seed(SCOPE, FACT),
        "metadata": {"channel": "web", "session_id": SCOPE},
    }


async def test_query_sends_the_prompt_and_k_and_returns_ids_and_scores(
    server: respx.MockRouter, make_memory: Any, kit: Any
) -> None:
    route = server.post("/v1/memory/query").respond(
        json={
            "memories": [
                {"memory_id": 12, "value": "Lives in Lisbon", "score": 0.83},
                {"id": 13, "text": "Likes trains", "score": 0.2},
            ]
        }
    )

    result = await make_memory().query("Where does the user live?", limit=2, min_score=0.5)

    request = route.calls.last.request
    _assert_headers(request, kit)
    assert _body(request) == {
        "tenant_id": kit.TENANT,
        "user_id": "alice",
        "prompt": "Where does the user live?",
        "k": 2,
    }
    assert [(r.content, r.metadata) for r in result.results] == [
        ("Lives in Lisbon", {"memory_id": 12, "score": 0.83})
    ]


@pytest.mark.parametrize(
    ("status", "error"), [(422, ValidationError), (503, ServerError), (429, RateLimitError)]
)
async def test_query_failure_raises_a_typed_error_never_an_empty_result(
    status: int, error: type[Exception], server: respx.MockRouter, make_memory: Any
) -> None:
    server.post("/v1/memory/query").respond(
        status, json={"error": {"message": "nope", "retry_after": 0}}
    )

    with pytest.raises(error):
        await make_memory().query("Where does the user live?")


async def test_clear_deletes_only_this_sessions_memories_in_both_shapes_and_its_transcript(
    server: respx.MockRouter, make_memory: Any, kit: Any
) -> None:
    listed = server.get(f"/v1/memory/{kit.TENANT}/alice/list").respond(
        json={
            "memories": [
                {"memory_id": 1, "text": "a", "metadata": {"metadata": {"session_id": SCOPE}}},
                {"memory_id": 2, "text": "b", "metadata": {"session_id": SCOPE}},
                {
                    "memory_id": 3,
                    "text": "c",
                    "metadata": {"metadata": {"session_id": "autogen::x"}},
                },
                {"memory_id": 4, "text": "d", "metadata": {"session_id": "ag2::trip"}},
                {"memory_id": 5, "text": "e", "metadata": {}},
            ],
            "total": 5,
        }
    )
    forget = server.delete("/memory/forget").respond(json=[1, 2])
    history = server.post("/v1/history/delete").respond(
        json={"deleted_ids": ["h_1", "h_2"], "deleted_fact_ids": []}
    )

    await make_memory(session_id="trip").clear()

    assert dict(listed.calls.last.request.url.params) == {"limit": "500", "offset": "0"}
    request = forget.calls.last.request
    _assert_headers(request, kit, end_user="alice")
    assert _body(request) == {"memory_ids": [1, 2]}
    assert _body(history.calls.last.request) == {
        "tenant_id": kit.TENANT,
        "user_id": "alice",
        "session_id": SCOPE,
        "delete_derived_facts": True,
    }


async def test_clear_with_user_scope_deletes_every_memory_of_the_user(
    server: respx.MockRouter, make_memory: Any, kit: Any
) -> None:
    server.get(f"/v1/memory/{kit.TENANT}/alice/list").respond(
        json={
            "memories": [
                {"memory_id": 1, "text": "a", "metadata": {"metadata": {"session_id": SCOPE}}},
                {"memory_id": 3, "text": "c", "metadata": {"session_id": "autogen::x"}},
            ],
            "total": 2,
        }
    )
    forget = server.delete("/memory/forget").respond(json=[1, 3])
    server.post("/v1/history/delete").respond(json={"deleted_ids": [], "deleted_fact_ids": []})

    await make_memory(session_id="trip", clear_scope="user").clear()

    assert _body(forget.calls.last.request) == {"memory_ids": [1, 3]}


async def test_clear_pages_through_every_memory(
    server: respx.MockRouter, make_memory: Any, kit: Any
) -> None:
    def page(request: httpx.Request) -> httpx.Response:
        offset = int(request.url.params["offset"])
        limit = int(request.url.params["limit"])
        ids = range(offset + 1, min(offset + limit, 1200) + 1)
        items = [
            {"memory_id": i, "text": "x", "metadata": {"metadata": {"session_id": SCOPE}}}
            for i in ids
        ]
        return httpx.Response(200, json={"memories": items, "total": 1200})

    server.get(f"/v1/memory/{kit.TENANT}/alice/list").mock(side_effect=page)
    forget = server.delete("/memory/forget").mock(
        side_effect=lambda r: httpx.Response(200, json=_body(r)["memory_ids"])
    )
    server.post("/v1/history/delete").respond(json={"deleted_ids": [], "deleted_fact_ids": []})

    await make_memory(session_id="trip").clear()

    sent = [i for call in forget.calls for i in _body(call.request)["memory_ids"]]
    assert sent == list(range(1, 1201))
    assert max(len(_body(call.request)["memory_ids"]) for call in forget.calls) <= 100


async def test_save_memory_tool_sends_a_deterministic_client_ref_and_reports_the_outcome(
    server: respx.MockRouter, make_memory: Any, kit: Any
) -> None:
    from autogen_core import CancellationToken

    from autogen_memorysync import create_memory_tools
    from memorysync_core.adapters import fnv1a64

    route = server.post("/memory/add")
    route.side_effect = [
        httpx.Response(200, json={"id": 14, "text": "Allergic to peanuts", "metadata": {}}),
        httpx.Response(
            200, json={"status": "skipped", "reason": "no_high_value_content", "memory_ids": []}
        ),
    ]
    _, save_memory = create_memory_tools(make_memory(session_id="trip"))

    kept = await save_memory.run_json({"text": "I am allergic to peanuts."}, CancellationToken())
    skipped = await save_memory.run_json({"text": "ok thanks"}, CancellationToken())

    request = route.calls[0].request
    _assert_headers(request, kit, end_user="alice")
    assert _body(request) == {
        "text": "I am allergic to peanuts.",
        "source": "autogen",
        "session_id": SCOPE,
        "client_ref": "autogen:" + fnv1a64(SCOPE + "\x00" + "I am allergic to peanuts."),
    }
    assert "14" in str(kept)
    assert str(skipped).startswith("Not saved")
    assert "no_high_value_content" in str(skipped)
