"""501 is a typed, non-retried "unsupported": from memorysync-local and by the policy."""

from __future__ import annotations

from typing import Any

import pytest

from memorysync_core import MemorySyncAPI, RetryPolicy, ServerError, UnsupportedError
from memorysync_core._wire.retry import call_with_retries


async def test_a_501_is_unsupported_and_tried_once(local_server: Any) -> None:
    api = MemorySyncAPI(
        base_url=local_server.base_url,
        api_key=local_server.api_key,
        transport=local_server.transport,
    )
    calls = 0

    async def summarize() -> Any:
        nonlocal calls
        calls += 1
        return await api._request("POST", "/memory/summarize", json={"memory_ids": [1]})

    try:
        with pytest.raises(UnsupportedError) as caught:
            await call_with_retries(summarize, RetryPolicy(attempts=5, base_delay=0))
    finally:
        await api.aclose()
    assert calls == 1
    assert caught.value.status_code == 501
    assert "does not implement POST /memory/summarize" in str(caught.value)
    assert not isinstance(caught.value, ServerError)


def test_the_policy_retries_5xx_but_not_unsupported() -> None:
    policy = RetryPolicy()
    assert policy.is_retryable(ServerError("x", status_code=503))
    assert not policy.is_retryable(UnsupportedError("x", status_code=501))
