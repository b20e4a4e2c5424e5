"""Answer type: a question that asks *when* is answered by a memory that says when.

Question answering has long narrowed a search by the kind of answer the question
expects (a time for "when", a place for "where"). Recall does so for one kind
only, the one it can tell reliably from the words: a prompt asking when
(``When did...``, ``what year...``, ``how long...``) ranks the memories that
carry a time expression (``yesterday``, ``last week``, ``in May``, ``2022``, a
weekday, a duration such as ``for 3 years``) ``WHEN_BONUS`` above their score, so
among memories matching the same words the one that dates the event comes first.
A memory matching nothing is not brought in by its time expression alone.
"""

from __future__ import annotations

import re

# How much a time expression raises a memory's score for a "when" question (a
# share of its own score, so it reorders matches without passing clearly better ones).
WHEN_BONUS = 0.25

_ASKS_WHEN = re.compile(
    r"^\s*when\b|\bwhen\s+(?:did|does|do|is|was|were|will|has|have|had)\b"
    r"|\bwhat\s+(?:year|month|day|date|time)\b|\bwhich\s+(?:year|month|day)\b|\bhow\s+long\b",
    re.IGNORECASE,
)
_MONTH = (
    r"(?:january|february|march|april|june|july|august|september|october|november|december"
    r"|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)"
)
_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_PERIOD = r"(?:week|weekend|month|year|night|evening|morning|summer|winter|spring|fall|autumn)"
_SAYS_WHEN = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|recently|lately|earlier|ago)\b"
    rf"|\b(?:last|next|this|past|coming|few|couple\s+of)\s+(?:{_PERIOD}s?|{_WEEKDAY})\b"
    rf"|\b{_MONTH}\b|\bmay\s+\d|\bin\s+may\b|\b{_WEEKDAY}s?\b"
    r"|\b(?:19|20)\d\d\b|\b\d{1,2}/\d{1,2}\b|\bsince\b"
    r"|\b(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|few|several|many)\s+"
    r"(?:years?|months?|weeks?|days?)\b",
    re.IGNORECASE,
)


def asks_when(prompt: str) -> bool:
    """Whether the prompt asks when something happened (or will)."""
    return bool(_ASKS_WHEN.search(prompt))


def says_when(text: str) -> bool:
    """Whether a memory's text carries a time expression."""
    return bool(_SAYS_WHEN.search(text))
