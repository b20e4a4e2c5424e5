"""Retry jitter leaves the application's global random state alone."""

from __future__ import annotations

import random

from memorysync_core import RetryPolicy, ServerError


def test_a_jittered_delay_does_not_draw_from_the_global_random_generator() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=10.0, jitter=0.5)
    error = ServerError("POST /v1/history/append -> 503", status_code=503)
    random.seed(1234)
    before = random.getstate()
    delays = {policy.delay(attempt, error) for attempt in range(1, 6) for _ in range(20)}
    assert random.getstate() == before
    assert len(delays) > 5  # still jittered
    assert all(0.0 <= delay <= 10.0 for delay in delays)
