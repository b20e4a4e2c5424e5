"""A turn longer than 16,000 characters (issue 12 item 8, issue 23 item 3).

A captured turn is kept whole: sent as consecutive parts of at most 16,000 characters,
each cut at a sentence end (a single over-long sentence between words), each with its
own seed (``<seed>~p<n>``) and ``seq``, so nothing is reduced to its first sentence and
a retry stores nothing twice. The turn's seed is still the contract's (strip, hard
16,000 cut, hash). An explicit ``save`` (one fact) is still cut at a sentence end.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest

from memorysync_core import MemorySyncAPI, UserMemory
from memorysync_core._delivery.seeds import MAX_TEXT_CHARS, sendable_text, split_text
from memorysync_core.adapters import CapturedTurn, fnv1a64
from shared.local_server import stored_history

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


def test_a_long_turn_is_sent_whole_in_parts_cut_at_sentence_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = long_turn()
    with caplog.at_level(logging.DEBUG, logger="memorysync"):
        turn = CapturedTurn.capture("user", text, scope="test::s")
    assert turn.text == text.strip()
    parts = turn.parts()
    assert len(parts) == 3  # about 46,600 characters
    assert all(len(part.text) <= MAX_TEXT_CHARS for part in parts)
    assert parts[0].text.endswith("again.")
    assert "I am allergic to peanuts." in parts[1].text  # whole, not a fragment
    assert " ".join(part.text for part in parts) == text.strip()
    assert [part.seed for part in parts] == [f"{turn.seed}~p{n}" for n in (1, 2, 3)]
    assert [part.seq for part in parts] == [(turn.seq or 0) + n for n in (0, 1, 2)]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert text[:40].strip() not in caplog.text  # lengths only, never the words


def test_the_parts_reserve_their_seqs_and_keep_one_identity_on_every_retry() -> None:
    turn = CapturedTurn.capture("user", "Sentence one. " * 3000, scope="test::s")
    after = CapturedTurn.capture("user", "Next.", scope="test::s")
    items = turn.history_items()
    assert items == turn.history_items()  # what every retry sends
    assert len({item["idempotency_key"] for item in items}) == len(items) == 3
    assert [item["seq"] for item in items] == list(range(turn.seq or 0, (turn.seq or 0) + 3))
    assert (after.seq or 0) > items[-1]["seq"]


def test_a_single_over_long_sentence_is_cut_between_words() -> None:
    words = [f"word{n}" for n in range(9000)]  # about 70,000 characters, no sentence end
    parts = split_text(" ".join(words))
    assert len(parts) >= 5
    assert all(len(part) <= MAX_TEXT_CHARS for part in parts)
    assert [word for part in parts for word in part.split(" ")] == words


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


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("  short.  ", 14, ["short."]),
        ("", 5, []),
        ("One. Two three four", 10, ["One.", "Two three", "four"]),
        ("One two. Three four. Five", 12, ["One two.", "Three four.", "Five"]),
        ("abcdefghijklmnop", 6, ["abcdef", "ghijkl", "mnop"]),
        ("句子一。句子二很长很长", 6, ["句子一。", "句子二很长很", "长"]),
        ("Line one\nline two three", 14, ["Line one", "line two three"]),
    ],
)
def test_split_text_keeps_every_word_in_order(text: str, limit: int, expected: list[str]) -> None:
    assert split_text(text, limit=limit) == expected


def _sentences(total: int) -> str:
    """Numbered sentences, about ``total`` characters in all."""
    count = total // len("Sentence number 000000 is here. ")
    return " ".join(f"Sentence number {n:06d} is here." for n in range(count))


@pytest.mark.parametrize("size", [50_000, 200_000])
async def test_a_long_turn_is_stored_whole_in_order_and_a_retry_stores_nothing_twice(
    make_local_server: Any, size: int
) -> None:
    server = make_local_server(served=True)
    api = MemorySyncAPI(server.api_key, base_url=server.base_url)
    memory = UserMemory(api, user_id="u", surface="test", session_id="s")
    said, reply = _sentences(size), _sentences(size // 2)
    turns = [memory.capture("user", said), memory.capture("assistant", reply)]
    try:
        await memory.record_turns(turns)
        await memory.record_turns(turns)  # a retried delivery: the same parts, same ids
    finally:
        await api.aclose()
    stored = stored_history(server, server.tenant_id, "u", "test::s")
    expected = [item["content"] for turn in turns for item in turn.history_items()]
    assert len(expected) > 2 + size // MAX_TEXT_CHARS
    assert [row["content"] for row in sorted(stored, key=lambda row: row["seq"])] == expected
    user_parts = [row["content"] for row in stored if row["role"] == "user"]
    assert " ".join(user_parts) == said
    numbers = [int(n) for n in re.findall(r"number (\d+)", " ".join(user_parts))]
    assert numbers == list(range(len(numbers)))  # every sentence, once, in order


async def test_no_fact_comes_from_half_a_sentence_of_a_long_turn(make_local_server: Any) -> None:
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
    assert "Works as a nurse" in texts
    # Every part ends at a sentence end: no fact comes from half a sentence.
    assert all("peanut" in t.lower() for t in texts if "allergic" in t.lower()), texts
