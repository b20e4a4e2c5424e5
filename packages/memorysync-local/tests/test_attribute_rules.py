"""The rule extractor's update decisions: one test per attribute rule and per retraction
form (``memorysync_local._text.attributes``), read off what the extractor returns."""

from __future__ import annotations

import pytest

from memorysync_local import RuleBasedExtractor
from memorysync_local._extraction.extractor import Retraction
from memorysync_local._text.attributes import RULES, classify, is_multi_valued

EXTRACTOR = RuleBasedExtractor()

# (user turn, attribute key) for every rule of RULES, in RULES' order.
ATTRIBUTE_CASES = [
    ("I live in Lisbon with my two cats.", "residence"),
    ("I moved to Toronto last year.", "residence"),
    ("I'm in Vancouver now.", "residence"),
    ("My home is in Porto.", "residence"),
    ("I'm vegetarian.", "diet"),
    ("I eat fish again.", "diet"),
    ("I'm on a keto diet.", "diet"),
    ("I'm 34.", "age"),
    ("I just turned 35.", "age"),
    ("My age is 40.", "age"),
    ("My wife is called Ana.", "partner"),
    ("I'm dating Sam.", "partner"),
    ("I'm single now.", "partner"),
    ("My sister's name is Maria.", "name:sister"),
    ("My favourite colour is blue.", "favourite:colour"),
    ("Radiohead is my new favourite band.", "favourite:band"),
    ("I work as a teacher.", "job"),
    ("I just started a new job as a physiotherapist.", "job"),
    ("I'm a software engineer.", "job"),
    ("I'm retired now.", "job"),
    ("My job is sales director.", "job"),
    ("I work at Google.", "employer"),
    ("I left the bank and joined a fintech startup.", "employer"),
    ("I got a new job at Shopify.", "employer"),
    ("I'm employed by the city council.", "employer"),
    ("I drive a Tesla.", "vehicle"),
    ("My car is a red Fiat.", "vehicle"),
    ("I have a car.", "vehicle"),
    ("I speak French.", "languages"),
    ("I'm fluent in German.", "languages"),
    ("I also have a dog.", "pets"),
    ("I'm allergic to peanuts.", "allergies"),
    ("I have a pollen allergy.", "allergies"),
]


def test_every_rule_has_a_case() -> None:
    assert len(ATTRIBUTE_CASES) == len(RULES)
    for (turn, key), rule in zip(ATTRIBUTE_CASES, RULES, strict=True):
        [fact] = EXTRACTOR.extract(turn).facts
        assert rule.match(fact.text) is not None, (turn, rule.pattern)
        assert rule.key.replace("{slot}", key.partition(":")[2]) == key


@pytest.mark.parametrize(("turn", "key"), ATTRIBUTE_CASES)
def test_attribute_rule(turn: str, key: str) -> None:
    [fact] = EXTRACTOR.extract(turn).facts
    assert fact.attribute == key


@pytest.mark.parametrize(
    ("turn", "key"),
    [
        ("My dog is called Rex.", "name:dog"),
        ("My mom's name is Rosa.", "name:mother"),
        ("My favorite color is green.", "favourite:colour"),
    ],
)
def test_slots_are_named_one_way(turn: str, key: str) -> None:
    [fact] = EXTRACTOR.extract(turn).facts
    assert fact.attribute == key


@pytest.mark.parametrize("key", ["languages", "pets", "allergies"])
def test_multi_valued_attributes(key: str) -> None:
    assert is_multi_valued(key)


@pytest.mark.parametrize("key", ["residence", "job", "employer", "partner", "diet", "age"])
def test_single_valued_attributes(key: str) -> None:
    assert not is_multi_valued(key)


def test_facts_without_an_attribute_carry_none() -> None:
    [fact] = EXTRACTOR.extract("I love jazz.").facts
    assert fact.attribute is None
    assert classify("Likes hiking in the mountains") is None


def test_the_value_stops_before_a_trailing_qualifier() -> None:
    assert classify("Lives in Lisbon with their two cats") == ("residence", "lisbon")
    assert classify("Moved to New York last year") == ("residence", "new york")


@pytest.mark.parametrize(
    ("turn", "expected"),
    [
        ("I don't live in Lisbon any more.", Retraction("Lives in Lisbon", "residence", "lisbon")),
        ("I do not work at Google anymore", Retraction("Works at Google", "employer", "google")),
        ("I'm not vegetarian any more.", Retraction("Vegetarian", "diet", "vegetarian")),
        ("I no longer eat meat.", Retraction("Eats meat", "diet", "meat")),
        ("I'm no longer a teacher.", Retraction("Is a teacher", "job", "teacher")),
        ("I don't have a car any more.", Retraction("Has a car", "vehicle", "car")),
        ("Please forget that I like jazz.", Retraction("Likes jazz")),
        ("That's not true any more.", Retraction()),
        ("That is no longer the case.", Retraction()),
        ("Scratch that.", Retraction()),
    ],
)
def test_retraction_form(turn: str, expected: Retraction) -> None:
    found = EXTRACTOR.extract(turn)
    assert found.retractions == (expected,)
    assert found.facts == ()
    assert not found.low_value


def test_a_negation_without_any_more_is_a_fact_not_a_retraction() -> None:
    found = EXTRACTOR.extract("I don't eat pork.")
    assert found.retractions == ()
    assert [f.text for f in found.facts] == ["Does not eat pork"]


def test_a_turn_can_retract_and_state() -> None:
    found = EXTRACTOR.extract("I don't live in Lisbon any more. I live in Toronto.")
    assert [r.value for r in found.retractions] == ["lisbon"]
    assert [(f.text, f.attribute) for f in found.facts] == [("Lives in Toronto", "residence")]
