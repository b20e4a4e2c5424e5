"""The word index on PostgreSQL (``WordIndex``).

``memories.stems`` holds our stems and ``stems_tsv`` (generated, GIN-indexed)
the same stems as lexemes, untouched by any text-search dictionary. A prompt stem
``q`` becomes the tsquery ``'q[:5]':* | 'q[:4]'`` (the second only for a ``q`` longer
than four letters), which matches exactly the terms ``recall.words.matches`` accepts.
A term's document count is counted from the lexemes of the memories the GIN index
finds for its range, so BM25 gets the numbers SQLite's ``fts5vocab`` gives.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memorysync_local._storage.postgres.backend import PostgresSession

PREFIX = 5
SHORT = 4
# A prompt stem held by this share of the memories is "common" (see newest_matching):
# where an index scan from the newest memory finds its matches sooner than the GIN
# index lists them all (measured at 100k memories: about 1.25%).
COMMON_SHARE = 0.0125


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


class CommonLexemes:
    """Per process: the lexemes PostgreSQL's statistics list as common in the word
    index, with the share of memories holding each (``pg_stats``, refreshed by
    ANALYZE and autovacuum), read again after ``REFRESH_SECONDS``. A plan choice, so
    an estimate will do: it costs one small query a minute instead of a count."""

    REFRESH_SECONDS = 60.0

    def __init__(self) -> None:
        self._shares: dict[str, float] = {}
        self._read_at = -math.inf
        self._lock = threading.Lock()

    def shares(self, session: PostgresSession) -> dict[str, float]:
        now = time.monotonic()
        with self._lock:
            if now - self._read_at < self.REFRESH_SECONDS:
                return self._shares
        row = session.conn.execute(
            "SELECT most_common_elems::text::text[] AS lexemes, "
            "most_common_elem_freqs AS shares FROM pg_stats WHERE schemaname = "
            "current_schema() AND tablename = 'memories' AND attname = 'stems_tsv'"
        ).fetchone()
        found: dict[str, float] = {}
        if row is not None and row["lexemes"] is not None:
            lexemes = list(row["lexemes"])
            # The frequencies list ends with three summary numbers: left out.
            found = dict(zip(lexemes, row["shares"][: len(lexemes)], strict=True))
        with self._lock:
            self._shares, self._read_at = found, now
        return found


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
        # A stem in many memories: walk the newest memories back until ``limit`` match
        # (an index scan that stops early). A rarer one: the GIN index's few matches,
        # then sorted ("id + 0" keeps the planner off the scan it would misjudge:
        # PostgreSQL estimates a prefix query's matches at a flat 2%).
        order = "id DESC" if self._common(stems) else "id + 0 DESC"
        rows = self._s.conn.execute(
            "SELECT id, stems FROM memories WHERE tenant_id = %s AND user_id = %s "
            f"AND stems_tsv @@ %s::tsquery ORDER BY {order} LIMIT %s",
            (tenant_id, user_id, query, limit),
        ).fetchall()
        return {int(r["id"]): str(r["stems"]) for r in rows}

    def _common(self, stems: Sequence[str]) -> bool:
        """Whether every stem is held by at least ``COMMON_SHARE`` of the memories, by
        PostgreSQL's own statistics (:class:`CommonLexemes`)."""
        shares = self._s.common_lexemes().shares(self._s)
        if not shares:
            return False
        for stem in stems:
            prefix, short = stem[:PREFIX], stem[:SHORT] if len(stem) > SHORT else None
            held = sum(
                share
                for lexeme, share in shares.items()
                if lexeme.startswith(prefix) or lexeme == short
            )
            if held < COMMON_SHARE:
                return False
        return True

    def indexed_rows(self) -> int:
        if self._s.indexed_rows is not None:
            return self._s.indexed_rows
        row = self._s.conn.execute("SELECT COALESCE(MAX(id), 0) AS n FROM memories").fetchone()
        rows = int(row["n"]) if row else 0
        if not self._s.writing:
            self._s.indexed_rows = rows
        return rows

    def documents(self, low: str, high: str) -> int:
        query, condition, params = range_terms(low, high)
        # Each (memory, distinct term in range) pair counts once: fts5vocab's SUM(doc).
        sql = f"SELECT COUNT(*) AS n FROM memories m, unnest(m.stems_tsv) AS t WHERE {condition}"
        if query:
            sql += " AND m.stems_tsv @@ %s::tsquery"
            params.append(query)
        row = self._s.conn.execute(sql, params).fetchone()
        return int(row["n"]) if row else 0
