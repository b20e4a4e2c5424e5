"""The word index on SQLite: ``memories_stems``, an FTS5 table kept by triggers.

Each row holds a memory's stems and an owner token (``_recall.words.owner_token``),
so a search reads only the asking user's postings. A prompt stem is matched by an
FTS5 prefix query (:func:`stem_query`), the rule ``_recall.words.matches`` states.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from memorysync_local._recall.words import PREFIX, SHORT, owner_token


def stem_query(query: str) -> str:
    """The FTS5 query for one prompt stem: its prefix, or also its short form (quoted)."""
    if len(query) > SHORT:
        return f'("{query[:PREFIX]}"* OR "{query[:SHORT]}")'
    return f'"{query[:PREFIX]}"*'


def match_expression(stems: Sequence[str]) -> str | None:
    """An FTS5 OR-query: each stem by its prefix, and short stems whole (all quoted)."""
    parts: list[str] = []
    for query in stems:
        parts.append(f'"{query[:PREFIX]}"*')
        if len(query) > SHORT:
            parts.append(f'"{query[:SHORT]}"')
    return " OR ".join(dict.fromkeys(parts)) if parts else None


class SQLiteWordIndex:
    """:class:`~memorysync_local._storage.interface.WordIndex` on one connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def newest_matching(
        self, tenant_id: str, user_id: str, stems: Sequence[str], limit: int
    ) -> dict[int, str]:
        """The user's newest memories matching every stem: id -> indexed stems.

        FTS5 walks a posting list newest-first (``ORDER BY rowid DESC``) and stops at
        ``limit``, so a common stem costs no more than a rare one.
        """
        owned = f'owner : "{owner_token(tenant_id, user_id)}"'
        expression = " AND ".join([owned, *(f"stems : {stem_query(q)}" for q in stems)])
        rows = self._conn.execute(
            "SELECT rowid, stems FROM memories_stems WHERE memories_stems MATCH ? "
            "ORDER BY rowid DESC LIMIT ?",
            (expression, limit),
        ).fetchall()
        return {int(r[0]): str(r[1]) for r in rows}

    def indexed_rows(self) -> int:
        """The highest memory id in the index."""
        row = self._conn.execute("SELECT MAX(rowid) FROM memories_stems").fetchone()
        return int(row[0] or 0)

    def documents(self, low: str, high: str) -> int:
        """How many memories hold each term in ``[low, high)``, summed (FTS5's vocabulary,
        about 0.25 ms a range at 100k memories)."""
        self._conn.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.memories_stems_vocab "
            "USING fts5vocab(main, memories_stems, col)"
        )
        found = self._conn.execute(
            "SELECT SUM(doc) FROM temp.memories_stems_vocab "
            "WHERE col = 'stems' AND term >= ? AND term < ?",
            (low, high),
        ).fetchone()
        return int(found[0] or 0)
