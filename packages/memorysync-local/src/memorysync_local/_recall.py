"""Lexical recall over the stems index: candidates for one user's prompt, with scores.

The query reads only the asking user's postings (their owner token AND the
prompt's stems) and ranks the candidates here (:func:`score`): half the share of
the prompt's stems a memory matches, half a BM25 term (each matched stem's IDF,
saturated by how often the memory repeats it and normalised by the memory's
length), so that among memories matching the same words the one that is about
them, not one that mentions them in passing, comes first. A memory that is a
question (ends with ``?``) is demoted: it repeats the words it asks about but
states nothing, and the answer usually follows it. Ties go to the shorter memory
(its match is denser), then to the newest. A question about the user themself
("what do you know about me?") names no topic: it recalls the user's newest facts
instead.
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


# BM25's term-frequency saturation and length normalisation (a low b: a memory is a
# sentence or two, so length says less about focus than in long documents).
BM25_K1 = 1.2
BM25_B = 0.3
# A memory that asks a question is ranked as if it matched this share of its score.
QUESTION_WEIGHT = 0.8


def score(counts: Sequence[int], idf: Sequence[float], length: int, average: float) -> float:
    """A relevance: 0.5 x the share of prompt stems matched + 0.5 x a BM25 term.

    ``counts`` holds, per prompt stem, how often the memory's stems match it;
    ``length`` is the memory's stem count and ``average`` the candidates' mean.
    The BM25 term is divided by what matching every stem once at the average
    length would give (so that is the IDF share matched); repeats and a short
    memory take it past 1. Recall reports ``min(1, relevance)``, ranks by it whole.
    """
    if not counts:
        return 0.0
    norm = BM25_K1 * (1 - BM25_B + BM25_B * length / max(average, 1.0))
    covered = 0
    bm25 = 0.0
    for weight, count in zip(idf, counts, strict=True):
        if count:
            covered += 1
            bm25 += weight * count * (BM25_K1 + 1) / (count + norm)
    ceiling = sum(idf) or 1.0
    return round(0.5 * covered / len(counts) + 0.5 * bm25 / ceiling, 4)


def is_question(text: str) -> bool:
    """Whether a memory's text asks rather than states (it ends with a question mark)."""
    return text.rstrip().rstrip("\"')»”").endswith("?")


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
    return demote_questions(_rows(conn, tenant, user_id, found))


def demote_questions(
    found: Sequence[tuple[sqlite3.Row, float]],
) -> list[tuple[sqlite3.Row, float]]:
    """``found`` with each question's score times ``QUESTION_WEIGHT``, re-ranked.

    The sort is stable: memories whose scores stay equal keep their tie order.
    """
    weighed = [
        (row, round(value * QUESTION_WEIGHT, 4) if is_question(str(row["text"])) else value)
        for row, value in found
    ]
    return sorted(weighed, key=lambda item: -item[1])


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
    matcher = Matcher(stems)
    lengths = {rowid: len(indexed.split()) for rowid, indexed in candidates.items()}
    average = sum(lengths.values()) / max(1, len(lengths))
    scored = [
        (rowid, score(matcher.counts(indexed), idf, lengths[rowid], average), lengths[rowid])
        for rowid, indexed in candidates.items()
    ]
    scored.sort(key=_order)
    return [(rowid, min(1.0, value)) for rowid, value, _ in scored]


def _order(item: tuple[int, float, int]) -> tuple[float, int, int]:
    """Best score first; ties: the shorter memory (a denser match), then the newest."""
    rowid, value, length = item
    return (-value, length, -rowid)


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
