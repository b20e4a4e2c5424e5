"""The word index and the vectors on PostgreSQL (``WordIndex``, ``VectorStore``).

Words: ``memories.stems`` holds our stems and ``stems_tsv`` (generated, GIN-indexed)
the same stems as lexemes, untouched by any text-search dictionary. A prompt stem
``q`` becomes the tsquery ``'q[:5]':* | 'q[:4]'`` (the second only for a ``q`` longer
than four letters), which matches exactly the terms ``recall.words.matches`` accepts.
A term's document count is counted from the lexemes of the memories the GIN index
finds for its range, so BM25 gets the numbers SQLite's ``fts5vocab`` gives.

Vectors: pgvector's ``vector`` column; written from and read back to the unit-length
float32 bytes the recall layer packs (read with ``vector_send``: no text parsing).
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Sequence
from typing import TYPE_CHECKING

from memorysync_local.storage.records import VectorCounters

if TYPE_CHECKING:
    from memorysync_local.storage.postgres._session import PgSession

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


class PgWords:
    """``WordIndex`` over one session's connection."""

    def __init__(self, session: PgSession) -> None:
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


def to_literal(blob: bytes) -> str:
    """Packed float32 bytes as pgvector's text form (each float32 printed exactly)."""
    values = array("f")
    values.frombytes(blob)
    return "[" + ",".join(repr(v) for v in values.tolist()) + "]"


def from_send(sent: bytes) -> bytes:
    """``vector_send`` output (dims, unused, big-endian float4s) as native float32 bytes."""
    values = array("f")
    values.frombytes(sent[4:])
    if sys.byteorder == "little":
        values.byteswap()
    return values.tobytes()


class PgVectors:
    """``VectorStore`` over one session's connection (pgvector)."""

    def __init__(self, session: PgSession) -> None:
        self._s = session

    def put(self, model: str, vectors: Sequence[tuple[int, bytes]]) -> None:
        if not vectors:
            return
        self._s.need_vectors()
        with self._s.conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO memory_vectors (memory_id, model, vector) "
                "SELECT %s, %s, %s::vector WHERE EXISTS (SELECT 1 FROM memories WHERE id = %s) "
                "ON CONFLICT (memory_id) DO UPDATE "
                "SET model = EXCLUDED.model, vector = EXCLUDED.vector",
                [(mid, model, to_literal(blob), mid) for mid, blob in vectors],
            )

    def missing_count(self, model: str) -> int:
        self._s.need_vectors()
        row = self._s.conn.execute(
            "SELECT COUNT(*) AS n FROM memories m WHERE NOT EXISTS "
            "(SELECT 1 FROM memory_vectors v WHERE v.memory_id = m.id AND v.model = %s)",
            (model,),
        ).fetchone()
        return int(row["n"]) if row else 0

    def missing(self, model: str, after_id: int, limit: int) -> list[tuple[int, str]]:
        self._s.need_vectors()
        rows = self._s.conn.execute(
            "SELECT m.id, m.text FROM memories m WHERE m.id > %s AND NOT EXISTS "
            "(SELECT 1 FROM memory_vectors v WHERE v.memory_id = m.id AND v.model = %s) "
            "ORDER BY m.id LIMIT %s",
            (after_id, model, limit),
        ).fetchall()
        return [(int(r["id"]), str(r["text"])) for r in rows]

    def counters(self, tenant_id: str, user_id: str) -> VectorCounters:
        row = self._s.conn.execute(
            "SELECT (SELECT added FROM vector_changes WHERE tenant_id = %s AND user_id = %s) "
            "AS added, (SELECT removed FROM vector_changes WHERE tenant_id = %s "
            "AND user_id = %s) AS removed, "
            "(SELECT value FROM meta WHERE key = 'vector_erasures') AS erasures",
            (tenant_id, user_id, tenant_id, user_id),
        ).fetchone()
        assert row is not None
        return VectorCounters(
            added=int(row["added"] or 0),
            removed=int(row["removed"] or 0),
            erasures=int(row["erasures"] or 0),
        )

    def added_since(
        self, tenant_id: str, user_id: str, after_id: int
    ) -> list[tuple[int, str, bytes]]:
        self._s.need_vectors()
        rows = self._s.conn.execute(
            "SELECT v.memory_id, v.model, vector_send(v.vector) AS sent "
            "FROM memory_vectors v JOIN memories m ON m.id = v.memory_id "
            "WHERE v.memory_id > %s AND m.tenant_id = %s AND m.user_id = %s "
            "ORDER BY v.memory_id",
            (after_id, tenant_id, user_id),
        ).fetchall()
        return [(int(r["memory_id"]), str(r["model"]), from_send(r["sent"])) for r in rows]

    def of_user(self, tenant_id: str, user_id: str, model: str) -> list[tuple[int, bytes]]:
        self._s.need_vectors()
        rows = self._s.conn.execute(
            "SELECT v.memory_id, vector_send(v.vector) AS sent "
            "FROM memories m JOIN memory_vectors v ON v.memory_id = m.id "
            "WHERE m.tenant_id = %s AND m.user_id = %s AND v.model = %s",
            (tenant_id, user_id, model),
        ).fetchall()
        return [(int(r["memory_id"]), from_send(r["sent"])) for r in rows]
