"""Seeds, truncation and captured turns, as the contract fixes them."""

from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import FrozenInstanceError

import pytest

from memorysync_core._delivery.seeds import (
    MAX_TEXT_CHARS,
    assistant_turn_seed,
    new_capture_id,
    truncate_text,
    user_turn_seed,
)
from memorysync_core._delivery.turns import iso_from_micros
from memorysync_core.adapters import CapturedTurn, fnv1a64


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "cbf29ce484222325"),
        ("a", "af63dc4c8601ec8c"),
        ("héllo", "0b25d480829d74bf"),
        ("😀", "e5e45a0a241b88d8"),
        ("human:I prefer window seats.", "041ad25ce2132a2f"),
    ],
)
def test_fnv1a64_matches_the_contract_vectors(text: str, expected: str) -> None:
    assert fnv1a64(text) == expected


def _reference(units: list[int]) -> str:
    value = 0xCBF29CE484222325
    for unit in units:
        value = ((value ^ unit) * 0x100000001B3) % 2**64
    return f"{value:016x}"


def test_fnv1a64_hashes_a_surrogate_pair_as_two_utf16_units() -> None:
    assert fnv1a64("😀") == _reference([0xD83D, 0xDE00])
    assert fnv1a64("x😀y") == _reference([0x78, 0xD83D, 0xDE00, 0x79])
    # Not the code point, not the UTF-8 bytes.
    assert fnv1a64("😀") != _reference([0x1F600])
    assert fnv1a64("😀") != _reference(list("😀".encode()))


def test_fnv1a64_is_16_zero_padded_lower_hex_digits() -> None:
    for text in ("", "a", "zz", "😀" * 3, "x" * 1000):
        assert re.fullmatch(r"[0-9a-f]{16}", fnv1a64(text))


def test_user_and_assistant_seeds_follow_the_scheme() -> None:
    assert user_turn_seed("autogen::s1", "I prefer window seats.") == (
        "human@autogen::s1#h041ad25ce2132a2f"
    )
    assert assistant_turn_seed("ag2::s1", "Noted.") == f"ai@ag2::s1#h{fnv1a64('ai:Noted.')}"


def test_seeds_strip_whitespace_before_hashing() -> None:
    assert user_turn_seed("s", "  I prefer window seats.\n") == user_turn_seed(
        "s", "I prefer window seats."
    )


def test_seed_of_empty_text_is_the_hash_of_the_prefix() -> None:
    assert user_turn_seed("s", "   ") == f"human@s#h{fnv1a64('human:')}"


def test_the_two_surfaces_seed_the_same_text_differently() -> None:
    assert user_turn_seed("autogen::s", "hi") != user_turn_seed("ag2::s", "hi")


def test_exactly_16000_characters_are_kept_and_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    text = "é" * MAX_TEXT_CHARS
    with caplog.at_level(logging.DEBUG, logger="memorysync.seeds"):
        assert truncate_text(text) == text
    assert not caplog.records


def test_longer_text_is_cut_to_16000_code_points_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = "😀" * (MAX_TEXT_CHARS + 5)
    with caplog.at_level(logging.DEBUG, logger="memorysync.seeds"):
        cut = truncate_text(text)
    assert len(cut) == MAX_TEXT_CHARS
    assert [r.getMessage() for r in caplog.records] == [
        f"truncated a text of {MAX_TEXT_CHARS + 5} characters to {MAX_TEXT_CHARS}"
    ]
    assert "😀" not in caplog.text  # lengths only, never the text
    assert user_turn_seed("s", text) == user_turn_seed("s", cut)
    assert user_turn_seed("s", text) != user_turn_seed("s", text[: MAX_TEXT_CHARS - 1])


def test_truncation_happens_after_stripping() -> None:
    text = " " * 10 + "a" * MAX_TEXT_CHARS + " " * 10
    assert truncate_text(text) == "a" * MAX_TEXT_CHARS


