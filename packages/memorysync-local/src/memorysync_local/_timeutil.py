"""Timestamps: one canonical, sortable UTC rendering for everything stored."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def utc_now() -> datetime:
    """The current time, in UTC."""
    return datetime.now(timezone.utc)


def render(moment: datetime) -> str:
    """Render as ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (lexicographic order = time order).

    Formatted by hand: ``strftime("%Y")`` does not zero-pad years before 1000 on
    every platform, which would break the ordering. ``OverflowError`` when the
    instant has no UTC rendering (9999-12-31T23:59-05:00 is in year 10000).
    """
    m = moment.astimezone(timezone.utc)
    return (
        f"{m.year:04d}-{m.month:02d}-{m.day:02d}T"
        f"{m.hour:02d}:{m.minute:02d}:{m.second:02d}.{m.microsecond:06d}Z"
    )


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
    """Canonical rendering of an ISO 8601 string, so equal instants compare equal.

    ``ValueError`` for text that is not ISO 8601, and for an instant outside the
    years 1-9999 once moved to UTC.
    """
    moment = parse_iso(value)
    try:
        return render(moment)
    except OverflowError:
        raise ValueError("outside the years 0001-9999 in UTC") from None


def epoch_micros(moment: datetime) -> int:
    """Integer microseconds since the Unix epoch (negative before 1970); exact."""
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def rendered_micros(rendered: str) -> int:
    """:func:`epoch_micros` of a string written by :func:`render`."""
    return epoch_micros(parse_iso(rendered))


def month_key(moment: datetime) -> str:
    """The UTC month of a moment, ``YYYY-MM`` (what quotas count by)."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m")


def seconds_until_next_month(moment: datetime) -> int:
    """Whole seconds from ``moment`` to the start of the next UTC month."""
    moment = moment.astimezone(timezone.utc)
    if moment.month == 12:
        start = datetime(moment.year + 1, 1, 1, tzinfo=timezone.utc)
    else:
        start = datetime(moment.year, moment.month + 1, 1, tzinfo=timezone.utc)
    return max(1, math.ceil((start - moment).total_seconds()))


REPLAY_WINDOW = timedelta(days=30)
