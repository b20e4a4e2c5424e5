"""Time on every fact, client side: the ``said_template`` rendering and the ``since`` /
``until`` window of search, against a server that ignores the window (the fake one)."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator

import pytest

from memorysync_core import (
    SAID_TEMPLATE,
    ContextRenderer,
    MemorySyncAPI,
    RecalledMemory,
    UserMemory,
)
from shared.fake_server import FakeServer

from .conftest import API_KEY, FAST_RETRY


@pytest.fixture
async def memory(fake_server: FakeServer) -> AsyncIterator[UserMemory]:
    api = MemorySyncAPI(API_KEY, base_url=fake_server.base_url)
    mem = UserMemory(api, user_id="ann", session_id="s", surface="autogen", retry=FAST_RETRY)
    yield mem
    await mem.aclose()


def test_said_at_is_read_from_said_at_else_created_at() -> None:
    items = [
        {"value": "x", "said_at": "2026-03-14T09:00:00Z", "created_at": "2026-03-15"},
        {"value": "x", "created_at": "2026-01-02T00:00:00Z"},
        {"value": "x"},
    ]
    parsed = [RecalledMemory.parse(item) for item in items]
    assert [m.said_at if m else "unparsed" for m in parsed] == [
        "2026-03-14T09:00:00Z",
        "2026-01-02T00:00:00Z",
        None,
    ]


def test_said_template_is_off_by_default() -> None:
    renderer = ContextRenderer(template="{context}")
    memories = [RecalledMemory(1, "Lives in Toronto", 0.9, {}, said_at="2026-03-14T09:00:00Z")]
    assert renderer.render("- Lives in Toronto", memories)[0] == "- Lives in Toronto"


def test_said_template_dates_each_line() -> None:
    renderer = ContextRenderer(template="{context}", said_template=SAID_TEMPLATE)
    memories = [
        RecalledMemory(1, "Lives in Toronto", 0.9, {}, said_at="2026-03-14T09:00:00.000000Z"),
        RecalledMemory(2, "Allergic to peanuts", 0.5, {}),
    ]
    block, kept = renderer.render("ignored server context", memories)
    assert block == "- Lives in Toronto (said 2026-03-14)\n- Allergic to peanuts"
    assert len(kept) == 2


def test_said_template_must_name_the_date() -> None:
    with pytest.raises(ValueError, match="said_template must be None or a string containing"):
        ContextRenderer(said_template=" (said)")


async def test_search_sends_the_window_and_filters_the_answer_again(
    fake_server: FakeServer, memory: UserMemory
) -> None:
    fake_server.seed_memory("ann", "Loves jazz")
    since = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)
    found = await memory.search("jazz", since=since)
    assert found == []  # the fake server ignores the window; the core applies it
    [request] = fake_server.requests_to("/v1/memory/query")
    assert request.json["since"] == since.isoformat().replace("+00:00", "Z")
    assert "until" not in request.json
    assert [m.text for m in await memory.search("jazz", until="2999-01-01T00:00:00Z")] == [
        "Loves jazz"
    ]


async def test_without_a_window_nothing_is_sent(
    fake_server: FakeServer, memory: UserMemory
) -> None:
    fake_server.seed_memory("ann", "Loves jazz")
    await memory.search("jazz")
    [request] = fake_server.requests_to("/v1/memory/query")
    assert "since" not in request.json
    assert "until" not in request.json


@pytest.mark.parametrize(
    ("since", "until", "message"),
    [
        ("yesterday", None, "since must be an ISO 8601 date-time, got 'yesterday'"),
        (dt.datetime(2026, 1, 1), None, "since must carry a time zone"),
        (None, 20260101, "until must be a datetime or an ISO 8601 string, got int"),
        ("2026-03-01T00:00:00Z", "2026-01-01T00:00:00Z", "until .* must be after since"),
    ],
)
async def test_a_bad_window_is_refused_before_any_request(
    fake_server: FakeServer, memory: UserMemory, since: object, until: object, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        await memory.search("jazz", since=since, until=until)  # type: ignore[arg-type]
    assert fake_server.requests_to("/v1/memory/query") == []


async def test_export_and_forget_user_list_with_history(
    fake_server: FakeServer, memory: UserMemory
) -> None:
    fake_server.seed_memory("ann", "Lives in Lisbon")
    await memory.export()
    listed = fake_server.requests_to("/v1/memory/{tenant_id}/{user_id}/list")
    assert listed
    assert all(r.query.get("history") == "true" for r in listed)
