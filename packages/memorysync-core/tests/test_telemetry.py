"""OpenTelemetry: spans and metrics for recall, delivery and explicit calls, privately."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

import pytest

from memorysync_core import (
    AdapterSettings,
    MemorySyncAPI,
    RetryPolicy,
    SyncUserMemory,
    UserMemory,
    configure_telemetry,
)
from memorysync_core import _telemetry as telemetry
from memorysync_core._delivery.queue import DeliveryQueue
from memorysync_core.adapters import CapturedTurn
from shared.fake_server import FakeServer, Fault

from .conftest import API_KEY

PROMPT = "Where does my sister live these days?"
USER = "alice@example.com"


@pytest.fixture
async def memory(fake_server: FakeServer) -> Any:
    api = MemorySyncAPI(API_KEY, base_url=fake_server.base_url, source="autogen")
    memory = UserMemory(api, user_id=USER, session_id="s", surface="autogen", recall_timeout=2.0)
    fake_server.seed_memory(USER, "Sister lives in Porto")
    yield memory
    await memory.aclose()


def no_secrets(otel: Any) -> None:
    for value in otel.every_attribute_value():
        assert API_KEY not in value
        assert USER not in value
        assert PROMPT not in value
        assert "Porto" not in value


async def test_a_recall_is_one_span_with_the_tenant_lookup_and_http_attempts_inside(
    otel: Any, memory: UserMemory
) -> None:
    with otel.tracer.start_as_current_span("agent turn") as turn:
        result = await memory.recall(PROMPT)
    assert "Porto" in result.block
    (recall,) = otel.spans("memorysync.recall")
    assert recall.parent.span_id == turn.get_span_context().span_id
    attributes = dict(recall.attributes)
    assert attributes["memorysync.surface"] == "autogen"
    assert attributes["memorysync.top_k"] == 5
    assert attributes["memorysync.memories"] == 1
    assert attributes["memorysync.rendered_chars"] == len(result.block)
    assert attributes["memorysync.budget_exhausted"] is False
    assert attributes["memorysync.outcome"] == "ok"
    assert len(attributes["memorysync.user_id"]) == 16  # a digest, not the id
    (tenant,) = [s for s in otel.children(recall) if s.name == "memorysync.tenant"]
    (lookup,) = otel.children(tenant)
    assert lookup.attributes["memorysync.route"] == "/org/projects"
    (post,) = [s for s in otel.children(recall) if s.name == "memorysync.http"]
    assert post.attributes["memorysync.route"] == "/v1/memory/recall"
    assert post.attributes["http.response.status_code"] == 200
    no_secrets(otel)


async def test_recording_the_query_and_the_user_id_is_opt_in(otel: Any, memory: UserMemory) -> None:
    configure_telemetry(record_query=True, record_user_id=True)
    try:
        await memory.recall(PROMPT)
    finally:
        configure_telemetry()
    (recall,) = otel.spans("memorysync.recall")
    assert recall.attributes["memorysync.query"] == PROMPT
    assert recall.attributes["memorysync.user_id"] == USER


async def test_a_recall_that_runs_out_of_budget_says_so_and_counts(
    otel: Any, fake_server: FakeServer
) -> None:
    api = MemorySyncAPI(API_KEY, base_url=fake_server.base_url, tenant_id="t")
    memory = UserMemory(api, user_id=USER, session_id="s", surface="ag2", recall_timeout=0.2)
    fake_server.script("/v1/memory/recall", [Fault.hang()])
    before = otel.total("memorysync.recall.budget_exhausted")
    try:
        assert not await memory.recall(PROMPT)
    finally:
        await memory.aclose()
    (recall,) = otel.spans("memorysync.recall")
    assert recall.attributes["memorysync.budget_exhausted"] is True
    assert recall.attributes["memorysync.outcome"] == "timeout"
    assert otel.total("memorysync.recall.budget_exhausted") == before + 1
    assert otel.metric("memorysync.recall.duration")


async def test_a_delivered_batch_is_a_span_with_its_retries_as_events_and_counts(
    otel: Any, fake_server: FakeServer
) -> None:
    api = MemorySyncAPI(API_KEY, base_url=fake_server.base_url, tenant_id="t")
    fake_server.script("/v1/history/append", [Fault.status(503), Fault.status(503)])

    async def deliver(turns: Any) -> None:  # one attempt each: the queue retries
        items = [item for turn in turns for item in turn.history_items()]
        await api.append_history(user_id=USER, session_id="ag2::s", turns=items, source="ag2")

    policy = RetryPolicy(attempts=5, base_delay=0.0, max_delay=0.0, jitter=0.0)
    queue = DeliveryQueue(deliver, policy=policy)
    delivered_before = otel.total("memorysync.turns.delivered")
    retried_before = otel.total("memorysync.turns.retried")
    try:
        for text in ("I live in Porto.", "Noted."):
            queue.submit(CapturedTurn.capture("user", text, scope="ag2::s"))
        report = await queue.flush(5.0)
    finally:
        await queue.aclose()
        await api.aclose()
    assert report.delivered == 2
    (deliver_span,) = otel.spans("memorysync.deliver")
    assert deliver_span.parent is None  # a trace of its own
    assert deliver_span.attributes["memorysync.delivered"] == 2
    assert deliver_span.attributes["memorysync.retries"] == 2
    retries = [e for e in deliver_span.events if e.name == "memorysync.retry"]
    assert [e.attributes["http.response.status_code"] for e in retries] == [503, 503]
    assert otel.total("memorysync.turns.delivered") == delivered_before + 2
    assert otel.total("memorysync.turns.retried") == retried_before + 4
    no_secrets(otel)


async def test_an_explicit_call_is_a_span_marked_as_an_error_when_it_fails(
    otel: Any, memory: UserMemory, fake_server: FakeServer
) -> None:
    await memory.search("sister")
    fake_server.script("/v1/memory/query", [Fault.status(422, {"detail": f"bad: {PROMPT}"})])
    with pytest.raises(Exception, match="422"):
        await memory.search(PROMPT)
    ok, failed = otel.spans("memorysync.search")
    assert "error.type" not in ok.attributes
    assert failed.attributes["error.type"] == "ValidationError"
    no_secrets(otel)  # the server's message quoted the query: it is not on the span


def test_the_sync_face_nests_its_recall_under_the_callers_span_across_threads(
    otel: Any, fake_server: FakeServer
) -> None:
    fake_server.seed_memory(USER, "Sister lives in Porto")
    settings = AdapterSettings.build(
        surface="ag2", user_id=USER, api_key=API_KEY, base_url=fake_server.base_url
    )
    memory = SyncUserMemory(settings)
    try:
        with otel.tracer.start_as_current_span("chat") as chat:
            assert "Porto" in memory.recall(PROMPT).block
    finally:
        memory.close()
    (recall,) = otel.spans("memorysync.recall")
    assert recall.parent.span_id == chat.get_span_context().span_id
    assert threading.current_thread() is threading.main_thread()


async def test_turned_off_it_records_nothing(otel: Any, memory: UserMemory) -> None:
    telemetry.set_enabled(False)
    try:
        assert await memory.recall(PROMPT)
    finally:
        telemetry.set_enabled(True)
    assert otel.spans() == []


def test_without_opentelemetry_installed_the_core_works_and_records_nothing() -> None:
    script = """
import sys
sys.modules["opentelemetry"] = None  # as if opentelemetry-api were not installed
import asyncio, httpx
from memorysync_core import MemorySyncAPI, UserMemory, _telemetry

def answer(request):
    if request.url.path == "/org/projects":
        return httpx.Response(200, json=[{"tenant_id": "t"}])
    return httpx.Response(200, json={"context": "- Lives in Porto", "memories": []})

async def main():
    api = MemorySyncAPI("ms_x", base_url="http://x.test", transport=httpx.MockTransport(answer))
    memory = UserMemory(api, user_id="u", session_id="s", surface="autogen")
    print((await memory.recall("Where do I live?")).block, _telemetry.capture_context())
    await memory.aclose()

asyncio.run(main())
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "- Lives in Porto" in proc.stdout
    assert proc.stdout.strip().endswith(" None")  # no trace context to capture
