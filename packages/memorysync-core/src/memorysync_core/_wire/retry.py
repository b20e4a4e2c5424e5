"""One retry policy: which failures are retried, and how long to wait between tries."""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from .._errors import (
    APIConnectionError,
    InsufficientStorageError,
    MemorySyncError,
    RateLimitError,
    ResponseFormatError,
    ServerError,
)

T = TypeVar("T")

_logger = logging.getLogger("memorysync.client")
# Jitter from a generator of our own: a library must not move the application's global
# random state (seeded simulations, property-based tests drawing from it).
_JITTER = random.Random()


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded exponential backoff with jitter for transient failures.

    Retried: transport errors (timeouts included), 5xx, 429 and malformed answers (a
    proxy's HTML page with a 200; every retry resends the same ids, so it is safe).
    Never retried: validation, auth, not-found and 507 (the server's storage is full
    or unwritable: it lasts longer than any backoff). A 429's ``retry_after`` is
    honoured up to ``max_retry_after`` seconds; a 429 asking for more than that is an
    exhausted quota (an evaluation key answers with the time until its reset), not a
    blip, and is not retried.

    >>> RetryPolicy(jitter=0).delay(3, RuntimeError())
    1.0
    """

    attempts: int = 3
    base_delay: float = 0.25
    max_delay: float = 8.0
    max_retry_after: float = 30.0
    jitter: float = 0.25

    def __post_init__(self) -> None:
        if (
            isinstance(self.attempts, bool)
            or not isinstance(self.attempts, int)
            or self.attempts < 1
        ):
            raise ValueError(f"attempts must be an integer >= 1, got {self.attempts!r}")
        for name in ("base_delay", "max_delay", "max_retry_after"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if not isinstance(self.jitter, (int, float)) or not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter must be between 0 and 1, got {self.jitter!r}")

    def is_retryable(self, exc: BaseException) -> bool:
        """True for transport errors, timeouts, 5xx (but 507), malformed answers and 429.

        A 429 asking to wait longer than ``max_retry_after`` is not retried.
        """
        if isinstance(exc, InsufficientStorageError):
            return False
        if isinstance(exc, RateLimitError):
            return exc.retry_after is None or exc.retry_after <= self.max_retry_after
        return isinstance(exc, (APIConnectionError, ServerError, ResponseFormatError))

    def delay(self, attempt: int, exc: BaseException) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        if isinstance(exc, RateLimitError) and exc.retry_after is not None:
            return min(max(exc.retry_after, 0.0), self.max_retry_after)
        exponent = min(max(attempt, 1) - 1, 60)
        base = min(self.max_delay, self.base_delay * (2.0**exponent))
        spread = base * self.jitter
        return float(min(self.max_delay, max(0.0, base + _JITTER.uniform(-spread, spread))))


async def call_with_retries(
    fn: Callable[[], Awaitable[T]], policy: RetryPolicy, *, attempts: int | None = None
) -> T:
    """Await ``fn()`` up to ``attempts`` (default ``policy.attempts``) times.

    ``fn`` must resend the very same body (same seeds, capture ids and keys) on every
    call, so a retry is never a duplicate. The last error is raised.

    Example:
        ```python
        body_turns = turn.history_items()
        await call_with_retries(
            lambda: api.append_history(user_id="alice", session_id="s", turns=body_turns),
            RetryPolicy(),
        )
        ```
    """
    total = policy.attempts if attempts is None else attempts
    if total < 1:
        raise ValueError(f"attempts must be >= 1, got {total!r}")
    attempt = 0
    while True:
        attempt += 1
        try:
            return await fn()
        except MemorySyncError as exc:
            if attempt >= total or not policy.is_retryable(exc):
                raise
            wait = policy.delay(attempt, exc)
            _logger.info(
                "retrying after %s (status %s), attempt %s of %s, in %.2f s",
                type(exc).__name__,
                exc.status_code,
                attempt + 1,
                total,
                wait,
            )
            await asyncio.sleep(wait)
