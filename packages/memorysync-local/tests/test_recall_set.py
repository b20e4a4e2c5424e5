"""The labelled recall set (``data/recall_*.jsonl``) is well formed.

The set measures recall quality (``python -m bench.recall_quality``); these tests
keep it honest: enough cases in every band of both splits, every expected fact
really stored by the extractor, and each band true to its definition (``same``
shares a content word with the fact, ``paraphrase`` shares none).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from memorysync_local import RuleBasedExtractor
from memorysync_local._text.analyzer import STOPWORDS

DATA = Path(__file__).parent / "data"
SPLITS = ("dev", "holdout")
BANDS = ("same", "related", "paraphrase")


def _scenarios() -> list[tuple[str, dict[str, Any]]]:
    return [
        (split, json.loads(line))
        for split in SPLITS
        for line in (DATA / f"recall_{split}.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]


def _noise() -> list[str]:
    return list(json.loads((DATA / "recall_noise.json").read_text(encoding="utf-8"))["turns"])


def query_terms(prompt: str) -> list[str]:
    """The prompt's content words, lower-cased, in order, without repeats."""
    terms: list[str] = []
    for token in re.findall(r"\w+", prompt.lower()):
        if token not in STOPWORDS and token not in terms:
            terms.append(token)
    return terms


def _words(text: str) -> set[str]:
    # Exact words, plural endings aside: what "shares a content word" means here.
    terms = query_terms(text.replace("'", " "))
    return {re.sub(r"(?<=[a-z]{3})s$", "", re.sub(r"ies$", "y", t)) for t in terms}


def _stored_facts(turns: list[str]) -> list[str]:
    extractor = RuleBasedExtractor()
    return [fact.text for turn in turns for fact in extractor.extract(turn).facts]


def test_the_set_has_every_band_in_both_splits_and_about_me_questions() -> None:
    counts: Counter[tuple[str, str]] = Counter()
    about_me: Counter[str] = Counter()
    for split, scenario in _scenarios():
        for question in scenario["questions"]:
            assert question["band"] in BANDS, question
            counts[(split, question["band"])] += 1
            about_me[split] += question["expect"] == ["*"]
    assert sum(counts.values()) >= 150
    for split in SPLITS:
        for band in BANDS:
            assert counts[(split, band)] >= 15, (split, band, counts)
        assert about_me[split] >= 3, about_me


def test_scenario_names_are_unique_and_match_their_split() -> None:
    names = [scenario["scenario"] for _, scenario in _scenarios()]
    assert len(names) == len(set(names))
    for split, scenario in _scenarios():
        assert scenario["scenario"].startswith(f"{split}-")


@pytest.mark.parametrize("split", SPLITS)
def test_every_expected_fact_is_stored_and_no_distractor_answers(split: str) -> None:
    noise_facts = _stored_facts(_noise())
    assert len(noise_facts) == len(_noise()), "every unrelated turn stores one fact"
    for name, scenario in _scenarios():
        if name != split:
            continue
        facts = _stored_facts(scenario["turns"])
        for question in scenario["questions"]:
            expect = question["expect"]
            if expect == ["*"]:
                continue
            matching = [f for f in facts if any(e.lower() in f.lower() for e in expect)]
            assert matching, (scenario["scenario"], question, facts)
            # An unrelated fact must never count as the answer.
            assert not [f for f in noise_facts if any(e.lower() in f.lower() for e in expect)]


@pytest.mark.parametrize("split", SPLITS)
def test_bands_are_true_to_their_definition(split: str) -> None:
    for name, scenario in _scenarios():
        if name != split:
            continue
        facts = _stored_facts(scenario["turns"])
        for question in scenario["questions"]:
            if question["expect"] == ["*"]:
                continue
            target = [f for f in facts if any(e.lower() in f.lower() for e in question["expect"])]
            shared = _words(question["question"]) & set().union(*(_words(f) for f in target))
            if question["band"] == "same":
                assert shared, (scenario["scenario"], question["question"])
            elif question["band"] == "paraphrase":
                assert not shared, (scenario["scenario"], question["question"], shared)
