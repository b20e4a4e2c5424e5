"""Splitting a turn into sentences and normalising their surface form."""

from __future__ import annotations

import re

_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"', "\u00a0": " "})
# A sentence ends at . ! ? (possibly repeated) followed by space, at ; or a line break.
_BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\s*;\s*|\s*\n+\s*")
# Abbreviations whose dot does not end a sentence.
_ABBREVIATION = re.compile(r"\b(?:mr|mrs|ms|dr|st|jr|sr|vs|etc|e\.g|i\.e|approx|no)\.$", re.I)
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def normalise(text: str) -> str:
    """Straight quotes, single spaces inside lines."""
    text = text.translate(_QUOTES)
    return "\n".join(re.sub(r"[ \t\r\f\v]+", " ", line).strip() for line in text.split("\n"))


def split_sentences(text: str) -> list[str]:
    """Split on sentence punctuation, semicolons and line breaks; keep abbreviations whole."""
    pieces: list[str] = []
    for raw in _BOUNDARY.split(normalise(text)):
        piece = raw.strip()
        if not piece:
            continue
        if pieces and _ABBREVIATION.search(pieces[-1]):
            pieces[-1] = f"{pieces[-1]} {piece}"
        else:
            pieces.append(piece)
    return pieces


def words(sentence: str) -> list[str]:
    """Lower-case word tokens, contractions kept whole (``i'm``, ``don't``)."""
    return _WORD.findall(sentence.lower())
