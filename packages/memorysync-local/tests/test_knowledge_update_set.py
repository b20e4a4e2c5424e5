"""The labelled knowledge-update set (``data/knowledge_updates.jsonl``) is well formed.

The set measures updates, retractions and additions (``python -m bench.knowledge_updates``);
these tests keep it honest: at least 80 cases, every band in both splits, each band
true to its definition, and every turn read by the extractor as the case needs it.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from memorysync_local import RuleBasedExtractor

DATA = Path(__file__).parent / "data"
BANDS = ("update", "retraction", "addition", "unrelated")
EXTRACTOR = RuleBasedExtractor()


def _cases() -> list[dict[str, Any]]:
    lines = (DATA / "knowledge_updates.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_the_set_is_large_and_covers_every_band_in_both_splits() -> None:
    cases = _cases()
    assert len(cases) >= 80
    assert len({c["id"] for c in cases}) == len(cases)
    counts = Counter((c["split"], c["band"]) for c in cases)
    for split in ("dev", "holdout"):
        for band in BANDS:
            assert counts[(split, band)] >= 8, (split, band)


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c["id"])
def test_each_case_is_true_to_its_band(case: dict[str, Any]) -> None:
    later = EXTRACTOR.extract(case["update"])
    if case["band"] == "retraction":
        assert later.retractions, case["update"]
        assert not later.facts
        assert case["absent"]
        assert not case["first"]
    elif case["band"] == "unrelated":  # a fact or a retraction about something else
        assert later.retractions or [f for f in later.facts if f.attribute], case["update"]
    else:
        assert [f for f in later.facts if f.attribute], case["update"]
    if case["band"] == "update":
        assert case["first"]
        assert case["absent"]
    if case["band"] == "addition":
        assert len(case["present"]) >= 2
    if case["band"] == "unrelated":
        assert case["present"] == case["first"]
    for turn in case["turns"]:
        assert EXTRACTOR.extract(turn).facts, turn


def test_the_unrelated_turns_state_no_attribute_of_the_cases() -> None:
    noise = json.loads((DATA / "knowledge_updates_noise.json").read_text("utf-8"))["turns"]
    for turn in noise:
        [fact] = EXTRACTOR.extract(turn).facts
        assert fact.attribute is None, turn
