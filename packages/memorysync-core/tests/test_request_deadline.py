"""``timeout`` is one deadline per request: connect, send and the whole answer (issue 26).

httpx's timeouts bound each read alone: against a server that trickles one byte a
second, a call with ``timeout=2`` ran for as long as the server kept trickling. These
tests serve such a server on a real loopback socket; the bound IS the feature, so it
is asserted, with a generous margin for a busy 2-core machine.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from memorysync_core import MemorySyncAPI
from memorysync_core.errors import APITimeoutError

TIMEOUT = 2.0
# Far below the time the trickling server would keep the call alive (TRICKLED_BYTES s).
MARGIN = 8.0
TRICKLED_BYTES = 60


async def _read_request(reader: asyncio.StreamReader) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            await reader.readexactly(int(value.strip()))


async def _trickle(writer: asyncio.StreamWriter, data: bytes) -> None:
    for byte in data:
        writer.write(bytes([byte]))
        await writer.drain()
        await asyncio.sleep(1.0)  # the server's behaviour under test: a byte a second


def _trickling_handler(where: str) -> Callable[..., Awaitable[None]]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await _read_request(reader)
            if where == "headers":
                writer.write(b"HTTP/1.1 200 OK\r\n")
                await _trickle(writer, b"X-Pad: " + b"a" * TRICKLED_BYTES)
            else:
                body = b'{"context": "' + b"a" * TRICKLED_BYTES + b'", "memories": []}'
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n"
                )
                await _trickle(writer, body)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client gave up: what the tests expect
        finally:
            writer.close()

    return handle


@pytest.fixture
async def trickling() -> AsyncIterator[Callable[[str], Awaitable[str]]]:
    servers: list[asyncio.Server] = []

    async def start(where: str) -> str:
        server = await asyncio.start_server(_trickling_handler(where), "127.0.0.1", 0)
        servers.append(server)
        port = server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    yield start
    for server in servers:
        server.close()


@pytest.mark.parametrize("where", ["headers", "body"])
async def test_a_trickling_answer_times_out_within_the_timeout(
    trickling: Callable[[str], Awaitable[str]], where: str
) -> None:
    base_url = await trickling(where)
    api = MemorySyncAPI("ms_deadline_key", base_url=base_url, tenant_id="t", timeout=TIMEOUT)
    try:
        started = time.monotonic()
        with pytest.raises(APITimeoutError) as caught:
            await api.recall(user_id="ana", prompt="Where do I live?")
        elapsed = time.monotonic() - started
    finally:
        await api.aclose()
    assert elapsed < TIMEOUT + MARGIN, f"recall ran {elapsed:.1f} s with timeout={TIMEOUT}"
    assert "POST /v1/memory/recall -> timeout" in str(caught.value)
    assert "ms_deadline_key" not in str(caught.value)
