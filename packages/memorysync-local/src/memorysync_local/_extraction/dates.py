"""Dates said with a fact, resolved against when it was said (``said_at``).

"I moved to Toronto last month", said on 3 December 2026, is kept as
"... last month (November 2026)", so a question about November, or asked a year
later, still finds the right time. Only the plain forms people use are read
("yesterday", "last week", "next month", "in April", "on Saturday", "next summer",
"in two weeks"); anything else is left as said. The user's words are never changed:
the resolved date is added in brackets after the phrase.
"""

from __future__ import annotations

import calendar
import re
from datetime import date, timedelta

_MONTHS = {name: i for i, name in enumerate(calendar.month_name) if name}
_DAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
_SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}
_COUNTS = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "a couple of": 2}
_UNIT = r"(?:week|month|year|weekend|spring|summer|autumn|fall|winter)"
_DAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
# Month names are matched capitalised ("in May", not "it may"); the rest in any case.
_PHRASE = re.compile(
    r"\b(?:(?i:yesterday|today|tomorrow)"
    rf"|(?i:(?P<rel>last|next|this)\s+(?P<unit>{_UNIT}|{_DAY}))"
    rf"|(?i:(?:in|on|by|since|until|from|during)\s+)(?:early\s+|late\s+|mid-?)?"
    rf"(?P<month>{'|'.join(_MONTHS)})\b(?!\s+\d)"
    # "on Sunday" is a day; "on Sunday mornings" and "on Sundays" are a habit
    rf"|(?i:(?<!every\s)on\s+(?P<day>{_DAY})(?!s\b|\s+(?:mornings|afternoons|evenings|nights)\b))"
    r"|(?i:in\s+(?P<count>\d+|a|one|two|three|four|five|six|a couple of)\s+"
    r"(?P<span>days?|weeks?|months?))"
    r")\b"
)
# A clause in the past tense places "in April" before said_at, else after it.
_PAST = re.compile(
    r"\b(?:was|were|did|went|had|got|moved|started|left|joined|bought|sold|visited|broke|"
    r"turned|met|finished|graduated|adopted|ago)\b",
    re.IGNORECASE,
)


def resolve_dates(text: str, said: date) -> str:
    """``text`` with each relative date it holds followed by the date it means.

    >>> resolve_dates("Moved to Toronto last month", date(2026, 12, 3))
    'Moved to Toronto last month (November 2026)'
    >>> resolve_dates("Running a half marathon in April", date(2026, 12, 3))
    'Running a half marathon in April (April 2027)'
    """
    past = _PAST.search(text) is not None
    pieces: list[str] = []
    last = 0
    for found in _PHRASE.finditer(text):
        label = _label(found, said, past)
        if label is None or f"({label})" in text:
            continue
        pieces += [text[last : found.end()], f" ({label})"]
        last = found.end()
    return "".join(pieces) + text[last:]


def _label(found: re.Match[str], said: date, past: bool) -> str | None:
    word = found.group(0).lower()
    if word in ("yesterday", "today", "tomorrow"):
        step = {"yesterday": -1, "today": 0, "tomorrow": 1}[word]
        return (said + timedelta(days=step)).isoformat()
    if found.group("month"):
        month = _MONTHS[found.group("month")]
        year = said.year
        if past and month > said.month:
            year -= 1
        elif not past and month < said.month:
            year += 1
        return f"{calendar.month_name[month]} {year}"
    if found.group("day"):
        return _weekday(said, _DAYS[found.group("day").lower()], past).isoformat()
    if found.group("count"):
        return _in(said, found.group("count").lower(), found.group("span").lower())
    rel, unit = found.group("rel").lower(), found.group("unit").lower()
    step = {"last": -1, "this": 0, "next": 1}[rel]
    if unit in _DAYS:
        return _weekday(said, _DAYS[unit], rel == "last").isoformat()
    if unit in ("week", "weekend"):
        monday = said - timedelta(days=said.weekday()) + timedelta(weeks=step)
        if unit == "weekend":
            return (monday + timedelta(days=5)).isoformat()
        return f"week of {monday.isoformat()}"
    if unit == "month":
        index = said.year * 12 + said.month - 1 + step
        return f"{calendar.month_name[index % 12 + 1]} {index // 12}"
    if unit == "year":
        return str(said.year + step)
    return _season(said, unit, step)


def _weekday(said: date, weekday: int, past: bool) -> date:
    if past:
        return said - timedelta(days=(said.weekday() - weekday) % 7 or 7)
    return said + timedelta(days=(weekday - said.weekday()) % 7 or 7)


def _in(said: date, count: str, span: str) -> str:
    number = int(count) if count.isdigit() else _COUNTS[count]
    if span.startswith("day"):
        return (said + timedelta(days=number)).isoformat()
    if span.startswith("week"):
        return f"week of {(said + timedelta(weeks=number)).isoformat()}"
    index = said.year * 12 + said.month - 1 + number
    return f"{calendar.month_name[index % 12 + 1]} {index // 12}"


def _season(said: date, season: str, step: int) -> str:
    """The year a season starts in (winter: its December), ``step`` seasons of that name on."""
    start = _SEASONS[season]
    if start == 12:
        current = said.year - 1 if said.month <= 2 else said.year
        within = said.month == 12 or said.month <= 2
    else:
        current = said.year
        within = start <= said.month <= start + 2
    if step > 0:
        year = current + 1 if within or said.month > start else current
    elif step < 0:
        year = current - 1 if within or said.month < start else current
    else:
        year = current
    name = "autumn" if season == "fall" else season
    return f"{name} {year}"
