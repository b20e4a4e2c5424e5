"""Plans at work: each add is counted against the caller's monthly limit.

A key without a plan is counted and never refused. Past its limit a ``free`` key's
writes are skipped silently and its reads come back empty; an ``evaluation`` key
gets :class:`QuotaExceeded` (a 429 with ``retry_after``).
"""

from __future__ import annotations

from typing import Literal

from memorysync_local._plans import Caller
from memorysync_local._storage.interface import Session, Storage
from memorysync_local._timeutil import month_key, seconds_until_next_month, utc_now

Meter = Literal["ok", "silent", "refused"]


class QuotaExceeded(Exception):
    """An evaluation key is over its monthly limit (answered as a 429)."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"monthly add limit reached; retry after {retry_after} seconds")
        self.retry_after = retry_after


class Quota:
    """Monthly add counts per key, in the storage."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    @staticmethod
    def meter(session: Session, caller: Caller) -> Meter:
        """Count one add in the caller's write; say whether it is within the plan."""
        plan = caller.plan
        limit = None if plan is None else plan.monthly_limit
        if session.quota.count_add(caller.key_id, month_key(utc_now()), limit):
            return "ok"
        return "silent" if plan is not None and plan.mode == "free" else "refused"

    def over_limit(self, caller: Caller) -> bool:
        """True once an add was refused this month (reads then come back empty / 429)."""
        if caller.plan is None:
            return False
        return self.usage(caller)[1] > 0

    def usage(self, caller: Caller) -> tuple[int, int]:
        """(adds, refused) this month for a caller."""
        with self.storage.read() as session:
            return session.quota.usage(caller.key_id, month_key(utc_now()))

    @staticmethod
    def retry_after() -> int:
        """Seconds until the next month, when limits start again."""
        return seconds_until_next_month(utc_now())
