"""The retry policy of the explicit calls."""

from __future__ import annotations

from dataclasses import dataclass

from memorysync_core import RateLimitError, RetryPolicy


@dataclass(frozen=True)
class QuotaAwareRetry(RetryPolicy):
    """``RetryPolicy``, except that a 429 asking to wait longer than ``max_retry_after``
    is raised at once: that is an exhausted quota (an evaluation key answers with the
    seconds until next month), not a blip worth sleeping through twice.
    """

    def is_retryable(self, exc: BaseException) -> bool:
        if isinstance(exc, RateLimitError) and (
            exc.retry_after is not None and exc.retry_after > self.max_retry_after
        ):
            return False
        return super().is_retryable(exc)
