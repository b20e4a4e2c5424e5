"""Timestamps: one canonical, sortable UTC rendering for everything stored."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def render(moment: datetime) -> str:
    """Render as ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (lexicographic order = time order)."""
    return moment.astimezone(timezone.utc).strftime(_FORMAT)


def parse_iso(value: str) -> datetime:
    """Parse ISO 8601 (``Z`` accepted, naive means UTC); ``ValueError`` when it is not."""
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment


def normalise_iso(value: str) -> str:
    """Canonical rendering of an ISO 8601 string, so equal instants compare equal."""
    return render(parse_iso(value))


def month_key(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m")


def seconds_until_next_month(moment: datetime) -> int:
    moment = moment.astimezone(timezone.utc)
    if moment.month == 12:
        start = datetime(moment.year + 1, 1, 1, tzinfo=timezone.utc)
    else:
        start = datetime(moment.year, moment.month + 1, 1, tzinfo=timezone.utc)
    return max(1, math.ceil((start - moment).total_seconds()))


REPLAY_WINDOW = timedelta(days=30)
