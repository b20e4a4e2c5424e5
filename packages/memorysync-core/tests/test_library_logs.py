"""httpx's and httpcore's own DEBUG records never carry the key (issue 26 item 5).

httpcore logs each response's headers at DEBUG; a server that echoes the key in
``x-request-id`` put it in the application's log. The core scrubs those records.
"""

from __future__ import annotations

import logging

import pytest

from memorysync_core import MemorySyncAPI
from shared.fake_server import FakeServer, Fault

KEY = "ms_echoed_by_a_hostile_server_7c1d"


async def test_a_key_echoed_in_a_response_header_never_reaches_the_log(
    fake_server: FakeServer, caplog: pytest.LogCaptureFixture
) -> None:
    echo = Fault.json({"context": "", "memories": []}, headers={"x-request-id": KEY})
    fake_server.script("/v1/memory/recall", [echo])
    api = MemorySyncAPI(KEY, base_url=fake_server.base_url, tenant_id="t")
    try:
        with caplog.at_level(logging.DEBUG):
            await api.recall(user_id="ana", prompt="Where do I live?")
    finally:
        await api.aclose()
    headers = [r for r in caplog.records if "receive_response_headers.complete" in r.getMessage()]
    assert headers, "httpcore logged no response headers: the test proves nothing"
    assert "x-request-id" in headers[0].getMessage()
    assert "***" in headers[0].getMessage()
    assert KEY not in caplog.text
    assert all(KEY not in r.getMessage() for r in caplog.records)
