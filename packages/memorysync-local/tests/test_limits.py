"""Limits that hold (issue 12, item 5): the key before the body, 413 however the body is
framed, and stalled bodies timed out so one client cannot hold the server's connections."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memorysync_local import ServedServer, create_app
from memorysync_local._http.dependencies import UNAUTHORIZED
from shared.local_server import stored_memories

T = "local"
KEY = "ms_local_dev_key"
TURN = b'{"tenant_id": "local", "user_id": "ana", "text": "I live in Oslo.", "source": "t"}'


@pytest.fixture
def quick_timeout_server(tmp_path: Path) -> Iterator[ServedServer]:
    """A served server that waits at most 0.5 s for the next piece of a body."""
    app = create_app(str(tmp_path / "limits.db"), body_timeout=0.5)
    server = ServedServer(app, api_key=KEY, tenant_id=T, db_path=str(tmp_path / "limits.db"))
    try:
        yield server
    finally:
        server.stop()


def raw_exchange(base_url: str, head: bytes, timeout: float) -> tuple[int, bytes]:
    """Send ``head`` (request line and headers, no body) and read the answer:
    (status, its body)."""
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(head)
        received = b""
        while b"\r\n\r\n" not in received:
            received += sock.recv(65536)
        headers, _, body = received.partition(b"\r\n\r\n")
        length = int(headers.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        while len(body) < length:
            body += sock.recv(65536)
    return int(received.split(b" ", 2)[1]), body


async def chunks(total: int, size: int = 1024 * 1024) -> AsyncIterator[bytes]:
    yield b'{"tenant_id": "local", "user_id": "ana", "source": "t", "text": "'
    sent = 0
    while sent < total:
        yield b"x" * size
        sent += size
    yield b'"}'


async def test_a_chunked_body_over_the_limit_is_413_not_400(
    client: httpx.AsyncClient, server: Any
) -> None:
    answer = await client.post(
        "/v1/memory/add_turn",
        content=chunks(9 * 1024 * 1024),
        headers={"content-type": "application/json"},
    )
    assert answer.status_code == 413, answer.text
    assert "larger than 8388608 bytes" in answer.json()["detail"]
    assert stored_memories(server, T, "ana") == []


async def test_a_chunked_body_under_the_limit_is_read_whole(client: httpx.AsyncClient) -> None:
    async def small() -> AsyncIterator[bytes]:
        for part in (TURN[:20], TURN[20:]):
            yield part

    answer = await client.post(
        "/v1/memory/add_turn", content=small(), headers={"content-type": "application/json"}
    )
    assert answer.status_code == 200, answer.text


async def test_an_unauthenticated_body_is_refused_before_it_is_read(local_server: Any) -> None:
    """The app called directly (the served variant is the raw-socket test below): the
    body is never asked for."""
    pulled: list[Any] = []
    sent: list[Any] = []

    async def receive() -> dict[str, Any]:
        pulled.append(1)
        return {"type": "http.request", "body": b"{" + b" " * 1000, "more_body": True}

    async def send(message: Any) -> None:
        sent.append(message)

    for headers in ([], [(b"x-api-key", b"wrong")], [(b"x-api-key", b"  ")]):
        pulled.clear()
        sent.clear()
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/v1/memory/add_turn",
            "raw_path": b"/v1/memory/add_turn",
            "query_string": b"",
            "root_path": "",
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", b"8388608"),
                *headers,
            ],
            "client": ("127.0.0.1", 1),
            "server": ("memorysync.local", 80),
        }
        await local_server.app(scope, receive, send)
        assert pulled == []
        assert sent[0]["status"] == 401


def test_an_unauthenticated_8_mib_body_is_401_before_any_byte_is_sent(
    quick_timeout_server: ServedServer,
) -> None:
    head = (
        b"POST /v1/memory/add_turn HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/json\r\nContent-Length: 8388608\r\n\r\n"
    )
    status, answer = raw_exchange(quick_timeout_server.base_url, head, timeout=30)
    assert status == 401, answer
    assert json.loads(answer) == {"detail": UNAUTHORIZED}


def test_stalled_bodies_are_answered_408_and_their_connections_closed(
    quick_timeout_server: ServedServer,
) -> None:
    host, port = quick_timeout_server.base_url.removeprefix("http://").rsplit(":", 1)
    head = (
        b"POST /v1/memory/add_turn HTTP/1.1\r\nHost: x\r\nX-API-Key: " + KEY.encode() + b"\r\n"
        b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    )
    socks = [socket.create_connection((host, int(port)), timeout=30) for _ in range(200)]
    try:
        for sock in socks:
            sock.sendall(head)
        for sock in socks:
            received = b""
            while chunk := sock.recv(65536):  # until the server closes it
                received += chunk
            assert received.startswith(b"HTTP/1.1 408"), received[:80]
            assert b"connection: close" in received.lower()
    finally:
        for sock in socks:
            sock.close()
    # The server still serves everyone else.
    health = httpx.get(f"{quick_timeout_server.base_url}/health")
    assert health.status_code == 200


def test_a_body_that_trickles_in_within_the_timeout_is_served(
    quick_timeout_server: ServedServer,
) -> None:
    host, port = quick_timeout_server.base_url.removeprefix("http://").rsplit(":", 1)
    head = (
        b"POST /v1/memory/add_turn HTTP/1.1\r\nHost: x\r\nX-API-Key: " + KEY.encode() + b"\r\n"
        b"Content-Type: application/json\r\nContent-Length: "
        + str(len(TURN)).encode()
        + b"\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(head)
        for i in range(0, len(TURN), 16):
            sock.sendall(TURN[i : i + 16])
        received = sock.recv(65536)
    assert received.startswith(b"HTTP/1.1 200"), received[:80]


async def test_the_openapi_document_declares_the_guards_answers(
    client: httpx.AsyncClient,
) -> None:
    document = (await client.get("/openapi.json")).json()
    answers = document["paths"]["/v1/history/append"]["post"]["responses"]
    assert {"401", "408", "413", "422"} <= set(answers)
