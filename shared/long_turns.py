"""Turns longer than the contract's 16,000-character limit, for the adapters' tests.

A long turn is kept whole (issue 23, item 3): sent as consecutive parts, each cut at a
sentence end, so the fact that straddles the 16,000th character is neither lost nor
cut into a fragment (issue 12, item 8).
"""

from __future__ import annotations

from memorysync_core._delivery.seeds import MAX_TEXT_CHARS

FILLER = "The quick brown fox jumps over the lazy dog again. "


def long_turn(early: str, fact: str = "I am allergic to peanuts.") -> str:
    """``early``, filler, then ``fact`` straddling the 16,000th character, then filler."""
    count = (MAX_TEXT_CHARS - len(early) - 1 - len(fact)) // len(FILLER)
    prefix = early + " " + FILLER * count
    gap = MAX_TEXT_CHARS - len(prefix) - len(fact) + 5
    text = prefix + "z" * (gap - 1) + ". " + fact + " " + FILLER * 300
    assert text[:MAX_TEXT_CHARS].endswith(fact[:-6])
    return text


def no_fragment(texts: list[str]) -> None:
    """Both facts are stored whole: the early one and the one the hard cut falls in."""
    assert "Lives in Lisbon" in texts, texts
    allergies = [t for t in texts if "allergic" in t.lower()]
    assert allergies, texts  # the straddling fact was not lost...
    assert all("peanut" in t.lower() for t in allergies), texts  # ...nor cut in half


def kept_whole(contents: list[str], text: str) -> None:
    """``contents`` (the stored rows of one turn, in order) are ``text``, whole, in parts."""
    assert len(contents) >= 2
    assert all(len(part) <= MAX_TEXT_CHARS for part in contents)
    assert " ".join(contents) == text.strip()
