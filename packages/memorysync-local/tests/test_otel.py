"""serve --otel: a span per request through FastAPI's instrumentation, no query strings."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import httpx

from memorysync_local._http import otel as _otel
from memorysync_local._http.app import create_app

KEY = "ms_otel_test_key_0123456789"


async def test_each_request_is_a_server_span_named_by_its_route_without_the_query(
    otel: Any,
) -> None:
    app = create_app(":memory:", api_keys={KEY: "local"})
    assert _otel.instrument(app)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://local.test") as client:
        answer = await client.get(
            "/v1/memory/local/alice/list?api_key=" + KEY, headers={"X-API-Key": KEY}
        )
    assert answer.status_code == 200
    server = [s for s in otel.spans() if s.kind.name == "SERVER"]
    assert len(server) == 1
    assert server[0].attributes["http.route"] == "/v1/memory/{tenant_id}/{user_id:path}/list"
    for value in otel.every_attribute_value():
        assert KEY not in value
        assert "api_key" not in value
    app.state.store.close()


def test_serve_otel_says_what_it_exports_or_why_not() -> None:
    # In a process of its own: the SDK's tracer provider can be set once per process.
    started = subprocess.run(
        [
            sys.executable,
            "-c",
            "from memorysync_local._http import otel as _otel; print(_otel.start_sdk())",
        ],
        capture_output=True,
        text=True,
    )
    assert started.stdout.startswith("OpenTelemetry: exporting spans over OTLP/HTTP")
    help_text = subprocess.run(
        [sys.executable, "-m", "memorysync_local._cli", "serve", "--help"],
        capture_output=True,
        text=True,
    )
    assert "--otel" in help_text.stdout or "--otel" in help_text.stderr


async def test_a_recall_answered_past_fastapis_routing_is_still_a_named_span(otel: Any) -> None:
    # An ordinary recall is answered from the guard (_http/fast_recall.py): the span
    # must still be there, named by its route.
    app = create_app(":memory:", api_keys={KEY: "local"}, embedder="none")
    assert _otel.instrument(app)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://local.test") as client:
        answer = await client.post(
            "/v1/memory/recall",
            json={"tenant_id": "local", "user_id": "alice", "prompt": "where do I live?"},
            headers={"X-API-Key": KEY},
        )
    assert answer.status_code == 200
    server = [s for s in otel.spans() if s.kind.name == "SERVER"]
    assert len(server) == 1
    assert server[0].attributes["http.route"] == "/v1/memory/recall"
    assert server[0].attributes["http.status_code"] == 200
    app.state.store.close()
