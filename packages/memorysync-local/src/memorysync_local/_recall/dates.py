"""Named dates: a question that names a day or a month asks about what was said then.

"What did Ana cook on 3 June, 2023?", "Where did Joanna travel in July 2022?": the
answer was told on that day, or in that month. So a prompt naming a date with its
year (a day or a month; a month without a year, or a year alone, is too vague to
narrow anything) gives a period, exactly that day or that month (UTC); the
memories said in it (their ``said_at``: a turn's ``occurred_at``, or the time of
writing; the newest ones, as many as recall ranks) are brought in as candidates
however old, and rank ``DATE_BONUS`` above their word score.

The period is the one named, nothing added: an event told days later ("last
week") is left to the words and the "when" rule (:mod:`.answers`). The earlier
rule ran 7 days past the period, which followed how LoCoMo spaces its dated
sessions; on LoCoMo's dev conversations (where it was tuned) the named period
alone recalls as well (R@10 0.769 both), and so does a window read from the data
(up to the user's next day of talk), which however reaches months on when the
user next talked months later.
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
