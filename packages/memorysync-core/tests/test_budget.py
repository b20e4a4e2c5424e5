"""Budgeted recall: one deadline over every step, never raising, logging once."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator

import pytest

from memorysync_core import ContextRenderer, MemorySyncAPI, RecallResult, UserMemory
from memorysync_core._recall.budget import recall_within_budget
from shared.fake_server import FakeServer, Fault
from shared.timing import SLACK

from .conftest import API_KEY

# The budget is the feature; the bound adds what a busy machine may (shared/timing.py).
# Every fault that must be cut off lasts forever, far beyond the bound.
BUDGET = 0.2
BOUND = BUDGET + SLACK


@pytest.fixture
async def tenant_api(fake_server: FakeServer) -> AsyncIterator[MemorySyncAPI]:
    api = MemorySyncAPI(API_KEY, base_url=fake_server.base_url, tenant_id="t")
    yield api
    await api.aclose()


async def timed_recall(api: MemorySyncAPI, **kwargs: object) -> tuple[RecallResult, float]:
    loop = asyncio.get_running_loop()
    started = loop.time()
    result = await recall_within_budget(
        api,
        user_id="u",
        prompt="Where do I live?",
        k=5,
        timeout=kwargs.pop("timeout", BUDGET),  # type: ignore[arg-type]
        renderer=kwargs.pop("renderer", ContextRenderer()),  # type: ignore[arg-type]
    )
    return result, loop.time() - started


async def test_a_server_that_never_answers_is_cut_off_at_the_budget(
    fake_server: FakeServer, tenant_api: MemorySyncAPI, caplog: pytest.LogCaptureFixture
) -> None:
    fake_server.set_default("/v1/memory/recall", Fault.hang())
    with caplog.at_level(logging.WARNING, logger="memorysync"):
        result, elapsed = await timed_recall(tenant_api)
    assert result is RecallResult.EMPTY
    assert not result
    assert elapsed < BOUND
    assert len(caplog.records) == 1
    assert caplog.records[0].name == "memorysync.recall"
    assert "budget" in caplog.records[0].getMessage()
    assert "Where do I live" not in caplog.text


async def test_a_hanging_tenant_resolution_is_inside_the_same_budget(
    fake_server: FakeServer,
) -> None:
    fake_server.set_default("/org/projects", Fault.hang())
    api = MemorySyncAPI(API_KEY, base_url=fake_server.base_url)
    result, elapsed = await timed_recall(api)
    assert result is RecallResult.EMPTY
    assert elapsed < BOUND
    await api.aclose()


async def test_slow_resolution_plus_slow_recall_share_one_deadline(
    fake_server: FakeServer,
) -> None:
    # Each step alone fits the budget; together they do not: the budget is the whole call.
    # With a budget per step both would finish and the memory would come back; the empty
    # result, not a clock, is the proof.
    fake_server.seed_memory("u", "Lives in Lisbon")
    fake_server.script("/org/projects", [Fault.delay(0.7)])
    fake_server.script("/v1/memory/recall", [Fault.delay(0.7)])
    api = MemorySyncAPI(API_KEY, base_url=fake_server.base_url)
    result, elapsed = await timed_recall(api, timeout=1.0)
    assert result is RecallResult.EMPTY
    assert elapsed < 1.0 + SLACK
    await api.aclose()


async def test_the_resolution_continues_after_a_budget_timeout(fake_server: FakeServer) -> None:
    gate = threading.Event()
    fake_server.script("/org/projects", [Fault.gate(gate)])
    api = MemorySyncAPI(API_KEY, base_url=fake_server.base_url)
    result, _ = await timed_recall(api, timeout=0.05)
    assert result is RecallResult.EMPTY
    gate.set()
    assert await api.resolve_tenant_id() == "fake"
    assert len(fake_server.requests_to("/org/projects")) == 1
    await api.aclose()


async def test_a_good_answer_returns_the_server_block_and_memories(
    fake_server: FakeServer, tenant_api: MemorySyncAPI
) -> None:
    fake_server.seed_memory("u", "Lives in Lisbon", score=0.8)
    result, _ = await timed_recall(tenant_api, timeout=5.0)
    assert result
    assert "- Lives in Lisbon" in result.block
    assert [m.text for m in result.memories] == ["Lives in Lisbon"]
    assert fake_server.requests_to("/v1/memory/recall")[0].json["k"] == 5


@pytest.mark.parametrize(
    ("fault", "words"),
    [
        (Fault.rate_limited(3), "rate limited"),
        (Fault.status(503), "503"),
        (Fault.status(401), "401"),
        (Fault.malformed_json(), "not JSON"),
        (Fault.html(502), "502"),
        (Fault.reset(), "connection error"),
        (Fault.json({"context": "x", "memories": "nope"}), "malformed"),
        (Fault.json({"context": 12, "memories": []}), "malformed"),
        (Fault.json([1, 2]), "JSON object"),
    ],
)
async def test_every_failure_is_an_empty_result_with_one_warning(
    fake_server: FakeServer,
    tenant_api: MemorySyncAPI,
    caplog: pytest.LogCaptureFixture,
    fault: Fault,
    words: str,
) -> None:
    fake_server.script("/v1/memory/recall", [fault])
    with caplog.at_level(logging.DEBUG, logger="memorysync.recall"):
        result, _ = await timed_recall(tenant_api, timeout=5.0)
    assert result is RecallResult.EMPTY
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert words in warnings[0].getMessage()
    assert API_KEY not in caplog.text


async def test_an_empty_answer_and_items_without_text_log_nothing(
    fake_server: FakeServer, tenant_api: MemorySyncAPI, caplog: pytest.LogCaptureFixture
) -> None:
    fake_server.script(
        "/v1/memory/recall",
        [Fault.json({"context": "", "memories": []}), Fault.json({"memories": [{"id": 1}]})],
    )
    with caplog.at_level(logging.DEBUG, logger="memorysync.recall"):
        first, _ = await timed_recall(tenant_api, timeout=5.0)
        second, _ = await timed_recall(tenant_api, timeout=5.0)
    assert first is RecallResult.EMPTY
    assert second is RecallResult.EMPTY
    assert caplog.records == []


async def test_the_callers_cancellation_propagates(
    fake_server: FakeServer, tenant_api: MemorySyncAPI
) -> None:
    fake_server.set_default("/v1/memory/recall", Fault.hang())
    task = asyncio.ensure_future(timed_recall(tenant_api, timeout=30.0))
    await fake_server.wait_for_requests_async(1, "/v1/memory/recall")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_user_memory_recall_uses_its_budget(fake_server: FakeServer) -> None:
    fake_server.set_default("/v1/memory/recall", Fault.hang())
    api = MemorySyncAPI(API_KEY, base_url=fake_server.base_url, tenant_id="t")
    memory = UserMemory(api, user_id="u", session_id="s", surface="ag2", recall_timeout=BUDGET)
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await memory.recall("hello") is RecallResult.EMPTY
    assert loop.time() - started < BOUND
    await memory.aclose()


async def test_user_memory_recall_asks_for_its_top_k(fake_server: FakeServer) -> None:
    fake_server.seed_memory("u", "Lives in Lisbon")
    api = MemorySyncAPI(API_KEY, base_url=fake_server.base_url, tenant_id="t")
    memory = UserMemory(
        api, user_id="u", session_id="s", surface="ag2", top_k=2, recall_timeout=30.0
    )
    assert await memory.recall("hello")
    assert fake_server.requests_to("/v1/memory/recall")[0].json["k"] == 2
    await memory.aclose()
