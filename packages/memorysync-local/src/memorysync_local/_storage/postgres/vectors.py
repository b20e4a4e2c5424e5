"""Vectors on PostgreSQL (``VectorStore``): pgvector's ``vector`` column, written from
and read back to the unit-length float32 bytes the recall layer packs (read with
``vector_send``: no text parsing)."""

from __future__ import annotations

import sys
from array import array
from collections.abc import Sequence
from typing import TYPE_CHECKING

from memorysync_local._storage.errors import StorageError
from memorysync_local._storage.records import VectorCounters

if TYPE_CHECKING:
    import psycopg

    from memorysync_local._storage.postgres.session import PgSession

# What an administrator runs, connected to the server's database, to allow recall by
# meaning: pgvector is not a trusted extension, so only a superuser may create it.
VECTOR_EXTENSION_SQL = "CREATE EXTENSION IF NOT EXISTS vector;"


def extension_refused(exc: psycopg.Error) -> StorageError | None:
    """The error naming the permission and the SQL when the role may not create pgvector's
    extension (``permission denied to create extension "vector"``); None for any other."""
    primary = exc.diag.message_primary or ""
    if exc.sqlstate != "42501" or 'extension "vector"' not in primary:
        return None
    return StorageError(
        "recall by meaning needs the pgvector extension in this database, and this role "
        f"may not create it ({primary}; only a superuser may). An administrator can run, "
        f"connected to this database: {VECTOR_EXTENSION_SQL} "
        "Or start without an embedder (--embedder none) to serve word recall.",
        detail=primary,
    )


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


class PostgresVectors:
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

    def nearest_in_database(
        self, tenant_id: str, user_id: str, model: str, probe: bytes, limit: int
    ) -> list[tuple[int, float]] | None:
        """With ``MEMORYSYNC_POSTGRES_VECTOR_SEARCH=hnsw``: the user's ``limit`` memories
        nearest ``probe`` (unit float32 bytes) by pgvector's HNSW index, (memory id,
        cosine), best first, ties to the newest. Approximate, and no process holds the
        user's vectors. None in the default mode (exact, in memory, as on SQLite)."""
        if not self._s.hnsw_search() or limit <= 0:
            return None
        dimensions = len(probe) // 4
        self._s.need_hnsw(model, dimensions)
        cast = f"vector({dimensions})"
        conn = self._s.conn
        # Filtered by user: pgvector 0.8's iterative scan goes on past other users' rows.
        conn.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)")
        conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(max(40, limit)),))
        rows = conn.execute(
            f"SELECT v.memory_id, 1 - (v.vector::{cast} <=> %s::{cast}) AS cosine "
            "FROM memory_vectors v JOIN memories m ON m.id = v.memory_id "
            "WHERE v.model = %s AND m.tenant_id = %s AND m.user_id = %s "
            f"ORDER BY v.vector::{cast} <=> %s::{cast} LIMIT %s",
            (literal := to_literal(probe), model, tenant_id, user_id, literal, limit),
        ).fetchall()
        found = [(int(r["memory_id"]), float(r["cosine"])) for r in rows]
        return sorted(found, key=lambda pair: (-pair[1], -pair[0]))
