"""The exact bytes on the wire for every route (respx), and the error mapping."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterator
from importlib.metadata import version
from typing import Any

import httpx
import pytest
import respx

from memorysync_core import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthError,
    MemorySyncAPI,
    MemorySyncError,
    NotFoundError,
    RateLimitError,
    ResponseFormatError,
    ServerError,
    UserMemory,
    ValidationError,
)

from .conftest import API_KEY, BASE_URL

USER_AGENT = f"memorysync-core/{version('memorysync-core')} (+autogen)"


@pytest.fixture
def mock() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=BASE_URL, assert_all_called=False) as router:
        yield router


@pytest.fixture
async def client(mock: respx.MockRouter) -> AsyncIterator[MemorySyncAPI]:
    api = MemorySyncAPI(
        API_KEY, base_url=BASE_URL + "/", project_id="proj_1", tenant_id="t 1", source="autogen"
    )
    try:
        yield api
    finally:
        await api.aclose()


def only_request(route: respx.Route) -> httpx.Request:
    assert route.call_count == 1
    return route.calls.last.request


def assert_headers(request: httpx.Request, *, end_user: str | None) -> None:
    assert request.headers["X-API-Key"] == API_KEY
    assert request.headers["X-Project-ID"] == "proj_1"
    assert request.headers["Accept"] == "application/json"
    assert request.headers["User-Agent"] == USER_AGENT
    if end_user is None:
        assert "X-End-User-ID" not in request.headers
    else:
        assert request.headers["X-End-User-ID"] == end_user


def body(request: httpx.Request) -> Any:
    assert request.headers["Content-Type"] == "application/json"
    return json.loads(request.content)


# ---------------------------------------------------------------------------- routes


async def test_tenant_resolution_gets_org_projects_without_end_user(
    mock: respx.MockRouter,
) -> None:
    route = mock.get("/org/projects").respond(200, json=[{"tenant_id": "acme"}, {"tenant_id": "b"}])
    api = MemorySyncAPI(API_KEY, base_url=BASE_URL, project_id="proj_1", source="autogen")
    assert await api.resolve_tenant_id() == "acme"
    assert await api.resolve_tenant_id() == "acme"
    request = only_request(route)
    assert request.method == "GET"
    assert request.content == b""
    assert_headers(request, end_user=None)
    await api.aclose()


async def test_add_turn_posts_the_exact_body(mock: respx.MockRouter, client: MemorySyncAPI) -> None:
    route = mock.post("/v1/memory/add_turn").respond(200, json={"status": "processing"})
    answer = await client.add_turn(
        user_id="u/1",
        text="I live in Lisbon",
        role="user",
        speaker="human@autogen::s#h0123456789abcdef",
        occurred_at="2026-11-29T10:00:00.000Z",
        metadata={"session_id": "autogen::s", "lang": "en"},
    )
    assert answer == {"status": "processing"}
    request = only_request(route)
    assert_headers(request, end_user=None)
    assert body(request) == {
        "tenant_id": "t 1",
        "user_id": "u/1",
        "text": "I live in Lisbon",
        "source": "autogen",
        "role": "user",
        "speaker": "human@autogen::s#h0123456789abcdef",
        "occurred_at": "2026-11-29T10:00:00.000Z",
        "metadata": {"session_id": "autogen::s", "lang": "en"},
    }


async def test_add_turn_omits_absent_optional_fields_and_takes_a_source(
    mock: respx.MockRouter, client: MemorySyncAPI
) -> None:
    route = mock.post("/v1/memory/add_turn").respond(200, json={"status": "ok"})
    await client.add_turn(user_id="u", text="hi", source="ag2")
    assert body(only_request(route)) == {
        "tenant_id": "t 1",
        "user_id": "u",
        "text": "hi",
        "source": "ag2",
    }


async def test_recall_posts_prompt_k_and_types(
    mock: respx.MockRouter, client: MemorySyncAPI
) -> None:
    route = mock.post("/v1/memory/recall").respond(200, json={"context": "", "memories": []})
    await client.recall(user_id="u", prompt="where?", k=3, types=["fact"])
    request = only_request(route)
    assert_headers(request, end_user=None)
    assert body(request) == {
        "tenant_id": "t 1",
        "user_id": "u",
        "prompt": "where?",
        "k": 3,
        "types": ["fact"],
    }


async def test_query_posts_prompt_and_k(mock: respx.MockRouter, client: MemorySyncAPI) -> None:
    route = mock.post("/v1/memory/query").respond(200, json={"memories": []})
    await client.query(user_id="u", prompt="tea")
    assert body(only_request(route)) == {"tenant_id": "t 1", "user_id": "u", "prompt": "tea"}


async def test_list_memories_quotes_path_segments_and_pages_to_the_end(
    mock: respx.MockRouter, client: MemorySyncAPI
) -> None:
    pages = [
        {"memories": [{"memory_id": 1, "text": "a"}, {"memory_id": 2, "text": "b"}], "total": 5},
        {"memories": [{"memory_id": 3, "text": "c"}, {"memory_id": 4, "text": "d"}], "total": 5},
        {"memories": [{"memory_id": 5, "text": "e"}], "total": 5},
    ]
    route = mock.get(url__regex=r"/v1/memory/.*/list").mock(
        side_effect=[httpx.Response(200, json=page) for page in pages]
    )
    listed = await client.list_memories(user_id="ann lee/2", page_size=2)
    assert [m["memory_id"] for m in listed] == [1, 2, 3, 4, 5]
    assert route.call_count == 3
    paths = [call.request.url.raw_path.decode() for call in route.calls]
    assert paths == [
        "/v1/memory/t%201/ann%20lee%2F2/list?limit=2&offset=0",
        "/v1/memory/t%201/ann%20lee%2F2/list?limit=2&offset=2",
        "/v1/memory/t%201/ann%20lee%2F2/list?limit=2&offset=4",
    ]
    for call in route.calls:
        assert call.request.method == "GET"
        assert_headers(call.request, end_user=None)


async def test_memory_status_gets_the_integer_id(
    mock: respx.MockRouter, client: MemorySyncAPI
) -> None:
    route = mock.get("/v1/memory/status/14").respond(200, json={"memory_id": 14, "status": "ready"})
    assert (await client.memory_status("m_14"))["status"] == "ready"
    assert_headers(only_request(route), end_user=None)


async def test_forget_sends_ids_in_batches_of_100_with_the_end_user_header(
    mock: respx.MockRouter, client: MemorySyncAPI
) -> None:
    def echo(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=json.loads(request.content)["memory_ids"])

    route = mock.delete("/memory/forget").mock(side_effect=echo)
    ids: list[int | str] = [*range(1, 201), "m_201", 202]
    deleted = await client.forget(user_id="ann lee", memory_ids=ids, reason="user asked")
    assert deleted == list(range(1, 203))
    assert route.call_count == 3
    bodies = [json.loads(call.request.content) for call in route.calls]
    assert bodies[0] == {"memory_ids": list(range(1, 101)), "reason": "user asked"}
    assert bodies[1] == {"memory_ids": list(range(101, 201)), "reason": "user asked"}
    assert bodies[2] == {"memory_ids": [201, 202], "reason": "user asked"}
    for call in route.calls:
        assert call.request.method == "DELETE"
        assert_headers(call.request, end_user="ann lee")


async def test_forget_by_filters_sends_filters_and_dry_run(
    mock: respx.MockRouter, client: MemorySyncAPI
) -> None:
    route = mock.delete("/memory/forget").respond(200, json=[12])
    assert await client.forget(user_id="u", filters={"session_id": "ag2::s"}, dry_run=True) == [12]
    assert body(only_request(route)) == {"filters": {"session_id": "ag2::s"}, "dry_run": True}


async def test_forget_requires_exactly_one_of_ids_or_filters(client: MemorySyncAPI) -> None:
    with pytest.raises(ValueError, match="exactly one of memory_ids or filters"):
        await client.forget(user_id="u")
    with pytest.raises(ValueError, match="exactly one of memory_ids or filters"):
        await client.forget(user_id="u", memory_ids=[1], filters={"source": "x"})
    with pytest.raises(ValueError, match="'m_x'"):
        await client.forget(user_id="u", memory_ids=["m_x"])


async def test_add_memory_posts_to_memory_add_with_the_end_user_header(
    mock: respx.MockRouter, client: MemorySyncAPI
) -> None:
    route = mock.post("/memory/add").respond(200, json={"id": 14, "text": "Vegan"})
    await client.add_memory(
        user_id="u 1",
        text="Vegan",
        tags=["diet"],
        importance=0.7,
        session_id="autogen::s",
        metadata={"k": "v"},
        client_ref="autogen:0123",
    )
    request = only_request(route)
    assert_headers(request, end_user="u 1")
    assert body(request) == {
        "text": "Vegan",
        "source": "autogen",
        "tags": ["diet"],
        "importance": 0.7,
        "session_id": "autogen::s",
        "metadata": {"k": "v"},
        "client_ref": "autogen:0123",
    }


async def test_add_memory_sends_verbatim_only_when_asked(
    mock: respx.MockRouter, client: MemorySyncAPI
) -> None:
    route = mock.post("/memory/add").respond(200, json={"id": 14, "text": "Ana: hi"})
    await client.add_memory(user_id="u", text="Ana: hi", verbatim=True)
    await client.add_memory(user_id="u", text="Ana: hi")
    first, second = (body(call.request) for call in route.calls)
    assert first == {"text": "Ana: hi", "source": "autogen", "verbatim": True}
    assert "verbatim" not in second
    with pytest.raises(ValueError, match="verbatim must be True or False, got 'yes'"):
        await client.add_memory(user_id="u", text="x", verbatim="yes")  # type: ignore[arg-type]


async def test_add_memory_rejects_a_client_ref_over_128_chars(client: MemorySyncAPI) -> None:
    with pytest.raises(ValueError, match="client_ref must be at most 128"):
        await client.add_memory(user_id="u", text="x", client_ref="r" * 129)


async def test_append_history_posts_turns_source_and_extract(
    mock: respx.MockRouter, client: MemorySyncAPI
) -> None:
    route = mock.post("/v1/history/append").respond(200, json={"items": [], "status": "ok"})
    turns = [{"role": "user", "content": "hi", "idempotency_key": "k1"}]
    await client.append_history(
        user_id="u",
        session_id="ag2::s",
        turns=turns,
        source="ag2",
        extract=False,
        metadata={"a": 1},
    )
    request = only_request(route)
    assert_headers(request, end_user=None)
    assert body(request) == {
        "tenant_id": "t 1",
        "user_id": "u",
        "session_id": "ag2::s",
        "source": "ag2",
        "turns": turns,
        "extract": False,
        "metadata": {"a": 1},
    }


async def test_append_history_takes_1_to_100_turns(client: MemorySyncAPI) -> None:
    with pytest.raises(ValueError, match="1 to 100 items, got 0"):
        await client.append_history(user_id="u", session_id="s", turns=[])
    with pytest.raises(ValueError, match="got 101"):
        await client.append_history(
            user_id="u", session_id="s", turns=[{"role": "user", "content": "x"}] * 101
        )


async def test_list_history_posts_session_and_limit(
    mock: respx.MockRouter, client: MemorySyncAPI
) -> None:
    route = mock.post("/v1/history/list").respond(200, json={"items": [], "total": 0})
    await client.list_history(user_id="u", session_id="ag2::s", source="ag2", limit=10)
    assert body(only_request(route)) == {
        "tenant_id": "t 1",
        "user_id": "u",
        "session_id": "ag2::s",
        "source": "ag2",
        "limit": 10,
    }


async def test_delete_history_posts_session_or_ids(
    mock: respx.MockRouter, client: MemorySyncAPI
) -> None:
    route = mock.post("/v1/history/delete").respond(
        200, json={"deleted_ids": [], "deleted_fact_ids": []}
    )
    await client.delete_history(user_id="u", session_id="ag2::s", delete_derived_facts=True)
    await client.delete_history(user_id="u", ids=["h_1"])
    first, second = (json.loads(call.request.content) for call in route.calls)
    assert first == {
        "tenant_id": "t 1",
        "user_id": "u",
        "session_id": "ag2::s",
        "delete_derived_facts": True,
    }
    assert second == {
        "tenant_id": "t 1",
        "user_id": "u",
        "ids": ["h_1"],
        "delete_derived_facts": False,
    }
    with pytest.raises(ValueError, match="exactly one of session_id or ids"):
        await client.delete_history(user_id="u")


async def test_user_memory_save_sends_a_stable_client_ref_and_the_session(
    mock: respx.MockRouter, client: MemorySyncAPI
) -> None:
    route = mock.post("/memory/add").respond(200, json={"id": 9, "text": "Vegan"})
    memory = UserMemory(client, user_id="u", session_id="s", surface="autogen")
    outcome = await memory.save("  Vegan ")
    await memory.save("Vegan")
    first, second = (json.loads(call.request.content) for call in route.calls)
    assert first == second
    assert first["text"] == "Vegan"
    assert first["session_id"] == "autogen::s"
    assert first["source"] == "autogen"
    assert first["client_ref"].startswith("autogen:")
    assert len(first["client_ref"]) == len("autogen:") + 16
    assert outcome.kept
    assert outcome.memory_ids == (9,)


async def test_user_memory_add_user_turn_sends_seed_time_and_session_metadata(
    mock: respx.MockRouter, client: MemorySyncAPI
) -> None:
    route = mock.post("/v1/memory/add_turn").respond(200, json={"status": "processing"})
    memory = UserMemory(client, user_id="u", session_id="s", surface="autogen")
    await memory.add_user_turn("I prefer window seats.", metadata={"lang": "en", "obj": [1]})
    sent = body(only_request(route))
    assert sent["speaker"] == "human@autogen::s#h041ad25ce2132a2f"
    assert sent["role"] == "user"
    assert sent["source"] == "autogen"
    assert sent["metadata"] == {"lang": "en", "session_id": "autogen::s"}
    assert sent["occurred_at"].endswith("Z")


# ---------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (400, ValidationError),
        (401, AuthError),
        (403, AuthError),
        (404, NotFoundError),
        (409, ValidationError),
        (422, ValidationError),
        (429, RateLimitError),
        (500, ServerError),
        (502, ServerError),
        (503, ServerError),
        (418, APIStatusError),
    ],
)
async def test_each_status_class_maps_to_its_typed_error(
    mock: respx.MockRouter, client: MemorySyncAPI, status: int, error_type: type[Exception]
) -> None:
    mock.post("/v1/memory/query").respond(
        status, json={"detail": "nope"}, headers={"x-request-id": "req_42"}
    )
    with pytest.raises(error_type) as caught:
        await client.query(user_id="u", prompt="p")
    error = caught.value
    assert type(error) is error_type
    assert isinstance(error, APIStatusError)
    assert error.status_code == status
    assert error.request_id == "req_42"
    assert str(error) == f"POST /v1/memory/query -> {status}: nope"
    assert repr(error).startswith(
        f"{error_type.__name__}(status_code={status}, request_id='req_42'"
    )


async def test_the_transports_plain_text_400_is_a_validation_error(
    mock: respx.MockRouter, client: MemorySyncAPI
) -> None:
    # uvicorn's own refusal of a request HTTP forbids (docs/wire-protocol.md).
    mock.post("/v1/memory/query").respond(
        400, text="Invalid HTTP request received.", headers={"content-type": "text/plain"}
    )
    with pytest.raises(ValidationError) as caught:
        await client.query(user_id="u", prompt="p")
    assert str(caught.value) == "POST /v1/memory/query -> 400: Bad Request (non-JSON body)"


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"detail": "text must not be empty"}, "text must not be empty"),
        (
            {"detail": [{"msg": "field required", "loc": ["body", "text"]}, {"msg": "too long"}]},
            "field required; too long",
        ),
        ({"error": {"message": "quota exceeded", "retry_after": 3}}, "quota exceeded"),
    ],
)
async def test_the_message_is_read_from_each_error_body_shape(
    mock: respx.MockRouter, client: MemorySyncAPI, payload: dict[str, Any], message: str
) -> None:
    mock.post("/v1/memory/add_turn").respond(422, json=payload)
    with pytest.raises(ValidationError) as caught:
        await client.add_turn(user_id="u", text="x")
    assert str(caught.value) == f"POST /v1/memory/add_turn -> 422: {message}"


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (httpx.Response(429, json={"error": {"message": "slow", "retry_after": 3}}), 3.0),
        (httpx.Response(429, json={"detail": "slow", "retry_after": 1.5}), 1.5),
        (httpx.Response(429, json={"detail": "slow"}, headers={"Retry-After": "7"}), 7.0),
        (httpx.Response(429, json={"detail": "slow"}), None),
    ],
)
async def test_retry_after_is_read_from_body_top_level_or_header(
    mock: respx.MockRouter, client: MemorySyncAPI, response: httpx.Response, expected: float | None
) -> None:
    mock.post("/v1/memory/recall").mock(return_value=response)
    with pytest.raises(RateLimitError) as caught:
        await client.recall(user_id="u", prompt="p")
    assert caught.value.retry_after == expected


async def test_the_route_template_hides_tenant_and_user_in_messages(
    mock: respx.MockRouter, client: MemorySyncAPI
) -> None:
    mock.get(url__regex=r"/list").respond(404, json={"detail": "no such user"})
    with pytest.raises(NotFoundError) as caught:
        await client.list_memories(user_id="secret user")
    assert str(caught.value) == "GET /v1/memory/{tenant_id}/{user_id}/list -> 404: no such user"
    assert caught.value.route == "/v1/memory/{tenant_id}/{user_id}/list"


async def test_an_html_error_page_is_a_typed_error_without_the_page(
    mock: respx.MockRouter, client: MemorySyncAPI
) -> None:
    mock.post("/v1/memory/query").respond(502, html="<html><body>Bad gateway</body></html>")
    with pytest.raises(ServerError) as caught:
        await client.query(user_id="u", prompt="p")
    assert str(caught.value) == "POST /v1/memory/query -> 502: Bad Gateway (non-JSON body)"


async def test_a_2xx_that_is_not_json_or_has_the_wrong_shape_is_a_format_error(
    mock: respx.MockRouter, client: MemorySyncAPI
) -> None:
    mock.post("/v1/memory/query").mock(
        side_effect=[
            httpx.Response(
                200, content=b'{"memories": [', headers={"content-type": "application/json"}
            ),
            httpx.Response(200, json=["not", "an", "object"]),
        ]
    )
    with pytest.raises(ResponseFormatError, match="not JSON"):
        await client.query(user_id="u", prompt="p")
    with pytest.raises(ResponseFormatError, match="expected a JSON object"):
        await client.query(user_id="u", prompt="p")


async def test_transport_failures_and_timeouts_are_connection_errors(
    mock: respx.MockRouter, client: MemorySyncAPI
) -> None:
    mock.post("/v1/memory/query").mock(
        side_effect=[httpx.ConnectError("refused"), httpx.ReadTimeout("slow")]
    )
    with pytest.raises(APIConnectionError) as refused:
        await client.query(user_id="u", prompt="p")
    assert type(refused.value) is APIConnectionError
    assert isinstance(refused.value.__cause__, httpx.ConnectError)
    with pytest.raises(APITimeoutError) as slow:
        await client.query(user_id="u", prompt="p")
    assert str(slow.value) == (
        f"could not search memories at {client.base_url}: "
        "POST /v1/memory/query -> timeout: ReadTimeout"
    )


async def test_an_unauthorised_key_resolves_to_the_default_tenant(mock: respx.MockRouter) -> None:
    mock.get("/org/projects").respond(403, json={"detail": "missing scope projects:read"})
    api = MemorySyncAPI(API_KEY, base_url=BASE_URL)
    assert await api.resolve_tenant_id() == "default"
    await api.aclose()


# ---------------------------------------------------------------------------- the key


async def test_the_key_never_appears_in_errors_reprs_or_debug_logs(
    mock: respx.MockRouter, caplog: pytest.LogCaptureFixture
) -> None:
    mock.get("/org/projects").respond(500, json={"detail": f"bad key {API_KEY}"})
    mock.post("/v1/memory/query").mock(side_effect=httpx.ConnectError(f"oops {API_KEY}"))
    mock.post("/memory/add").respond(
        429, json={"error": {"message": f"{API_KEY} over quota"}}, headers={"x-request-id": "r"}
    )
    seen: list[str] = []
    with caplog.at_level(logging.DEBUG):
        api = MemorySyncAPI(API_KEY, base_url=BASE_URL, tenant_id=None)
        seen.append(repr(api))
        memory = UserMemory(api, user_id="u", session_id="s", surface="autogen")
        seen.append(repr(memory))
        for call in (
            api.resolve_tenant_id(),
            api.query(user_id="u", prompt="p"),
            api.add_memory(user_id="u", text="x"),
        ):
            with pytest.raises(MemorySyncError) as caught:
                await call
            seen += [str(caught.value), repr(caught.value), str(caught.value.args)]
        await api.warm_up()
        await memory.recall("anything")
        await api.aclose()
    assert caplog.records  # the calls did log
    seen += [caplog.text] + [str(r.args) for r in caplog.records]
    assert all(API_KEY not in text for text in seen)


def test_a_blank_or_missing_key_is_a_constructor_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMORYSYNC_API_KEY", raising=False)
    with pytest.raises(ValueError, match="MEMORYSYNC_API_KEY"):
        MemorySyncAPI()
    with pytest.raises(ValueError, match="api_key is missing or blank"):
        MemorySyncAPI("   ")


@pytest.mark.parametrize("flaw", ["\nx", " x", "\x00", "é"])
def test_a_key_that_cannot_be_a_header_is_refused_without_echoing_it(flaw: str) -> None:
    secret = "ms_secret_0123456789abcdef"
    with pytest.raises(ValueError, match="cannot be sent in an HTTP header") as caught:
        MemorySyncAPI(secret + flaw)
    assert secret not in str(caught.value)
    assert secret not in repr(caught.value)


def test_configuration_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORYSYNC_API_KEY", "ms_env")
    monkeypatch.setenv("MEMORYSYNC_BASE_URL", "http://127.0.0.1:9/")
    monkeypatch.setenv("MEMORYSYNC_PROJECT_ID", "proj_env")
    api = MemorySyncAPI()
    assert api.base_url == "http://127.0.0.1:9"
    assert api.project_id == "proj_env"
    assert "ms_env" not in repr(api)
    monkeypatch.delenv("MEMORYSYNC_BASE_URL")
    assert MemorySyncAPI().base_url == "https://api.memorysync.io"


async def test_constructing_a_client_makes_no_request(mock: respx.MockRouter) -> None:
    MemorySyncAPI(API_KEY, base_url=BASE_URL)
    assert mock.calls.call_count == 0
