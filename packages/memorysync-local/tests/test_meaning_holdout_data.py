"""The held-out recall-by-meaning sets (``bench/data/meaning_holdout*/pairs.json``) are well formed.

Only the shape is checked here: the files are held out, so no model is run on them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

BENCH_DATA = Path(__file__).resolve().parents[3] / "bench" / "data"
FIRST = BENCH_DATA / "meaning_holdout" / "pairs.json"
SECOND = BENCH_DATA / "meaning_holdout_2" / "pairs.json"
MINIMUM = {"paraphrase": 40, "lookalike": 30, "unrelated_questions": 10}
# Each set is frozen once written; its README states these sizes.
EXACT = {
    FIRST: {"paraphrase": 53, "lookalike": 44, "unrelated_questions": 15},
    SECOND: {"paraphrase": 54, "lookalike": 42, "unrelated_questions": 16},
}
# The second set's look-alikes come in three runs, in this order, each named so in "about".
SECOND_KINDS = {"homonym": 15, "sub-word": 15, "shape": 12}
SECOND_KIND_WORDS = {
    "homonym": "share a whole word",
    "sub-word": "share no word at all",
    "shape": "share only function words",
}
# Words that carry sentence shape but no topic; anything else is a content word.
_FUNCTION_TEXT = """
a an the i m s t ll re ve d my me we our us you your he she his her him it its they them their
is am are was were be been being have has had do does did will would can could should to of in
on at for with from about by up out so and but or not this that these those what which who when
where how why there just really very any all too again always
"""
FUNCTION_WORDS = frozenset(_FUNCTION_TEXT.split())


def _load(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


@pytest.fixture(scope="module", params=[FIRST, SECOND], ids=["first", "second"])
def held_out(request: pytest.FixtureRequest) -> tuple[Path, dict[str, Any]]:
    path: Path = request.param
    return path, _load(path)


@pytest.fixture(scope="module")
def data(held_out: tuple[Path, dict[str, Any]]) -> dict[str, Any]:
    return held_out[1]


def _texts(data: dict[str, Any]) -> list[str]:
    pairs = [text for key in ("paraphrase", "lookalike") for pair in data[key] for text in pair]
    return [*pairs, *data["unrelated_questions"]]


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.casefold()))


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


def test_counts_match_the_readme(held_out: tuple[Path, dict[str, Any]]) -> None:
    path, data = held_out
    sizes = {key: len(data[key]) for key in MINIMUM}
    assert sizes == EXACT[path]


def test_second_set_shares_no_text_with_the_first() -> None:
    # The first set has been run once; nothing of it may come back in the second.
    first, second = _load(FIRST), _load(SECOND)
    seen = {text.casefold().strip() for text in _texts(first)}
    assert not [text for text in _texts(second) if text.casefold().strip() in seen]


def test_second_set_paraphrases_share_no_content_word() -> None:
    for memory, question in _load(SECOND)["paraphrase"]:
        assert not (_words(memory) & _words(question)) - FUNCTION_WORDS, (memory, question)


def test_second_set_lookalike_kinds_match_the_about() -> None:
    second = _load(SECOND)
    assert sum(SECOND_KINDS.values()) == len(second["lookalike"])
    homonyms = SECOND_KINDS["homonym"]
    sub_words = homonyms + SECOND_KINDS["sub-word"]
    for index, (memory, question) in enumerate(second["lookalike"]):
        shared = _words(memory) & _words(question)
        if index < homonyms:
            assert shared - FUNCTION_WORDS, (memory, question)
        elif index < sub_words:
            assert not shared, (memory, question)
        else:
            assert shared, (memory, question)
            assert shared <= FUNCTION_WORDS, (memory, question)
    for kind, count in SECOND_KINDS.items():
        assert f"{count} {SECOND_KIND_WORDS[kind]}" in second["about"], kind


def test_second_set_has_short_form_questions() -> None:
    # "What's my blood type?", "Who's my GP?": the form users type; the README says seven.
    short = re.compile(r"(What|Who|When)'s my [\w ]+\?")
    questions = [question for _, question in _load(SECOND)["paraphrase"]]
    assert sum(1 for question in questions if short.fullmatch(question)) == 7
