"""Turns longer than the contract's 16,000-character limit, for the adapters' tests.

The limit cuts a sentence in half; the client must send the text cut at the sentence end
before it, so that no fact comes out of the fragment (issue 12, item 8).
"""

from __future__ import annotations

from memorysync_core import MAX_TEXT_CHARS

FILLER = "The quick brown fox jumps over the lazy dog again. "


def long_turn(early: str, fact: str = "I am allergic to peanuts.") -> str:
    """``early``, filler, then ``fact`` cut by the contract's 16,000-character limit."""
    count = (MAX_TEXT_CHARS - len(early) - 1 - len(fact)) // len(FILLER)
    prefix = early + " " + FILLER * count
    gap = MAX_TEXT_CHARS - len(prefix) - len(fact) + 5
    text = prefix + "z" * (gap - 1) + " " + fact + " " + FILLER * 300
    assert text[:MAX_TEXT_CHARS].endswith(fact[:-5])
    return text


def no_fragment(texts: list[str]) -> None:
    """The early fact (``I live in Lisbon.``) is stored; nothing came out of the cut one."""
    assert "Lives in Lisbon" in texts
    assert not [t for t in texts if "allergic" in t.lower()], texts
