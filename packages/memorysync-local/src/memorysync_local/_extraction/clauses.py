"""Splitting a sentence into clauses, so each fact becomes its own memory.

People put several things in one line: "Long week, btw I moved to Toronto and my
sister is visiting in May", "I'm a nurse, nights are rough", "my favourite band is
Radiohead, have you heard their new album?". A clause starts where a new subject
about the user starts ("I", "my", "we", ...) after a comma, a colon, a dash, "and",
"but", "so", "btw"...; and where a question starts after a comma or "so", so the
question is dropped and the fact before it kept. "My wife and I are ..." stays one
clause (a compound subject), and a piece with no verb of its own ("... and my two
kids") stays with the clause before it.
"""

from __future__ import annotations

import re

from memorysync_local._extraction.sentences import words

_SUBJECT = (
    r"(?:i|i'm|im|i've|i'd|i'll|my|we|we're|we've|we'd|we'll|our|me and my)\b"
    r"(?!\s+(?:are|were|both)\b)(?!')"
)
# A question head, only when the rest of the sentence ends with a question mark.
_QUESTION = (
    r"(?:have|has|do|does|did|can|could|would|will|should|is|are|any|what|what's|how|"
    r"how's|which|where|when|why|who|got|know)\b(?=[^.!?]*\?\s*$)"
)
_JOINERS = (
    r"and|but|so|plus|also|because|cause|since|while|though|although|whereas|btw|"
    r"by the way|oh and|and also|and btw"
)
_BREAK = re.compile(
    rf"\s*[,:;\u2013\u2014]\s*(?:(?:{_JOINERS})\s+)?(?={_SUBJECT})"
    rf"|\s+-\s+(?={_SUBJECT})"
    rf"|\s+(?:{_JOINERS})\s+(?={_SUBJECT})"
    rf"|\s*,\s*(?:(?:and|but|so)\s+)?(?={_QUESTION})"
    rf"|\s+(?:so|and|but)\s+(?={_QUESTION})",
    re.IGNORECASE,
)
_VERBISH = frozenset(
    (
        *("am", "is", "are", "was", "were", "be", "been", "has", "have", "had", "do", "does"),
        *("did", "will", "would", "can", "could", "should", "shall", "may", "might", "must"),
    )
)


def split_clauses(sentence: str) -> list[str]:
    """The clauses of one sentence, in order, stripped of joining punctuation."""
    clauses: list[str] = []
    start = 0
    joiner = ""
    for found in [*_BREAK.finditer(sentence), None]:
        end = len(sentence) if found is None else found.start()
        part = sentence[start:end].strip(" ,;:-")
        if part:
            if clauses and not _has_verb(part):
                clauses[-1] = f"{clauses[-1]}{joiner}{part}"  # rejoined as said
            else:
                clauses.append(part)
        if found is not None:
            joiner, start = found.group(0), found.end()
    return clauses or [sentence]


def _has_verb(part: str) -> bool:
    """Whether a piece can stand alone: a verb after its subject (a pronoun subject is
    always followed by one; "my X ..." needs an auxiliary, a past or an -s verb)."""
    tokens = words(part)
    if not tokens:
        return False
    if tokens[0] in ("i", "we") or "'" in tokens[0]:
        return len(tokens) > 1
    if tokens[0] not in ("my", "our", "me"):
        return True
    for index, token in enumerate(tokens[1:], 1):
        if token in _VERBISH or "'" in token or token.endswith("ed"):
            return True
        if index >= 2 and index < len(tokens) - 1 and token.endswith("s"):
            return True
    return False
