"""Lexical recall over the stems index: candidates for one user's prompt, with scores.

The query reads only the asking user's postings (their owner token AND the
prompt's stems), ranks by BM25 on the stems column, and breaks ties by recency
(the newest row first). A question about the user themself ("what do you know
about me?") names no topic: it recalls the user's newest facts instead.
"""

from __future__ import annotations

import math
import re
import sqlite3
from collections.abc import Sequence

from memorysync_local._stemming import (
    Matcher,
    owner_token,
    query_stems,
    stem_query,
    vocabulary_ranges,
)

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


def score(covered: float, weight: float) -> float:
    """A score in [0, 1]: 0.6 x the share of prompt stems matched + 0.4 x their IDF share."""
    return round(0.6 * covered + 0.4 * weight, 4)


def lexical(
    conn: sqlite3.Connection,
    tenant: str,
    user_id: str,
    prompt: str,
    limit: int,
    stats: TermStats | None = None,
) -> list[tuple[sqlite3.Row, float]]:
    """Up to ``limit`` of the user's memory rows for the prompt, best first, with scores.

    Ranking every match (SQLite's bm25 over an OR query) costs a microsecond or more
    per matching row: tens of milliseconds when a prompt word is in 10% of 100,000
    memories. Instead each prompt stem fetches only its newest ``limit`` matches
    (FTS5 walks a posting list newest-first and stops), plus the newest rows that
    match the two rarest common stems together; the union is scored here. A row
    left out matches one common stem (of those it matches) and is older than
    ``limit`` rows that match it too, so it could not have made the first ``limit``.
    """
    stems = query_stems(prompt)
    found: list[tuple[int, float]] = []
    if stems:
        owner = owner_token(tenant, user_id)
        found = _ranked(conn, owner, stems, stats or TermStats(), limit)[:limit]
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


def _ranked(
    conn: sqlite3.Connection, owner: str, stems: Sequence[str], stats: TermStats, limit: int
) -> list[tuple[int, float]]:
    owned = f'owner : "{owner}"'
    candidates: dict[int, str] = {}
    capped: list[str] = []
    for query in stems:
        rows = _newest(conn, f"{owned} AND stems : {stem_query(query)}", limit)
        candidates.update(rows)
        if len(rows) == limit:
            capped.append(query)
    idf = stats.idf(conn, stems)
    # Rows with two common stems may be older than each stem's newest matches: fetch
    # the newest rows with the two rarest common stems together. (Every pair would
    # cost about 2 ms each at 100k memories, mostly to find that none exist.)
    if len(capped) >= 2:
        weight = dict(zip(stems, idf, strict=True))
        first, second = sorted(capped, key=lambda q: weight[q], reverse=True)[:2]
        pair = f"{owned} AND stems : {stem_query(first)} AND stems : {stem_query(second)}"
        candidates.update(_newest(conn, pair, limit))
    total = sum(idf) or 1.0
    matcher = Matcher(stems)
    scored = []
    for rowid, indexed in candidates.items():
        hits = matcher.hits(indexed)
        weight_share = sum(w for w, hit in zip(idf, hits, strict=True) if hit) / total
        scored.append((rowid, score(sum(hits) / len(stems), weight_share)))
    # Best score first; equal scores: the newest (highest rowid) first.
    scored.sort(key=lambda item: (item[1], item[0]), reverse=True)
    return scored


def _newest(conn: sqlite3.Connection, expression: str, limit: int) -> dict[int, str]:
    rows = conn.execute(
        "SELECT rowid, stems FROM memories_stems WHERE memories_stems MATCH ? "
        "ORDER BY rowid DESC LIMIT ?",
        (expression, limit),
    ).fetchall()
    return {int(r[0]): str(r[1]) for r in rows}


class TermStats:
    """BM25's inverse document frequencies of prompt stems, cached per store.

    A stem's document count comes from the index's vocabulary (about 0.25 ms a
    range at 100k memories); it moves slowly, so a count is reused until the
    index has grown or shrunk by ``STALE_SHARE`` since it was read.
    """

    STALE_SHARE = 0.05
    MAX_ENTRIES = 50_000

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str], tuple[int, float]] = {}

    def idf(self, conn: sqlite3.Connection, stems: Sequence[str]) -> list[float]:
        row = conn.execute("SELECT MAX(rowid) FROM memories_stems").fetchone()
        rows = float(row[0] or 0)
        return [
            math.log(1.0 + (rows - count + 0.5) / (count + 0.5))
            for count in (self._count(conn, query, rows) for query in stems)
        ]

    def _count(self, conn: sqlite3.Connection, query: str, rows: float) -> int:
        documents = 0
        for bounds in vocabulary_ranges(query):
            cached = self._counts.get(bounds)
            if cached is not None and abs(rows - cached[1]) <= self.STALE_SHARE * max(rows, 1):
                documents += cached[0]
                continue
            conn.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.memories_stems_vocab "
                "USING fts5vocab(main, memories_stems, col)"
            )
            found = conn.execute(
                "SELECT SUM(doc) FROM temp.memories_stems_vocab "
                "WHERE col = 'stems' AND term >= ? AND term < ?",
                bounds,
            ).fetchone()
            count = int(found[0] or 0)
            if len(self._counts) >= self.MAX_ENTRIES:
                self._counts.clear()
            self._counts[bounds] = (count, rows)
            documents += count
        return documents


def _rows(
    conn: sqlite3.Connection, tenant: str, user_id: str, found: Sequence[tuple[int, float]]
) -> list[tuple[sqlite3.Row, float]]:
    if not found:
        return []
    marks = ", ".join("?" * len(found))
    # The owner filter again: a token is a hash, so the rows themselves decide.
    rows = conn.execute(
        # "+" keeps SQLite on the rowid lookups: the (tenant, user) index would scan
        # every memory of the user first.
        f"SELECT * FROM memories WHERE id IN ({marks}) AND +tenant_id = ? AND +user_id = ?",
        (*(rowid for rowid, _ in found), tenant, user_id),
    ).fetchall()
    by_id = {int(row["id"]): row for row in rows}
    return [(by_id[rowid], value) for rowid, value in found if rowid in by_id]
