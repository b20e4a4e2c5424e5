"""Changes said in passing: "I quit X", "I gave up X", "I stopped X", "I switched from
X to Y", "I sold my X", "we moved out of X", "I left X and joined Y", "not X any more,
Y now".

Each such clause both ends what it names (a retraction of X: the user's current facts
holding every word of X are closed) and is itself kept as a memory, in the user's words,
since it says something new about them ("I gave up coffee, switched to green tea").
The plain retractions ("I don't live in Lisbon any more") are read by
``_text.attributes.retraction_clause`` and store nothing.
"""

from __future__ import annotations

import re

_ADVERBS = r"(?:(?:just|finally|recently|actually|also|eventually|officially|now)\s+)*"
_SUBJECT = rf"^(?:so\s+)?(?:i|we)\s+{_ADVERBS}"
_END = r"(?=\s*(?:[,;(]|$|\s+(?:because|since|as|after|when|so|for|to|and|but|now|again)\b))"
_CHANGES: tuple[re.Pattern[str], ...] = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        rf"{_SUBJECT}quit\s+(?:my\s+job\s+at\s+)?(?P<old>.+?){_END}",
        rf"{_SUBJECT}left\s+(?P<old>.+?)\s+(?:and|to)\s+(?:\w+\s+)?"
        r"(?:joined|join|opened|open|started|start|became|become|took|went)\b",
        rf"{_SUBJECT}(?:gave|give)\s+up\s+(?P<old>.+?){_END}",
        rf"{_SUBJECT}(?:stopped|quit)\s+(?P<old>\w+ing\b.*?){_END}",
        rf"{_SUBJECT}(?:switched|changed|went)\s+from\s+(?P<old>.+?)\s+to\s+",
        rf"{_SUBJECT}(?:sold|got\s+rid\s+of)\s+(?:my|our)\s+(?P<old>.+?){_END}",
        rf"{_SUBJECT}moved\s+out\s+of\s+(?P<old>.+?){_END}",
        r"^not\s+(?:an?\s+|the\s+)?(?P<old>.+?)\s+any\s?(?:more|longer)\b",
        r"^(?:i'm|im|i\s+am|we're|we\s+are)\s+not\s+(?P<old>.+?)\s+any\s?(?:more|longer)"
        r"\s*[,;]\s*\S",
        r"^(?:i|we)\s+(?:don't|do\s+not|dont)\s+(?P<old>.+?)\s+any\s?(?:more|longer)"
        r"\s*[,;]\s*\S",
    )
)
_LEADING = re.compile(r"^(?:the|my|our|a|an|being|being\s+an?)\s+", re.IGNORECASE)


def changed(clause: str) -> str | None:
    """What a change clause ends ("the bank" for "I left the bank and joined X"), or None.

    >>> changed("I gave up coffee, switched to green tea")
    'coffee'
    >>> changed("I live in Porto") is None
    True
    """
    clean = " ".join(clause.strip().rstrip(".!").split())
    for pattern in _CHANGES:
        found = pattern.match(clean)
        if found is not None:
            old = _LEADING.sub("", found.group("old").strip(" ,"))
            return old or None
    return None
