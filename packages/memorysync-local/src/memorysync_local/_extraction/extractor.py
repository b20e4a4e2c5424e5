"""What an extractor is and what it returns: :class:`Extractor` and its
:class:`ExtractorFeatures`, :class:`Extraction`, its :class:`Fact` and
:class:`Retraction` records, and the :class:`RelatedMemory` an extractor may be shown.

The server ships two extractors, the rules (``_extraction/rules.py``, the default)
and an OpenAI-compatible chat model (``_extraction/llm.py``); any object with the
:class:`Extractor` shape will do: ``create_app(..., extractor=MyExtractor())``.
:func:`declared` checks one at construction, and adapts one written to the older
signature, ``extract(text)`` or ``extract(text, *, explicit=False)``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeAlias, runtime_checkable

FactKind = Literal["identity", "relation", "preference", "constraint", "plan", "habit", "other"]


@dataclass(frozen=True)
class Fact:
    """One durable statement about the user, rendered about the user (``Lives in Lisbon``)."""

    text: str
    kind: FactKind = "other"
    # The attribute the fact states (``attributes.classify``): decides what it supersedes.
    attribute: str | None = field(default=None, repr=False, compare=False)
    # The memory this fact replaces, when an extractor decided so (the LLM's UPDATE).
    replaces: int | None = field(default=None, repr=False, compare=False)
    # Relative dates in ``text`` ("last month") are resolved against when the turn was
    # said, in brackets after the phrase (``_extraction/dates.py``), when it is stored.
    dated: bool = field(default=False, repr=False, compare=False)


@dataclass(frozen=True)
class Retraction:
    """A statement that an earlier fact no longer holds ("I don't live in Lisbon any more").

    ``text`` is the denied fact rewritten about the user ("Lives in Lisbon"), with its
    ``attribute`` and ``value`` when a rule reads one; an empty ``text`` denies the
    user's most recently said fact ("that's not true any more"). ``memory_id`` names
    the memory to close outright, when an extractor decided so (the LLM's DELETE).
    """

    text: str = ""
    attribute: str | None = None
    value: str | None = None
    memory_id: int | None = None


@dataclass(frozen=True)
class Extraction:
    """What an extractor found in one turn.

    ``low_value`` is true when the turn carried nothing but filler (greetings,
    thanks, acknowledgements); such a turn is answered ``skipped_low_value``.
    """

    facts: tuple[Fact, ...] = ()
    low_value: bool = False
    rejected: tuple[str, ...] = field(default=(), repr=False)
    retractions: tuple[Retraction, ...] = ()


@dataclass(frozen=True)
class RelatedMemory:
    """One of the user's current memories, shown to an extractor that asks for them."""

    memory_id: int
    text: str


@dataclass(frozen=True)
class ExtractorFeatures:
    """What an extractor uses beyond the turn's text (as ``StorageFeatures`` declares
    what a backend can do); the server honours the flags, never a probe.

    ``related_memories``: each ``extract`` call is given ``related``, the user's
    current memories that share the turn's words, then their newest (at most 20), so
    the extractor can decide updates (``Fact.replaces``, ``Retraction.memory_id``).
    Without it ``related`` is always empty and the server skips the lookup.
    """

    related_memories: bool = False


@runtime_checkable
class Extractor(Protocol):
    """Turns one user utterance into facts.

    ``explicit`` is true for ``POST /memory/add``, where the caller states a fact
    on purpose (possibly already about the user, "Prefers aisle seats"); then any
    declarative sentence counts, not only first-person ones. ``related`` holds the
    user's related current memories when ``features.related_memories``, else ``()``.

    Example:
        ```python
        class Upper:
            features = ExtractorFeatures()

            def extract(
                self, text: str, *, explicit: bool = False, related: Sequence[RelatedMemory] = ()
            ) -> Extraction:
                return Extraction(facts=(Fact(text.upper()),))

        app = create_app(":memory:", extractor=Upper())
        ```
    """

    features: ExtractorFeatures

    def extract(
        self, text: str, *, explicit: bool = False, related: Sequence[RelatedMemory] = ()
    ) -> Extraction:
        """Return the facts in ``text``; must be deterministic and thread-safe."""
        ...


class TextOnlyExtractor(Protocol):
    """An extractor written to the first signature, ``extract(text)``: still accepted
    (:func:`declared` adapts it), so a type checker accepts it where a server is made."""

    def extract(self, text: str) -> Extraction:
        """Return the facts in ``text``."""
        ...


class ExplicitExtractor(Protocol):
    """An extractor written to the 2.x signature, ``extract(text, *, explicit=False)``,
    with or without ``features``: still accepted, as :class:`TextOnlyExtractor`."""

    def extract(self, text: str, *, explicit: bool = False) -> Extraction:
        """Return the facts in ``text``."""
        ...


# What ``create_app``, ``embedded`` and ``serve`` take as their extractor: one of the
# three shapes, or a spec ("rules", "openai[:MODEL]"), or None for the rules.
ExtractorSetting: TypeAlias = Extractor | TextOnlyExtractor | ExplicitExtractor | str | None

SIGNATURE = (
    "extract(self, text: str, *, explicit: bool = False, "
    "related: Sequence[RelatedMemory] = ()) -> Extraction"
)


class _OlderExtractor:
    """An extractor whose ``extract`` takes less than the signature (``extract(text)``,
    ``extract(text, *, explicit=False)``): given only what it takes."""

    def __init__(
        self,
        wrapped: object,
        method: Callable[..., Extraction],
        features: ExtractorFeatures,
        takes_explicit: bool,
    ) -> None:
        self.wrapped = wrapped
        self.features = features
        self._extract = method
        self._takes_explicit = takes_explicit

    def extract(
        self, text: str, *, explicit: bool = False, related: Sequence[RelatedMemory] = ()
    ) -> Extraction:
        if self._takes_explicit:
            return self._extract(text, explicit=explicit)
        return self._extract(text)

    def __repr__(self) -> str:
        return repr(self.wrapped)


@runtime_checkable
class _Extracting(Protocol):
    """Any object with an ``extract`` method, whatever its signature."""

    extract: Callable[..., Extraction]


def _keywords(method: Callable[..., Extraction]) -> tuple[bool, set[str]]:
    """Whether ``method`` takes one positional argument, and the keywords it takes
    (``*`` for any)."""
    try:
        parameters = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):  # not callable, or no signature to read: trust it
        return callable(method), {"*"}
    positional = [
        p
        for p in parameters
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
    ]
    required = [p for p in positional if p.default is p.empty and p.kind != p.VAR_POSITIONAL]
    takes_text = bool(positional) and len(required) <= 1
    keywords = {p.name for p in parameters if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    if any(p.kind == p.VAR_KEYWORD for p in parameters):
        keywords.add("*")
    return takes_text, keywords


def declared(extractor: object) -> Extractor:
    """``extractor`` as the server calls it, checked once (at construction).

    An :class:`Extractor` whose ``extract`` takes ``explicit`` and ``related`` is
    returned as it is. One written to the older signature, ``extract(text)`` or
    ``extract(text, *, explicit=False)``, with or without ``features`` (none: nothing
    declared), keeps working: it is given only what its ``extract`` takes. A shape the
    server cannot call is a ``TypeError`` naming the signature: no ``extract``, one
    that takes no text, ``related_memories`` declared but no ``related`` taken, or
    ``related`` taken but no ``features`` declaring it.
    """
    if not isinstance(extractor, _Extracting):
        raise TypeError(f"an extractor needs a method {SIGNATURE}; {extractor!r} has none")
    method = extractor.extract
    takes_text, keywords = _keywords(method)
    if not takes_text:
        raise TypeError(f"an extractor's extract takes the text: {SIGNATURE}")
    if isinstance(extractor, Extractor):
        features = extractor.features
        if not isinstance(features, ExtractorFeatures):
            raise TypeError(f"{extractor!r}.features must be an ExtractorFeatures")
    elif "related" in keywords:
        raise TypeError(
            f"{extractor!r}'s extract takes related but declares no features: set "
            "features = ExtractorFeatures(related_memories=True) to be given them"
        )
    else:
        features = ExtractorFeatures()
    takes_explicit = bool({"explicit", "*"} & keywords)
    takes_related = bool({"related", "*"} & keywords)
    if features.related_memories and not takes_related:
        raise TypeError(
            f"{extractor!r} declares related_memories, so its extract must take "
            f"related: {SIGNATURE}"
        )
    if isinstance(extractor, Extractor) and takes_explicit and takes_related:
        return extractor
    return _OlderExtractor(extractor, method, features, takes_explicit)
