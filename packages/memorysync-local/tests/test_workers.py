"""The served server's worker threads (``_workers``); an embedded server leaves the caller's."""

from __future__ import annotations

from typing import Any

import anyio.to_thread
import pytest

from memorysync_local import embedded
from memorysync_local._http.worker_threads import SERVED_WORKER_THREADS, WorkerThreads
from shared.local_server import client_for


async def _ok(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 204, "headers": []})
    await send({"type": "http.response.body", "body": b""})


async def test_the_first_request_sizes_the_serving_loops_thread_pool() -> None:
    limiter = anyio.to_thread.current_default_thread_limiter()
    before = limiter.total_tokens
    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    async def receive() -> Any:
        return {"type": "http.request", "body": b"", "more_body": False}

    wrapped = WorkerThreads(_ok)
    assert before != SERVED_WORKER_THREADS
    await wrapped({"type": "http", "path": "/health"}, receive, send)
    assert limiter.total_tokens == SERVED_WORKER_THREADS
    assert sent[0]["status"] == 204  # the request itself went through


def test_a_pool_needs_one_thread_at_least() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        WorkerThreads(_ok, threads=0)


async def test_an_embedded_server_leaves_the_callers_thread_pool_alone() -> None:
    limiter = anyio.to_thread.current_default_thread_limiter()
    before = limiter.total_tokens
    with embedded() as server:
        async with client_for(server) as client:
            answer = await client.post(
                "/v1/memory/recall",
                json={"tenant_id": server.tenant_id, "user_id": "u", "prompt": "hi there"},
            )
            assert answer.status_code == 200, answer.text
    assert limiter.total_tokens == before
