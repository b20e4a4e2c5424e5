"""The word index on PostgreSQL (``WordIndex``), and its re-index at start.

``memories.stems`` holds a memory's terms (``_text.analyzer.index_text``) and
``stems_tsv`` (generated, GIN-indexed) the same terms as lexemes, untouched by any
text-search dictionary. A prompt term becomes the tsquery of its forms, each an exact
lexeme (``'perr' | 'perro'``): the terms ``_text.analyzer.Matcher`` accepts. A term's
document count is counted from the lexemes of the memories the GIN index finds for it,
so BM25 gets the numbers SQLite's ``fts5vocab`` gives. :func:`reindex_words` makes
every memory's terms again when another analyzer made them.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

import psycopg

from memorysync_local._storage.reindex import Reindex
from memorysync_local._text.analyzer import ANALYZER_VERSION, alternatives, index_text
from memorysync_local._text.attributes import attribute_words

if TYPE_CHECKING:
    from memorysync_local._storage.postgres.session import PgSession

# pg_advisory_lock key: one process re-indexes, the others wait and find it done.
REINDEX_LOCK = 0x6D7379_6E63_0002
# A prompt stem held by this share of the memories is "common" (see newest_matching):
# where an index scan from the newest memory finds its matches sooner than the GIN
# index lists them all (measured at 100k memories: about 1.25%).
COMMON_SHARE = 0.0125


def _lexeme(term: str) -> str:
    """A tsquery lexeme, quoted (a stem is word characters; quote anything else)."""
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def memory_stems(text: str, attribute: str | None) -> str:
    """What ``memories.stems`` holds for a memory: its text's terms and its attribute's
    words'."""
    return index_text(f"{text} {attribute_words(attribute)}")


def stem_tsquery(query: str) -> str:
    """The tsquery text for one prompt term: any of its forms, exactly."""
    return "(" + " | ".join(_lexeme(form) for form in alternatives(query)) + ")"


def range_terms(low: str, high: str) -> tuple[str, str, list[object]]:
    """For the terms in ``[low, high)``: a tsquery finding the memories that hold one,
    and the condition on a lexeme ``t.lexeme`` with its parameters.

    ``vocabulary_ranges`` gives exact terms only (``high`` is ``low`` plus a NUL,
    which PostgreSQL text cannot hold); a prefix's range (no caller has made one since
    the analyzer matches exactly) is still found with the GIN index, and any other
    range is compared byte-wise and found without it.
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

    def shares(self, session: PgSession) -> dict[str, float]:
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

    def __init__(self, session: PgSession) -> None:
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
            held = sum(shares.get(form, 0.0) for form in alternatives(stem))
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


def reindex_words(url: str, *, out: TextIO | None = None) -> int:
    """Make every memory's terms again if the running analyzer did not make them; how
    many memories were indexed (0 when they are current).

    Under :data:`REINDEX_LOCK` (several processes may start together); ``meta``
    records the analyzer and the progress (``_storage.reindex``), each batch of
    memories committing with it, so a process killed half-way resumes where it
    stopped. Memories written meanwhile get their terms from the running analyzer.
    """
    job = Reindex(ANALYZER_VERSION, out=out)
    with psycopg.connect(url, autocommit=True) as conn:
        if _meta(conn, Reindex.DONE) == ANALYZER_VERSION:
            return 0
        conn.execute("SELECT pg_advisory_lock(%s)", (REINDEX_LOCK,))
        try:
            return _reindex(conn, job)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (REINDEX_LOCK,))


def _meta(conn: psycopg.Connection[Any], key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = %s", (key,)).fetchone()
    return None if row is None else str(row[0])


def _remember(conn: psycopg.Connection[Any], key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (%s, %s) "
        "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
        (key, value),
    )


def _reindex(conn: psycopg.Connection[Any], job: Reindex) -> int:
    if _meta(conn, Reindex.DONE) == job.version:  # another process did it meanwhile
        return 0
    last = job.resume_from(_meta(conn, Reindex.UNDER_WAY)) or 0
    row = conn.execute("SELECT COUNT(*) FROM memories WHERE id > %s", (last,)).fetchone()
    job.begin(last, int(row[0]) if row else 0)
    while True:
        with conn.transaction():
            rows = conn.execute(
                "SELECT id, text, attribute FROM memories WHERE id > %s ORDER BY id LIMIT %s",
                (last, job.batch),
            ).fetchall()
            if not rows:
                _remember(conn, Reindex.DONE, job.version)
                conn.execute("DELETE FROM meta WHERE key = %s", (Reindex.UNDER_WAY,))
                return job.finish()
            with conn.cursor() as cursor:
                cursor.executemany(
                    "UPDATE memories SET stems = %s WHERE id = %s",
                    [(memory_stems(str(r[1]), r[2]), int(r[0])) for r in rows],
                )
            last = int(rows[-1][0])
            _remember(conn, Reindex.UNDER_WAY, job.progress(last))
        job.advance(len(rows))
