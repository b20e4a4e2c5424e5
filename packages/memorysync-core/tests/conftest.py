"""Fixtures of memorysync-core's tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from memorysync_core import MemorySyncAPI, RetryPolicy
from shared.fake_server import FakeServer

API_KEY = "ms_test_SECRET_4f9a1c"
BASE_URL = "https://memorysync.test"

#: Retries without waiting, so retry tests stay fast.
FAST_RETRY = RetryPolicy(attempts=3, base_delay=0.0, max_delay=0.0, jitter=0.0)


@pytest.fixture
async def api(fake_server: FakeServer) -> AsyncIterator[MemorySyncAPI]:
    """A client of the fake server."""
    client = MemorySyncAPI(API_KEY, base_url=fake_server.base_url)
    try:
        yield client
    finally:
        await client.aclose()
