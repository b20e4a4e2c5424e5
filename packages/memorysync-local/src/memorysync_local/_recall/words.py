"""Word recall's view of the analyzer (:mod:`memorysync_local._text.analyzer`).

A memory is indexed by :func:`memory_stems` (its text's terms and its attribute's
words); a prompt is read by :func:`query_stems`, and a prompt term finds an indexed
term only when one of its forms equals it (:class:`Matcher`,
:func:`vocabulary_ranges`: the rule every word index applies).
"""

from __future__ import annotations

from memorysync_local._text.analyzer import (
    STOPWORDS,
    Matcher,
    index_text,
    query_stems,
    vocabulary_ranges,
)
from memorysync_local._text.attributes import attribute_words
from memorysync_local._text.owner import owner_token

__all__ = [
    "STOPWORDS",
    "Matcher",
    "index_text",
    "memory_stems",
    "owner_token",
    "query_stems",
    "vocabulary_ranges",
]


def memory_stems(text: str, attribute: str | None) -> str:
    """What the index holds for a memory: the terms of its text and of its attribute's
    words (``attribute_words``), so "Moved to Toronto" is found by "where do I live"."""
    return index_text(f"{text} {attribute_words(attribute)}")
