"""Lexical recall over the stems index: candidates for one user's prompt, with scores.

The query reads only the asking user's postings (their owner token AND the
prompt's stems), ranks by BM25 on the stems column, and breaks ties by recency
(the newest row first). A question about the user themself ("what do you know
about me?") names no topic: it recalls the user's newest facts instead.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence

from memorysync_local._stemming import coverage, match_expression, owner_token, query_stems

# "about me", "about myself", "who am I", "what do you know of me": every fact is relevant.
_ABOUT_USER = re.compile(
    r"\babout\s+(?:me|myself)\b|\bwho\s+am\s+i\b|\b(?:know|remember)\s+of\s+me\b"
    r"|\btold\s+you\s+about\b",
    re.IGNORECASE,
)
# The score of a fact recalled only because the question was about the user: it
# matched no word, so it stays below any memory that matched half of the prompt.
ABOUT_USER_SCORE = 0.3


def about_user(prompt: str) -> bool:
    """Whether the prompt asks about the user in general (not about a topic)."""
    return bool(_ABOUT_USER.search(prompt))


def score(bm25_rank: float, covered: float) -> float:
    """A score in [0, 1]: 0.6 x the share of prompt stems matched + 0.4 x BM25 in [0, 1)."""
    relevance = max(0.0, -bm25_rank)
    return round(0.6 * covered + 0.4 * relevance / (1.0 + relevance), 4)


def lexical(
    conn: sqlite3.Connection, tenant: str, user_id: str, prompt: str, limit: int
) -> list[tuple[sqlite3.Row, float]]:
    """Up to ``limit`` of the user's memory rows for the prompt, best first, with scores."""
    stems = query_stems(prompt)
    expression = match_expression(stems)
    found: list[tuple[int, float]] = []
    if expression is not None:
        owner = owner_token(tenant, user_id)
        ranked = conn.execute(
            "SELECT rowid, bm25(memories_stems, 0.0, 1.0) AS rank, stems FROM memories_stems "
            "WHERE memories_stems MATCH ? ORDER BY rank, rowid DESC LIMIT ?",
            (f'owner : "{owner}" AND stems : ({expression})', limit),
        ).fetchall()
        found = [(int(r[0]), score(float(r[1]), coverage(stems, str(r[2])))) for r in ranked]
    if about_user(prompt) and len(found) < limit:
        seen = {rowid for rowid, _ in found}
        newest = conn.execute(
            "SELECT id FROM memories WHERE tenant_id = ? AND user_id = ? "
            "ORDER BY created_at DESC, id DESC LIMIT ?",
            (tenant, user_id, limit),
        ).fetchall()
        found += [(int(r[0]), ABOUT_USER_SCORE) for r in newest if int(r[0]) not in seen]
        found = found[:limit]
    return _rows(conn, tenant, user_id, found)


def _rows(
    conn: sqlite3.Connection, tenant: str, user_id: str, found: Sequence[tuple[int, float]]
) -> list[tuple[sqlite3.Row, float]]:
    if not found:
        return []
    marks = ", ".join("?" * len(found))
    # The owner filter again: a token is a hash, so the rows themselves decide.
    rows = conn.execute(
        f"SELECT * FROM memories WHERE id IN ({marks}) AND tenant_id = ? AND user_id = ?",
        (*(rowid for rowid, _ in found), tenant, user_id),
    ).fetchall()
    by_id = {int(row["id"]): row for row in rows}
    return [(by_id[rowid], value) for rowid, value in found if rowid in by_id]
