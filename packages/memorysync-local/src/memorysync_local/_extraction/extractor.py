"""What an extractor is and what it returns: :class:`Extractor`, :class:`Extraction`,
its :class:`Fact` and :class:`Retraction` records.

The server ships two extractors, the rules (``_extraction/rules.py``, the default)
and an OpenAI-compatible chat model (``_extraction/llm.py``); any object with the
:class:`Extractor` shape will do: ``create_app(..., extractor=MyExtractor())``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

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


@runtime_checkable
class Extractor(Protocol):
    """Turns one user utterance into facts.

    ``explicit`` is true for ``POST /memory/add``, where the caller states a fact
    on purpose (possibly already about the user, "Prefers aisle seats"); then any
    declarative sentence counts, not only first-person ones.

    Example:
        ```python
        class Upper:
            def extract(self, text: str, *, explicit: bool = False) -> Extraction:
                return Extraction(facts=(Fact(text.upper()),))

        app = create_app(":memory:", extractor=Upper())
        ```
    """

    def extract(self, text: str, *, explicit: bool = False) -> Extraction:
        """Return the facts in ``text``; must be deterministic and thread-safe."""
        ...
