"""Named dates: a question that names a day or a month asks about what was said then.

"What did Ana cook on 3 June, 2023?", "Where did Joanna travel in July 2022?": the
answer was told on that day or in that month, or, when the user said nothing more
then, the next time they talked (people tell what they did "yesterday", "last
week"). So a prompt naming a date with its year (a day or a month; a month without
a year, or a year alone, is too vague to narrow anything) gives a period, that day
or that month (:func:`named_period`), which the user's own data then extends to
the end of the day they next said anything (:func:`told_by`): a user who talks daily
gets a day more, one who talks weekly a week. The memories said in it (their
``said_at``: a turn's ``occurred_at``, or the time of writing; the newest ones, as
many as recall ranks) are brought in as candidates however old, and rank
``DATE_BONUS`` above their word score.

Tuned on LoCoMo's dev conversations, where each session carries a date and the
evidence of a question naming a date was said in that period or at the next
session (the earlier rule, a fixed 7 days after the period, followed how LoCoMo
spaces its sessions). A prompt naming no full date, or memories said at no other
time than when they were written, leave it with nothing to do but the period itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from memorysync_local._timeutil import render

# How much a memory said in the named period ranks above its score (a share of it,
# so a memory matching nothing is not recalled for its date alone).
DATE_BONUS = 1.0

_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"),
            ("may",), ("june", "jun"), ("july", "jul"), ("august", "aug"),
            ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}  # fmt: skip
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)\b"
_DATES = (
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s*{_YEAR}", re.IGNORECASE),  # 3 June, 2023
    re.compile(rf"\b{_MONTH}\s+{_DAY},?\s*{_YEAR}", re.IGNORECASE),  # June 3, 2023
    re.compile(rf"\b{_MONTH},?\s+{_YEAR}", re.IGNORECASE),  # June 2023
)


@dataclass(frozen=True)
class Period:
    """``[since, until)`` as canonical UTC text (``_timeutil.render``): it sorts as time."""

    since: str
    until: str


def named_period(prompt: str) -> Period | None:
    """The period a prompt's first full date names (that day, that month), or None."""
    for pattern in _DATES:
        found = pattern.search(prompt)
        if found is None:
            continue
        parts = found.groupdict()
        year, month = int(parts["year"]), _MONTHS[parts["month"].lower()]
        try:
            if parts.get("day"):
                start = datetime(year, month, int(parts["day"]), tzinfo=timezone.utc)
                end = start + timedelta(days=1)
            else:
                start = datetime(year, month, 1, tzinfo=timezone.utc)
                end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=timezone.utc)
        except ValueError:  # "31 June": no such day
            continue
        return Period(render(start), render(end))
    return None


def told_by(period: Period, next_said: str | None) -> Period:
    """``period`` up to the end of the UTC day of ``next_said``, the first time the user
    said anything at or after the period's end (None: nothing since; the period as is)."""
    if next_said is None:
        return period
    day = datetime.fromisoformat(next_said[:10]).replace(tzinfo=timezone.utc)
    return Period(period.since, max(period.until, render(day + timedelta(days=1))))
