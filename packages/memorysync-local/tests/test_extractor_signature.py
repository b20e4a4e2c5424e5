"""One ``Extractor`` signature, its features declared (issue 32 item 2).

Every extractor is called as ``extract(text, *, explicit=..., related=...)`` and says in
``features`` whether it is shown the user's related memories. One written to the older
signature (``extract(text)``, ``extract(text, *, explicit=False)``) keeps working,
adapted once when the server is made; a shape the server cannot call is a ``TypeError``
then, naming the signature, not a failure at the first turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from memorysync_local import (
    Extraction,
    Extractor,
    ExtractorFeatures,
    Fact,
    RelatedMemory,
    RuleBasedExtractor,
    embedded,
)
from memorysync_local._extraction.extractor import declared
from memorysync_local._extraction.llm import OpenAIExtractor
from memorysync_local._plans import Caller

CALLER = Caller("k", "local", False, None)


class Remembering:
    """Declares related memories; records what each call was given."""

    features = ExtractorFeatures(related_memories=True)

    def __init__(self) -> None:
        self.calls: list[tuple[str, bool, list[str]]] = []

    def extract(
        self, text: str, *, explicit: bool = False, related: Sequence[RelatedMemory] = ()
    ) -> Extraction:
        self.calls.append((text, explicit, [m.text for m in related]))
        return Extraction(facts=(Fact(text.rstrip(".")),))


class NotShown(Remembering):
    """The same, declaring no related memories."""

    features = ExtractorFeatures()


class OneArgument:
    """Written to the oldest signature: the text alone."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def extract(self, text: str) -> Extraction:
        self.seen.append(text)
        return Extraction(facts=(Fact(f"Said {text.rstrip('.')}"),))


class ExplicitOnly:
    """Written to the 2.x signature: ``explicit`` but no ``features``."""

    def __init__(self) -> None:
        self.explicit: list[bool] = []

    def extract(self, text: str, *, explicit: bool = False) -> Extraction:
        self.explicit.append(explicit)
        return Extraction(facts=(Fact(text.rstrip(".")),))


def tell(server: Any, text: str) -> None:
    server.store.add_turn(
        CALLER, user_id="ana", text=text, role="user", speaker=None,
        occurred_at=None, metadata=None, source="t",
    )  # fmt: skip


def add(server: Any, text: str) -> None:
    server.store.add_memory(
        CALLER, user_id="ana", text=text, source="t", tags=None, importance=None,
        session_id=None, metadata=None, client_ref=None, verbatim=False, occurred_at=None,
    )  # fmt: skip


def texts(server: Any) -> list[str]:
    from memorysync_local._storage.records import ReadWindow

    items, _ = server.store.list_memories("local", "ana", 0, 0, ReadWindow())
    return sorted(m["text"] for m in items)


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "x.db")


def test_the_shipped_extractors_have_the_one_signature() -> None:
    rules, llm = RuleBasedExtractor(), OpenAIExtractor(api_key="sk-unused")
    try:
        for extractor in (rules, llm, Remembering()):
            assert isinstance(extractor, Extractor)
            assert declared(extractor) is extractor
        assert rules.features.related_memories is False
        assert llm.features.related_memories is True
        said = "I live in Lisbon."
        assert rules.extract(said, related=[RelatedMemory(1, "x")]) == rules.extract(said)
    finally:
        llm.close()


def test_an_extractor_declaring_related_memories_is_shown_them(db: str) -> None:
    extractor = Remembering()
    with embedded(db, extractor=extractor) as server:
        tell(server, "I live in Lisbon.")
        tell(server, "I moved from Lisbon to Porto.")
        add(server, "Prefers aisle seats.")
    assert extractor.calls[0] == ("I live in Lisbon.", False, [])
    assert extractor.calls[1] == ("I moved from Lisbon to Porto.", False, ["I live in Lisbon"])
    text, explicit, _ = extractor.calls[2]
    assert (text, explicit) == ("Prefers aisle seats.", True)


def test_an_extractor_declaring_none_is_given_none(db: str) -> None:
    extractor = NotShown()
    with embedded(db, extractor=extractor) as server:
        tell(server, "I live in Lisbon.")
        tell(server, "I moved from Lisbon to Porto.")
    assert [related for _, _, related in extractor.calls] == [[], []]


def test_an_extractor_taking_the_text_alone_keeps_working(db: str) -> None:
    extractor = OneArgument()
    # A ``TextOnlyExtractor``: the type checker accepts it, and the server adapts it.
    with embedded(db, extractor=extractor) as server:
        tell(server, "I live in Lisbon.")
        add(server, "Prefers aisle seats.")
        assert texts(server) == ["Said I live in Lisbon", "Said Prefers aisle seats"]
    assert extractor.seen == ["I live in Lisbon.", "Prefers aisle seats."]


def test_an_extractor_without_features_still_gets_explicit(db: str) -> None:
    extractor = ExplicitOnly()
    with embedded(db, extractor=extractor) as server:
        tell(server, "I live in Lisbon.")
        add(server, "Prefers aisle seats.")
        assert texts(server) == ["I live in Lisbon", "Prefers aisle seats"]
    assert extractor.explicit == [False, True]


def test_an_older_extractor_is_adapted_once_and_declares_nothing() -> None:
    adapted = declared(OneArgument())
    assert isinstance(adapted, Extractor)
    assert adapted.features == ExtractorFeatures()
    assert adapted.extract("hi", explicit=True, related=[RelatedMemory(1, "x")]).facts == (
        Fact("Said hi"),
    )


class NothingDeclaredOlderSignature:
    """Declares no related memories; ``extract`` still to the 2.x signature."""

    features = ExtractorFeatures()

    def extract(self, text: str, *, explicit: bool = False) -> Extraction:
        return Extraction(facts=(Fact(f"{text} ({explicit})"),))


def test_declared_features_with_the_older_extract_keep_working() -> None:
    extractor = NothingDeclaredOlderSignature()
    adapted = declared(extractor)
    assert adapted.features is extractor.features
    assert adapted.extract("hi", explicit=True, related=[RelatedMemory(1, "x")]).facts == (
        Fact("hi (True)"),
    )


class NoText:
    def extract(self) -> Extraction:
        return Extraction()


class UndeclaredRelated:
    def extract(self, text: str, *, related: Sequence[RelatedMemory] = ()) -> Extraction:
        return Extraction()


class DeclaredWithoutRelated:
    features = ExtractorFeatures(related_memories=True)

    def extract(self, text: str, *, explicit: bool = False) -> Extraction:
        return Extraction()


class WrongFeatures:
    features = "related_memories"

    def extract(
        self, text: str, *, explicit: bool = False, related: Sequence[RelatedMemory] = ()
    ) -> Extraction:
        return Extraction()


@pytest.mark.parametrize(
    ("extractor", "message"),
    [
        (object(), "needs a method extract(self, text: str, *, explicit: bool = False, related"),
        (NoText(), "takes the text"),
        (UndeclaredRelated(), "features = ExtractorFeatures(related_memories=True)"),
        (DeclaredWithoutRelated(), "so its extract must take related: extract(self, text: str"),
        (WrongFeatures(), ".features must be an ExtractorFeatures"),
    ],
)
def test_a_shape_the_server_cannot_call_is_refused_when_it_is_made(
    extractor: object, message: str, db: str
) -> None:
    with pytest.raises(TypeError) as refused:
        embedded(db, extractor=extractor)  # type: ignore[arg-type]
    assert message in str(refused.value)
