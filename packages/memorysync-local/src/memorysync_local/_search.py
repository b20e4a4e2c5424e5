"""Retrieval helpers: the FTS5 query for a prompt, scores, and the context block."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any


def _vocab(words: str) -> frozenset[str]:
    """A word class, written as one space-separated string."""
    return frozenset(words.split())


_TOKEN = re.compile(r"\w+", re.UNICODE)
_MAX_TERMS = 64
# Function words carry no topic: matching on them would make every memory "relevant".
_STOPWORDS = _vocab(
    "a an the and or but if then else of to in on at by for with from about as into onto is "
    "am are was were be been being do does did doing have has had having i me my mine myself "
    "we us our ours you your yours he him his she her hers it its they them their theirs this "
    "that these those what which who whom whose when where why how can could would should "
    "will shall may might must not no nor so too very just also than there here any some all "
    "each every both few more most other such only own same s t don't im i'm please tell know "
    "let lets get got give want need like okay ok yes hi hello hey thanks thank up down out "
    "over again once"
)
_KIND_HEADINGS = {
    "identity": "About the user",
    "relation": "People and pets",
    "preference": "Preferences",
    "constraint": "Constraints",
    "plan": "Plans",
    "habit": "Habits",
    "other": "Other facts",
}


def query_terms(prompt: str) -> list[str]:
    """The prompt's content words, lower-cased, in order, without repeats."""
    terms: list[str] = []
    for token in _TOKEN.findall(prompt.lower()):
        if token in _STOPWORDS or token in terms:
            continue
        terms.append(token)
        if len(terms) == _MAX_TERMS:
            break
    return terms


def match_expression(terms: Sequence[str]) -> str | None:
    """An FTS5 OR-query over the terms (each quoted, so no FTS syntax leaks in), or None."""
    if not terms:
        return None
    return " OR ".join(f'"{term}"' for term in terms)


HIGHLIGHT_OPEN = "\x01"
HIGHLIGHT_CLOSE = "\x02"
_HIGHLIGHTED = re.compile("\x01([^\x02]*)\x02")


def score(bm25_rank: float, highlighted: str, term_count: int) -> float:
    """A score in [0, 1], higher is better, comparable within one response.

    Blends the share of the prompt's terms the memory matches (stable on tiny
    collections, where BM25's IDF is near zero) with SQLite's BM25 (lower rank is
    better) mapped to [0, 1).
    """
    matched = {m.lower() for m in _HIGHLIGHTED.findall(highlighted)}
    coverage = min(1.0, len(matched) / term_count) if term_count else 0.0
    relevance = max(0.0, -bm25_rank)
    return round(0.6 * coverage + 0.4 * relevance / (1.0 + relevance), 4)


def render_context(memories: Sequence[dict[str, Any]]) -> str:
    """Group recalled memories by kind, best group first, as a prompt-ready block.

    Groups are ordered by their best memory's rank and memories keep their rank
    order inside a group; each group is a heading line then ``- text`` lines.
    """
    groups: dict[str, list[str]] = {}
    for memory in memories:
        kind = str(memory.get("kind") or "other")
        groups.setdefault(kind, []).append(str(memory["value"]))
    blocks = []
    for kind, texts in groups.items():
        heading = _KIND_HEADINGS.get(kind, _KIND_HEADINGS["other"])
        blocks.append(heading + ":\n" + "\n".join(f"- {text}" for text in texts))
    return "\n\n".join(blocks)
