"""The word index on SQLite: ``memories_stems``, an FTS5 table kept by triggers.

Each row holds a memory's terms (``_text.analyzer.index_text``) and an owner token
(``_text.owner.owner_token``), so a search reads only the asking user's postings. A
prompt term is matched by its forms, each an exact FTS5 term (:func:`stem_query`):
the rule ``_text.analyzer.Matcher`` states.

The table is made by :func:`reindex_words` (``backfill.py``) whenever the analyzer
that made its terms is not the running one: with no prefix indexes (matches are
exact) and a tokenizer that keeps a term whole (combining marks are part of a word,
diacritics were already folded by the analyzer).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from memorysync_local._text.analyzer import alternatives, index_text
from memorysync_local._text.attributes import attribute_words
from memorysync_local._text.owner import owner_token

STEMS_DDL = (
    "CREATE VIRTUAL TABLE memories_stems USING fts5 (owner, stems, "
    "tokenize = \"unicode61 remove_diacritics 0 categories 'L* N* Co M*'\")"
)


def memory_stems(text: str, attribute: str | None) -> str:
    """What the index holds for a memory: its text's terms and its attribute's words'
    (as the insert trigger computes them)."""
    return index_text(f"{text} {attribute_words(attribute)}")


def _quoted(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def stem_query(term: str) -> str:
    """The FTS5 query for one prompt term: any of its forms, each an exact term."""
    forms = alternatives(term)
    if len(forms) == 1:
        return _quoted(forms[0])
    return "(" + " OR ".join(_quoted(form) for form in forms) + ")"


def match_expression(terms: Sequence[str]) -> str | None:
    """An FTS5 OR-query over every form of every prompt term (all quoted)."""
    parts = [_quoted(form) for term in terms for form in alternatives(term)]
    return " OR ".join(dict.fromkeys(parts)) if parts else None


class SQLiteWordIndex:
    """:class:`~memorysync_local._storage.interface.WordIndex` on one connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def newest_matching(
        self, tenant_id: str, user_id: str, stems: Sequence[str], limit: int
    ) -> dict[int, str]:
        """The user's newest memories matching every term: id -> indexed terms.

        FTS5 walks a posting list newest-first (``ORDER BY rowid DESC``) and stops at
        ``limit``, so a common term costs no more than a rare one. The owner's posting
        list is long (every memory of the user): walking it beside the terms' costs
        about 0.25 ms at 100,000 memories. So the newest ``limit`` matches of anyone are
        read first, with their owners (about 0.08 ms): none, and nothing matches; every
        one the user's, or fewer than ``limit`` (all there are), and they are the answer
        with no walk (a user who holds most of the index); otherwise the owner's list is
        walked (a database of many users).
        """
        terms = [f"stems : {stem_query(q)}" for q in stems]
        token = owner_token(tenant_id, user_id)
        if terms:
            newest = self._newest(" AND ".join(terms), limit)
            if not newest:
                return {}
            mine = {int(r[0]): str(r[1]) for r in newest if r[2] == token}
            if len(mine) == limit or len(newest) < limit:
                return mine
        rows = self._conn.execute(
            "SELECT rowid, stems FROM memories_stems WHERE memories_stems MATCH ? "
            "ORDER BY rowid DESC LIMIT ?",
            (" AND ".join([f'owner : "{token}"', *terms]), limit),
        ).fetchall()
        return {int(r[0]): str(r[1]) for r in rows}

    def _newest(self, expression: str, limit: int) -> list[tuple[int, str, str]]:
        """The newest ``limit`` memories of anyone matching ``expression``: (id,
        indexed terms, owner token)."""
        rows: list[tuple[int, str, str]] = self._conn.execute(
            "SELECT rowid, stems, owner FROM memories_stems WHERE memories_stems MATCH ? "
            "ORDER BY rowid DESC LIMIT ?",
            (expression, limit),
        ).fetchall()
        return rows

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