def test_truncate_rejects_non_strings_and_bad_limits() -> None:
    with pytest.raises(TypeError, match="text must be a string"):
        truncate_text(12)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="limit"):
        truncate_text("a", limit=0)


def test_capture_ids_are_fresh_hex() -> None:
    first, second = new_capture_id(), new_capture_id()
    assert first != second
    assert re.fullmatch(r"[0-9a-f]{32}", first)


def test_captured_turn_fixes_seed_capture_id_and_time_once() -> None:
    turn = CapturedTurn.capture("user", "  I prefer window seats. ", scope="autogen::s1")
    assert turn.text == "I prefer window seats."
    assert turn.seed == "human@autogen::s1#h041ad25ce2132a2f"
    assert turn.idempotency_key == f"{turn.seed}:{turn.capture_id}"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", turn.occurred_at)
    assert turn.history_items() == [
        {
            "role": "user",
            "content": "I prefer window seats.",
            "occurred_at": turn.occurred_at,
            "idempotency_key": turn.idempotency_key,
            "seq": turn.seq,
        }
    ]
    with pytest.raises(FrozenInstanceError):
        turn.capture_id = "other"  # type: ignore[misc]


def test_a_genuine_repeat_gets_a_new_key_and_a_given_turn_id_is_reused() -> None:
    first = CapturedTurn.capture("assistant", "Sure.", scope="ag2::s")
    again = CapturedTurn.capture("assistant", "Sure.", scope="ag2::s")
    assert first.seed == again.seed
    assert first.idempotency_key != again.idempotency_key
    mine = CapturedTurn.capture("assistant", "Sure.", scope="ag2::s", capture_id="turn-7")
    assert mine.idempotency_key == f"{first.seed}:turn-7"
    assert mine.seed.startswith("ai@ag2::s#h")


def test_history_item_carries_the_speaker_name_as_payload() -> None:
    turn = CapturedTurn.capture("assistant", "Hi", scope="ag2::s", name="planner")
    assert turn.history_items()[0]["payload"] == {"name": "planner"}


def test_capture_rejects_unknown_roles_and_blank_scope() -> None:
    with pytest.raises(ValueError, match="role"):
        CapturedTurn.capture("system", "x", scope="s")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="scope"):
        CapturedTurn.capture("user", "x", scope="")


def test_seq_is_the_capture_time_in_microseconds_and_strictly_increases() -> None:
    before = time.time_ns() // 1000
    turns = [CapturedTurn.capture("user", "Same words.", scope="ag2::s") for _ in range(2000)]
    after = time.time_ns() // 1000
    seqs = [turn.seq for turn in turns]
    assert all(isinstance(seq, int) for seq in seqs)
    assert seqs == sorted(set(seqs))  # strictly increasing
    assert before <= seqs[0]
    assert seqs[-1] <= after + len(seqs)  # bumped at most 1 µs per capture
    # occurred_at is the same moment, to the millisecond.
    first = turns[0]
    assert first.occurred_at == iso_from_micros(first.seq or 0)


def test_seq_is_shared_by_every_scope_and_thread_of_the_process() -> None:
    seqs: list[int] = []
    lock = threading.Lock()

    def capture(scope: str) -> None:
        for _ in range(500):
            seq = CapturedTurn.capture("assistant", "Hi.", scope=scope).seq
            assert seq is not None
            with lock:
                seqs.append(seq)

    threads = [threading.Thread(target=capture, args=(f"ag2::{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(seqs)) == 2000  # no two captures share a seq


def test_a_retry_resends_the_same_seq_and_a_genuine_repeat_gets_a_new_one() -> None:
    turn = CapturedTurn.capture("user", "I live in Porto.", scope="ag2::s")
    assert turn.history_items() == turn.history_items()  # what every retry sends
    again = CapturedTurn.capture("user", "I live in Porto.", scope="ag2::s")
    assert (again.seq or 0) > (turn.seq or 0) > 0
    assert again.idempotency_key != turn.idempotency_key
