"""A turn longer than 16,000 characters (issue 12, item 8).

The text sent is cut at the last sentence end (else whitespace) within the limit, and
the cut is a WARNING; the seed is still the contract's (strip, hard 16,000 cut, hash).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from memorysync_core import (
    MAX_TEXT_CHARS,
    CapturedTurn,
    MemorySyncAPI,
    UserMemory,
    fnv1a64,
    sendable_text,
)

FILLER = "The quick brown fox jumps over the lazy dog again. "


def long_turn(fact: str = "I am allergic to peanuts.", *, early: str = "I live in Lisbon.") -> str:
    """An early fact, filler, and ``fact`` straddling character 16,000 (then more filler)."""
    count = (MAX_TEXT_CHARS - len(early) - 1 - len(fact)) // len(FILLER)
    prefix = early + " " + FILLER * count
    gap = MAX_TEXT_CHARS - len(prefix) - len(fact) + 5  # >= 5: the cut lands in ``fact``
    stripped = prefix + "z" * (gap - 1) + " " + fact + " " + FILLER * 600
    cut = stripped[:MAX_TEXT_CHARS]
    assert fact not in cut, "the hard cut must fall inside the fact"
    assert cut.endswith(fact[:-5]), "the hard cut must fall inside the fact"
    return "  " + stripped + "  "


def test_the_hard_cut_of_the_fixture_falls_inside_a_sentence() -> None:
    assert long_turn().strip()[:MAX_TEXT_CHARS].endswith("I am allergic to pea")


def test_a_long_turn_is_sent_cut_at_a_sentence_end_and_the_cut_is_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = long_turn()
    with caplog.at_level(logging.DEBUG, logger="memorysync"):
        turn = CapturedTurn.capture("user", text, scope="test::s")
    assert len(turn.text) <= MAX_TEXT_CHARS
    assert turn.text.endswith("again.")
    assert "allergic" not in turn.text
    assert text.strip().startswith(turn.text)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert str(len(text.strip())) in warnings[0].getMessage()
    assert text[:40].strip() not in caplog.text  # lengths only, never the words


def test_the_seed_stays_the_contract_seed() -> None:
    text = long_turn()
    turn = CapturedTurn.capture("user", text, scope="test::s")
    contract = "human@test::s#h" + fnv1a64("human:" + text.strip()[:MAX_TEXT_CHARS])
    assert turn.seed == contract
    reply = CapturedTurn.capture("assistant", text, scope="test::s")
    assert reply.seed == "ai@test::s#h" + fnv1a64("ai:" + text.strip()[:MAX_TEXT_CHARS])


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("short.  ", 14, "short."),
        ("One two. Three", 8, "One two."),
        ("One. Two three four", 10, "One."),
        ("One two three four", 15, "One two three"),
        ("abcdefghijklmnop", 14, "abcdefghijklmn"),
        ("句子一。句子二很长很长", 6, "句子一。"),
        ("Line one\nline two three", 14, "Line one"),
        ('He said "stop." Then more words', 20, 'He said "stop."'),
    ],
)
def test_sendable_text_cuts_at_the_last_boundary_within_the_limit(
    text: str, limit: int, expected: str
) -> None:
    assert sendable_text(text, limit=limit) == expected


async def test_no_fact_comes_from_the_fragment_of_a_long_turn(make_local_server: Any) -> None:
    server = make_local_server()
    api = MemorySyncAPI(server.api_key, base_url=server.base_url, transport=server.transport)
    memory = UserMemory(api, user_id="u", surface="test", session_id="s")
    try:
        await memory.add_user_turn(long_turn())
        await memory.record_exchange(long_turn(early="I work as a nurse."), "Noted.")
        await memory.save(long_turn(early="My dog is called Rex."))
        texts = sorted(m["text"] for m in await api.list_memories(user_id="u"))
    finally:
        await api.aclose()
    assert "Lives in Lisbon" in texts
    assert not [t for t in texts if "allergic" in t.lower()], texts
