"""The word index on PostgreSQL (``WordIndex``).

``memories.stems`` holds our stems and ``stems_tsv`` (generated, GIN-indexed)
the same stems as lexemes, untouched by any text-search dictionary. A prompt stem
``q`` becomes the tsquery ``'q[:5]':* | 'q[:4]'`` (the second only for a ``q`` longer
than four letters), which matches exactly the terms ``recall.words.matches`` accepts.
A term's document count is counted from the lexemes of the memories the GIN index
finds for its range, so BM25 gets the numbers SQLite's ``fts5vocab`` gives.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memorysync_local.storage.postgres.backend import PostgresSession

PREFIX = 5
SHORT = 4


def _lexeme(term: str) -> str:
    """A tsquery lexeme, quoted (a stem is word characters; quote anything else)."""
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def stem_tsquery(query: str) -> str:
    """The tsquery text for one prompt stem (see the module docstring)."""
    found = f"{_lexeme(query[:PREFIX])}:*"
    if len(query) > SHORT:
        found += f" | {_lexeme(query[:SHORT])}"
    return f"({found})"


def range_terms(low: str, high: str) -> tuple[str, str, list[object]]:
    """For the terms in ``[low, high)``: a tsquery finding the memories that hold one,
    and the condition on a lexeme ``t.lexeme`` with its parameters.

    The two ranges ``vocabulary_ranges`` gives are one exact term (``high`` is ``low``
    plus a NUL, which PostgreSQL text cannot hold) and a prefix's; any other range
    is compared byte-wise and found without the GIN index.
    """
    if low and high == low + "\x00":
        return _lexeme(low), "t.lexeme = %s", [low]
    if low and high == low[:-1] + chr(ord(low[-1]) + 1):
        return f"{_lexeme(low)}:*", "starts_with(t.lexeme, %s)", [low]
    if "\x00" in low + high:
        raise ValueError("a term range cannot contain NUL characters")
    return "", 't.lexeme COLLATE "C" >= %s AND t.lexeme COLLATE "C" < %s', [low, high]


class PostgresWordIndex:
    """``WordIndex`` over one session's connection."""

    def __init__(self, session: PostgresSession) -> None:
        self._s = session

    def newest_matching(
        self, tenant_id: str, user_id: str, stems: Sequence[str], limit: int
    ) -> dict[int, str]:
        if not stems or limit <= 0:
            return {}
        query = " & ".join(stem_tsquery(stem) for stem in stems)
        rows = self._s.conn.execute(
            "SELECT id, stems FROM memories WHERE tenant_id = %s AND user_id = %s "
            "AND stems_tsv @@ %s::tsquery ORDER BY id DESC LIMIT %s",
            (tenant_id, user_id, query, limit),
        ).fetchall()
        return {int(r["id"]): str(r["stems"]) for r in rows}

    def indexed_rows(self) -> int:
        row = self._s.conn.execute("SELECT COALESCE(MAX(id), 0) AS n FROM memories").fetchone()
        return int(row["n"]) if row else 0

    def documents(self, low: str, high: str) -> int:
        query, condition, params = range_terms(low, high)
        # Each (memory, distinct term in range) pair counts once: fts5vocab's SUM(doc).
        sql = f"SELECT COUNT(*) AS n FROM memories m, unnest(m.stems_tsv) AS t WHERE {condition}"
        if query:
            sql += " AND m.stems_tsv @@ %s::tsquery"
            params.append(query)
        row = self._s.conn.execute(sql, params).fetchone()
        return int(row["n"]) if row else 0
