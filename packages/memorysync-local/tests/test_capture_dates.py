"""Dates said with a fact, resolved against when it was said (``_extraction/dates.py``)."""

from __future__ import annotations

from datetime import date

import pytest

from memorysync_local import RuleBasedExtractor
from memorysync_local._extraction.dates import resolve_dates

SAID = date(2026, 12, 3)  # a Thursday


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Moved to Toronto last month", "Moved to Toronto last month (November 2026)"),
        ("Running a half marathon in April", "Running a half marathon in April (April 2027)"),
        ("I moved here in April", "I moved here in April (April 2026)"),
        ("My cat turned 3 yesterday", "My cat turned 3 yesterday (2026-12-02)"),
        ("Dinner with my in-laws on Saturday", "Dinner with my in-laws on Saturday (2026-12-05)"),
        ("Starting next week", "Starting next week (week of 2026-12-07)"),
        ("Visiting next summer", "Visiting next summer (summer 2027)"),
        ("Back in two weeks", "Back in two weeks (week of 2026-12-17)"),
        ("Writing mostly on Sunday mornings", "Writing mostly on Sunday mornings"),
        ("I swim on Sundays", "I swim on Sundays"),
        ("It may rain", "It may rain"),
    ],
)
def test_relative_dates_are_resolved_and_habits_left_alone(text: str, expected: str) -> None:
    assert resolve_dates(text, SAID) == expected


def test_the_extractor_marks_its_facts_for_dating_and_keeps_the_words() -> None:
    (fact,) = RuleBasedExtractor().extract("Btw I finally moved to Toronto last month!").facts
    assert fact.text == "Finally moved to Toronto last month"
    assert fact.dated


@pytest.mark.parametrize(
    "text",
    [
        "I already tried that.",
        "I just woke up.",
        "I understood it wrong.",
        "haha thanks, I'll check it out later",
        "I need to sleep, talk tomorrow",
        "I need ideas for a fun lab.",
        "We talked about this yesterday.",
    ],
)
def test_remarks_about_the_conversation_are_not_memories(text: str) -> None:
    assert RuleBasedExtractor().extract(text).facts == ()


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("I've taken up fishing on the Vltava", "Has taken up fishing on the Vltava"),
        ("Biscuit had surgery on his paw last month", "Biscuit had surgery on his paw last month"),
        ("He flew in from Bangalore", "He flew in from Bangalore"),
        ("On a happier note I joined a choir", "Joined a choir"),
        ("I always bring my own snacks", "I always bring my own snacks"),
    ],
)
def test_events_and_people_are_kept_in_the_users_words(text: str, kept: str) -> None:
    assert [fact.text for fact in RuleBasedExtractor().extract(text).facts] == [kept]
