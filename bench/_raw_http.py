"""A minimal HTTP/1.1 client on asyncio streams, for the concurrent recall loads
(why not ``httpx``: ``recall_speed._concurrent``)."""

from __future__ import annotations

import asyncio
import time


async def timed_recall(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    port: int,
    api_key: str,
    body: bytes,
) -> float:
    """POST ``body`` to ``/v1/memory/recall`` on a keep-alive connection to
    ``127.0.0.1:port`` and read the whole answer; the seconds it took (a status other
    than 200 raises ``RuntimeError``)."""
    head = (
        f"POST /v1/memory/recall HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"X-API-Key: {api_key}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    started = time.perf_counter()
    writer.write(head + body)
    answer = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in answer.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    await reader.readexactly(length)
    if not answer.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(answer.split(b"\r\n", 1)[0].decode())
    return time.perf_counter() - started
