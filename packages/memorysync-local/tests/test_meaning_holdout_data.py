"""The held-out recall-by-meaning set (``bench/data/meaning_holdout/pairs.json``) is well formed.

Only the shape is checked here: the file is held out, so no model is run on it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

BENCH_DATA = Path(__file__).resolve().parents[3] / "bench" / "data"
PAIRS = BENCH_DATA / "meaning_holdout" / "pairs.json"
MINIMUM = {"paraphrase": 40, "lookalike": 30, "unrelated_questions": 10}


@pytest.fixture(scope="module")
def data() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(PAIRS.read_text(encoding="utf-8"))
    return loaded


def _texts(data: dict[str, Any]) -> list[str]:
    pairs = [text for key in ("paraphrase", "lookalike") for pair in data[key] for text in pair]
    return [*pairs, *data["unrelated_questions"]]


def test_keys_and_about(data: dict[str, Any]) -> None:
    assert set(data) == {"about", *MINIMUM}
    assert isinstance(data["about"], str)
    assert "2026-12-03" in data["about"]


@pytest.mark.parametrize("key", sorted(MINIMUM))
def test_counts(data: dict[str, Any], key: str) -> None:
    assert isinstance(data[key], list)
    assert len(data[key]) >= MINIMUM[key]


@pytest.mark.parametrize("key", ["paraphrase", "lookalike"])
def test_pairs_are_two_strings(data: dict[str, Any], key: str) -> None:
    for pair in data[key]:
        assert isinstance(pair, list), pair
        assert len(pair) == 2, pair
        assert all(isinstance(text, str) for text in pair), pair


def test_unrelated_are_strings(data: dict[str, Any]) -> None:
    assert all(isinstance(question, str) for question in data["unrelated_questions"])


def test_every_text_non_empty_and_short(data: dict[str, Any]) -> None:
    for text in _texts(data):
        assert text.strip(), repr(text)
        assert len(text) < 300, text


def test_no_duplicate_memories(data: dict[str, Any]) -> None:
    memories = [pair[0].casefold() for key in ("paraphrase", "lookalike") for pair in data[key]]
    assert len(memories) == len(set(memories))


def test_no_question_repeated(data: dict[str, Any]) -> None:
    questions = [pair[1] for key in ("paraphrase", "lookalike") for pair in data[key]]
    questions += data["unrelated_questions"]
    folded = [question.casefold() for question in questions]
    assert len(folded) == len(set(folded))
    memories = {pair[0].casefold() for key in ("paraphrase", "lookalike") for pair in data[key]}
    assert not memories & set(folded)


def test_counts_match_the_readme(data: dict[str, Any]) -> None:
    # The set is frozen once written; the README states these sizes.
    sizes = {key: len(data[key]) for key in MINIMUM}
    assert sizes == {"paraphrase": 53, "lookalike": 44, "unrelated_questions": 15}
